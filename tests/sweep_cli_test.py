"""`python -m regal_experiments.sweep` as a user runs it: every sweep's --quick mode on a local Ray
cluster the command starts (a trial that crashes in every task once went unnoticed, reported
as "0 trials finished, 2 failed" with exit 0), the same answers in this process as on Ray,
and the exit status of a sweep whose trials failed."""
import json
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

from regal_experiments import sweep_lib, sweeps


def _sweep(tmp_path, *args):
  run = subprocess.run([sys.executable, "-m", "regal_experiments.sweep", *args, "--out",
                        str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True,
                       timeout=600)
  assert "Traceback" not in run.stderr, run.stderr[-3000:]
  return run


def _records(path):
  return {r["key"]: r for r in map(json.loads, path.read_text().splitlines())}


@pytest.mark.parametrize("name", sorted(sweeps.SWEEPS))
def test_every_sweeps_quick_mode_finishes_its_trials_on_ray(tmp_path, name):
  run = _sweep(tmp_path, "--sweep", name, "--quick", "--num_cpus", "2")
  records = _records(tmp_path / f"{name}-quick.jsonl")
  failed = [r for r in records.values() if r["status"] != "ok"]
  if name == "selftest":  # One trial fails on purpose: exit 4, the line says how many.
    assert run.returncode == 4, run.stderr
    assert [r["params"]["x"] for r in failed] == [-1]
    assert [line for line in run.stderr.splitlines() if line.startswith("error:")] == [
        "error: 1 of 8 trials failed (the summary names them)"]
  else:
    assert run.returncode == 0 and not failed, (run.stderr[-3000:], failed)
    assert all("score" in r["result"] for r in records.values())
  assert len(records) == len(sweep_lib.expand(sweeps.SWEEPS[name], quick=True))


def test_brkga_tuning_gives_the_same_scores_in_this_process_as_on_ray(tmp_path):
  """The trials seed every search: where they run must not change what they find."""
  ray_run = _sweep(tmp_path / "ray", "--sweep", "brkga_tuning", "--quick", "--num_cpus", "2")
  local_run = _sweep(tmp_path / "local", "--sweep", "brkga_tuning", "--quick", "--local")
  assert ray_run.returncode == local_run.returncode == 0, (ray_run.stderr, local_run.stderr)
  scores = [{k: r["result"]["score"] for k, r in _records(
      tmp_path / where / "brkga_tuning-quick.jsonl").items()} for where in ("ray", "local")]
  assert scores[0] == scores[1] and len(scores[0]) == 2


ALL_FAIL = """
import dataclasses, sys
from regal_datasets import cli
from regal_experiments import sweep, sweeps
sweeps.SWEEPS["selftest"] = dataclasses.replace(sweeps.SWEEPS["selftest"], name="allfail",
                                                 grid={"x": [-1, -2]}, quick_grid={"x": [-1]})
cli.run_cli(sweep.main, ["sweep", "--sweep", "selftest", "--local", "--out", sys.argv[1]])
"""


def test_a_sweep_whose_every_trial_failed_exits_5(tmp_path):
  run = subprocess.run([sys.executable, "-c", ALL_FAIL, str(tmp_path)], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=120)
  assert run.returncode == 5, run.stderr
  assert run.stderr.strip() == "error: 2 of 2 trials failed (the summary names them)"
  assert "2 failed" in (tmp_path / "allfail.md").read_text()
