r"""How soon `regal.optimize` answers: compile seconds of a first and a second identical run
(what the persistent caches save), the process's seconds beyond its search, and the seconds to
refuse a mistake.

  python -m regal_experiments.bench.startup              # 3 repeats of each job, 5 of each mistake
  python -m regal_experiments.bench.startup --quick      # the default job once, each mistake once

Each job is a `python -m regal.optimize` command run as a user runs it, one process per run,
with its caches under a fresh `REGAL_CACHE_DIR` per repeat (`regal.startup`). A repeat runs it
four times: with its caches empty (a first run), again (a second identical run), with JAX's
caches emptied (JAX's own and the kept executables, `regal_brkga.programs`), then with numba's
emptied, so each cache's share of the first run's compiling shows. From each run's JSON: JAX's compile seconds (tracing, lowering, compiling or loading),
numba's (its scoring kernels), the search's seconds and the answer; and the process's wall
seconds. Medians over the repeats; the answers must all agree (a cache must not change one).
Then each of `MISTAKES` (issue 80's: a missing file, an unknown flag, a mistake in a flag's
value, the devices, the graph or a policy) runs `--mistakes` times: the process's wall seconds
to its one `error:` line, median.
Targets (issue 80): a second identical default run compiles in at most `TARGET_SECONDS`, and
its process takes at most `OVERHEAD_SECONDS` beyond its search; a mistake is answered in at
most `MISTAKE_SECONDS`.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import errors  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal_experiments.bench import mistakes as mistakes_lib  # noqa: E402
from regal.app.result import Result  # noqa: E402

_QUICK = flags.DEFINE_bool("quick", False, "The default job only, one repeat.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Repeats of each job (fresh caches each).",
                                lower_bound=1, upper_bound=100)
_MISTAKES = flags.DEFINE_integer("mistakes", 5, "Runs of each mistake (median).",
                                 lower_bound=1, upper_bound=100)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "startup"),
                           "Where the report goes.")

TARGET_SECONDS = 0.5
OVERHEAD_SECONDS = 1.5
MISTAKE_SECONDS = 0.5
MISTAKES = {"missing graph file": ["--graph", "no_such_graph.json"],
            "unknown flag": ["--no_such_flag"],
            "no devices": ["--devices", "0"],
            "cyclic graph": ["--graph", "cyclic.json"],
            "negative cost": ["--graph", "negative.json"],
            "empty file": ["--graph", "empty.json"],
            "negative time limit": ["--time_limit", "-3"],
            "missing policy folder": ["--policy", "no_such_dir"],
            "policy of another model": ["--graph", "tiny.json", "--policy", "sync_policy"],
            "ONNX without its weights": ["--graph", "unweighted.onnx"]}
SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "..", "shared", "graphs")
JOBS = {
    "default": [],
    "doppler ffnn, 4 devices": ["--graph", os.path.join(SHARED, "doppler", "ffnn_192nodes.txt"),
                                "--devices", "4", "--model", "doppler"],
}
RUNS = (("first run (caches empty)", ()), ("second run (caches kept)", ()),
        ("JAX's caches emptied", ("jax", "programs")), ("numba's cache emptied", ("numba",)))
# The caches a run must find where `regal.startup` puts them, not where the caller's are.
_CALLER_CACHES = ("JAX_COMPILATION_CACHE_DIR", "NUMBA_CACHE_DIR", "REGAL_PROGRAM_CACHE",
                  "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")


def run_once(job: list[str], root: str, out: str) -> dict:
  """One `regal.optimize` process with its caches under `root`: its timings and answer."""
  env = {k: v for k, v in os.environ.items() if k not in _CALLER_CACHES}
  env["REGAL_CACHE_DIR"] = root
  data, wall = command.run_optimize(job, out, env=env)
  result = Result.from_json(data)
  seconds = result.wall_seconds
  return {"process_seconds": wall, "compile_jax": seconds["compile_jax"],
          "compile_numba": seconds["compile_numba"], "search": seconds["search"],
          "overhead": wall - seconds["search"], "total": seconds["total"],
          "objective": result.objective}


def mistake_seconds(args: list[str], folder: str) -> tuple[float, str]:
  """(wall seconds, stderr) of one `regal.optimize` run refusing `args`, run in `folder`."""
  start = time.perf_counter()
  done = subprocess.run([sys.executable, "-m", "regal.optimize", *args], capture_output=True,
                        text=True, cwd=folder)
  seconds = time.perf_counter() - start
  lines = done.stderr.strip().splitlines()
  if done.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
    raise errors.RegalError(f"regal.optimize {' '.join(args)} did not answer with one error "
                            f"line (exit {done.returncode}): {done.stderr.strip()[-300:]}")
  return seconds, lines[0]


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("repeats", "mistakes"))
  jobs = {"default": JOBS["default"]} if _QUICK.value else JOBS
  missing = [arg for job in jobs.values() for arg in job if arg.endswith(".txt") and
             not os.path.isfile(arg)]
  if missing:
    raise errors.ConfigError(f"reference graph not found: {missing[0]} (../shared beside the "
                             f"repository)")
  repeats = 1 if _QUICK.value else _REPEATS.value
  rows: dict[str, dict[str, list[dict]]] = {job: {label: [] for label, _ in RUNS}
                                             for job in jobs}
  scratch = tempfile.mkdtemp(prefix="regal-compile-cache-")
  try:
    for repeat in range(repeats):
      for job, args in jobs.items():
        root = os.path.join(scratch, f"cache-{repeat}-{len(rows[job][RUNS[0][0]])}")
        for label, emptied in RUNS:
          for name in emptied:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
          row = run_once(args, root, os.path.join(scratch, "result.json"))
          rows[job][label].append(row)
          print(f"{job}, repeat {repeat + 1}, {label}: JAX {row['compile_jax']:.2f} s, numba "
                f"{row['compile_numba']:.2f} s, search {row['search']:.2f} s, process "
                f"{row['process_seconds']:.2f} s", flush=True)
        shutil.rmtree(root, ignore_errors=True)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)

  mistakes = {}
  folder = tempfile.mkdtemp(prefix="regal-mistakes-")
  mistakes_lib.write_files(folder)
  for name, args in MISTAKES.items():
    runs = [mistake_seconds(args, folder) for _ in range(1 if _QUICK.value else _MISTAKES.value)]
    mistakes[name] = {"seconds": [r[0] for r in runs], "line": runs[0][1],
                      "median_seconds": statistics.median(r[0] for r in runs)}
    print(f"{name}: {mistakes[name]['median_seconds']:.2f} s, {runs[0][1]}", flush=True)
  shutil.rmtree(folder, ignore_errors=True)
  fast = all(m["median_seconds"] <= MISTAKE_SECONDS for m in mistakes.values())

  def median(job, label, key):
    return statistics.median(r[key] for r in rows[job][label])

  table = []
  for job in jobs:
    for label, _ in RUNS:
      table.append([job, label, median(job, label, "compile_jax"),
                    median(job, label, "compile_numba"),
                    median(job, label, "compile_jax") + median(job, label, "compile_numba"),
                    median(job, label, "search"), median(job, label, "process_seconds"),
                    median(job, label, "overhead")])
  answers = {job: sorted({r["objective"] for runs in rows[job].values() for r in runs})
             for job in jobs}
  second = {job: median(job, RUNS[1][0], "compile_jax") + median(job, RUNS[1][0],
                                                                  "compile_numba")
            for job in jobs}
  first = {job: median(job, RUNS[0][0], "compile_jax") + median(job, RUNS[0][0],
                                                                "compile_numba")
           for job in jobs}
  meets = second["default"] <= TARGET_SECONDS
  overhead = median("default", RUNS[1][0], "overhead")
  lean = overhead <= OVERHEAD_SECONDS
  same = all(len(values) == 1 for values in answers.values())
  lines, facts = report.header("How soon regal.optimize answers: compiling, and mistakes",
                               "regal_experiments.bench.startup",
                               "quick" if _QUICK.value else "full")
  body = [f"`python -m regal.optimize` jobs, one process per run, caches under a fresh "
          f"`REGAL_CACHE_DIR` per repeat; medians of {repeats} repeat(s), seconds:", ""]
  body += report.markdown_table(["job", "run", "JAX compile s", "numba compile s",
                                 "compile s", "search s", "process s",
                                 "process - search s"], table)
  body += ["", *[f"- {job}: compile {first[job]:.2f} s on a first run, {second[job]:.2f} s on "
                 f"a second ({first[job] / max(second[job], 1e-9):.1f}x less); every run's "
                 f"answer {'the same' if len(answers[job]) == 1 else 'NOT the same'} "
                 f"({', '.join(f'{a:.6g}' for a in answers[job])})" for job in jobs],
           "", f"Mistakes, {1 if _QUICK.value else _MISTAKES.value} run(s) each, median "
               f"seconds to the one `error:` line:", ""]
  body += report.markdown_table(["mistake", "command", "s", "what it says"],
                                [[name, "regal.optimize " + " ".join(MISTAKES[name]),
                                  m["median_seconds"], f"`{m['line']}`"]
                                 for name, m in mistakes.items()])
  body += ["", f"Verdict: a second identical default run compiles in {second['default']:.2f} s, "
           f"{'within' if meets else 'over'} the {TARGET_SECONDS:g} s target, and its process "
           f"takes {overhead:.2f} s beyond its search, {'within' if lean else 'over'} the "
           f"{OVERHEAD_SECONDS:g} s target; the caches "
           f"{'never changed' if same else 'CHANGED'} an answer; mistakes are answered in "
           f"{max(m['median_seconds'] for m in mistakes.values()):.2f} s at most, "
           f"{'within' if fast else 'over'} the {MISTAKE_SECONDS:g} s target."]
  report.publish(_OUT.value, "startup", lines, body,
                 {**facts, "repeats": repeats, "runs": rows, "target_seconds": TARGET_SECONDS,
                  "first_compile_seconds": first, "second_compile_seconds": second,
                  "meets_target": meets, "overhead_seconds": overhead,
                  "overhead_target_seconds": OVERHEAD_SECONDS, "lean": lean,
                  "answers_agree": same, "mistakes": mistakes,
                  "mistake_target_seconds": MISTAKE_SECONDS, "mistakes_fast": fast})
  if not same:
    raise errors.RegalError("a cached run's answer differs from an uncached one's")


if __name__ == "__main__":
  cli.run_cli(main)
