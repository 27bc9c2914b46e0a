"""The README and docs/ teach by example, so their examples must work: every ```bash and
```python block runs, in order, in a scratch folder laid out like the repository (its files
linked, `../shared` beside it), and the output the README shows is what the command prints,
times aside. The README's own Python example once failed (`from regal import performance`)
with nothing to catch it. Their prose stays readable: no paragraph longer than 8 lines, no
table cell longer than 300 characters."""
import os
import re
import subprocess
import sys

import pytest
from conftest import REPO_ROOT, SHARED_GRAPHS

DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


def blocks(path) -> list[tuple[str, str]]:
  """(language, code) of each fenced block, in order."""
  return [(match.group(1), match.group(2)) for match in FENCE.finditer(path.read_text())]


def runnable(language: str, code: str) -> str | None:
  """The shell text a block runs, or None. The install steps of the README's first block are
  what CI has just run (`.ci/run`), and its test command is this suite: the rest runs."""
  if language == "python":
    return f"python3 - <<'PYTHON'\n{code}PYTHON\n"
  if language != "bash":
    return None
  lines = []
  for line in code.splitlines():
    line = re.sub(r"^python3 -m pip install [^&]*&& ", "", line)
    if not re.match(r"python3 -m pytest\b", line):
      lines.append(line)
  return "set -euo pipefail\n" + "\n".join(lines) + "\n"


def _sandbox(tmp_path, anywhere: bool = False):
  """A folder with the repository's top-level entries linked in and the shared graphs at
  ../shared, so the examples' relative paths hold and what they write stays out of the
  repository; `anywhere`: an empty folder instead, with nothing of the checkout beside it (the
  README's examples run from any directory on what the package installs)."""
  work = tmp_path / ("anywhere" if anywhere else "regal")
  work.mkdir()
  if not anywhere:
    for entry in REPO_ROOT.iterdir():
      if not entry.name.startswith(".") and entry.name not in ("runs", "sweeps"):
        (work / entry.name).symlink_to(entry)
    if SHARED_GRAPHS.is_dir():
      (tmp_path / "shared").symlink_to(SHARED_GRAPHS.parent)
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  (bin_dir / "python3").symlink_to(sys.executable)
  env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
  return work, env


def _masked(text: str) -> list[str]:
  """Output lines with their seconds masked, and whether the search's programs were compiled
  or loaded from the caches (which a run before this one in the suite decides): the things that
  differ between runs."""
  lines = [re.sub(r"\d+(\.\d+)? s\b", "N s", line) for line in text.splitlines()]
  lines = [re.sub(r"programs were (compiled|loaded from the cache) \(.*", "programs were had",
                  line) for line in lines]
  # The live line's updates come every few seconds: how many a run prints is its speed.
  progress = re.compile(r"^  [\d,]+ of [\d,]+ evaluations, best objective ")
  return [line for k, line in enumerate(lines)
          if not (progress.match(line) and k and progress.match(lines[k - 1]))]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_every_example_runs_and_prints_what_the_document_shows(path, tmp_path, shared_graphs):
  work, env = _sandbox(tmp_path, anywhere=path.name == "README.md")
  printed = ""
  ran = 0
  for language, code in blocks(path):
    if language == "console":  # The output the block before it prints, shown to the reader.
      assert _masked(code) == _masked(printed), (path.name, printed)
      continue
    script = runnable(language, code)
    if script is None:
      continue
    run = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, (path.name, code, run.stdout[-2000:], run.stderr[-3000:])
    printed, ran = run.stdout + run.stderr, ran + 1
  if path.name == "README.md":
    assert ran >= 5  # The first command, the own graph, sharded, training, sweep, Python.


def test_a_broken_example_fails(tmp_path, shared_graphs):
  """The check above can fail: the README's old Python import."""
  work, env = _sandbox(tmp_path)
  script = runnable("python", "from regal import performance\n")
  run = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True,
                       text=True, timeout=120)
  assert run.returncode != 0 and "ImportError" in run.stderr


def _paragraphs(text: str) -> list[list[str]]:
  """Runs of prose lines: not in a fenced block, a table, a heading or a list item's start."""
  runs, current, fenced = [], [], False
  for line in text.splitlines():
    if line.startswith("```"):
      fenced = not fenced
    prose = (not fenced and line.strip() and not line.startswith(("```", "|", "#", "- ", "<!--"))
             and not re.match(r"\d+\. ", line))
    if prose:
      current.append(line)
    else:
      if current:
        runs.append(current)
      current = [line] if line.startswith("- ") and not fenced else []
  if current:
    runs.append(current)
  return runs


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_paragraphs_and_table_cells_stay_short(path):
  text = path.read_text()
  long = [run[0][:60] for run in _paragraphs(text) if len(run) > 8]
  assert not long, (path.name, long)
  cells = [cell.strip() for line in text.splitlines() if line.startswith("|")
           for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
  assert not [cell[:60] for cell in cells if len(cell) > 300], path.name
