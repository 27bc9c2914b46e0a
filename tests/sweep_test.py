"""regal_experiments.sweep: grid / random expansion, failed trials recorded, a sweep killed halfway
finishes only its missing trials, Ray tasks agree with local runs."""
import dataclasses
import json
import subprocess
import sys
import time

import pytest

from regal_datasets import atomic
from regal_experiments import sweep_lib, sweeps

REPO_ROOT = sweeps.__file__.rsplit("/experiments/", 1)[0]
SLOW_SELFTEST = ("from experiments import sweep_lib, sweeps; import dataclasses, sys; "
                 "sweep = dataclasses.replace(sweeps.SWEEPS['selftest'], fixed={'sleep': 0.4}); "
                 "sweep_lib.run(sweep, sys.argv[1], local=True)")


def test_grid_and_random_expansion():
  sweep = sweep_lib.Sweep("s", "m:f", grid={"a": [1, 2], "b": ["x"]},
                          random={"lr": ("log_uniform", 1e-4, 1e-2), "k": ("int", 1, 3),
                                  "c": ("choice", ["p", "q"])}, samples=3, fixed={"z": 0})
  trials = sweep_lib.expand(sweep)
  assert len(trials) == 6 and trials == sweep_lib.expand(sweep)  # Deterministic.
  assert all(1e-4 <= t["lr"] <= 1e-2 and t["k"] in (1, 2, 3) and t["c"] in ("p", "q")
             and t["z"] == 0 for t in trials)
  assert len(sweep_lib.expand(sweeps.SWEEPS["brkga_tuning"])) == 648
  assert len(sweep_lib.expand(sweeps.SWEEPS["brkga_tuning"], quick=True)) == 2


def test_failed_trials_are_recorded_and_the_sweep_goes_on(tmp_path):
  records = sweep_lib.run(sweeps.SWEEPS["selftest"], str(tmp_path), local=True,
                          progress=lambda line: None)
  failed = [r for r in records.values() if r["status"] == "failed"]
  assert len(records) == 8 and len(failed) == 1
  assert "ValueError: negative x -1" in failed[0]["error"] and "\n" not in failed[0]["error"]
  assert sorted(r["result"]["square"] for r in records.values() if r["status"] == "ok") == [
      0, 1, 4, 9, 16, 25, 36]


def test_a_sweep_killed_halfway_finishes_only_the_missing_trials(tmp_path):
  path = tmp_path / "selftest.jsonl"
  process = subprocess.Popen([sys.executable, "-c", SLOW_SELFTEST, str(tmp_path)],
                             cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
  deadline = time.time() + 60
  while time.time() < deadline and (not path.exists() or
                                    len(path.read_text().splitlines()) < 3):
    time.sleep(0.05)
  process.kill()
  process.wait()
  first = [json.loads(line) for line in path.read_text().splitlines()]
  assert 3 <= len(first) < 8
  # The killed run's sweep (its sleep is part of every trial's key).
  sweep = dataclasses.replace(sweeps.SWEEPS["selftest"], fixed={"sleep": 0.4})
  lines = []
  sweep_lib.run(sweep, str(tmp_path), local=True, progress=lines.append)
  finished_before = {r["key"] for r in first if r["status"] == "ok"}
  assert f"{len(finished_before)} already finished" in lines[0]
  second = [json.loads(line) for line in path.read_text().splitlines()][len(first):]
  assert not finished_before & {r["key"] for r in second}  # Nothing finished ran twice.
  assert {r["key"] for r in first + second} == {
      sweep_lib.trial_key(p) for p in sweep_lib.expand(sweep)}


def test_ray_tasks_match_local_runs(tmp_path, ray_cluster):
  remote = sweep_lib.run(sweeps.SWEEPS["selftest"], str(tmp_path / "ray"),
                         progress=lambda line: None)
  local = sweep_lib.run(sweeps.SWEEPS["selftest"], str(tmp_path / "local"), local=True,
                        progress=lambda line: None)
  assert {k: (r["status"], r.get("result")) for k, r in remote.items()} == {
      k: (r["status"], r.get("result")) for k, r in local.items()}


def test_cli_unknown_sweep_is_one_line():
  from cli_test import assert_one_line_error, run
  assert_one_line_error(run("regal_experiments.sweep", "--sweep", "nope"), "unknown sweep 'nope'")


def test_subsample_draws_a_fixed_subset_and_the_summary_ranks_it(tmp_path):
  grid = sweep_lib.expand(sweeps.SWEEPS["brkga_tuning"])
  reduced = sweep_lib.expand(sweeps.SWEEPS["brkga_tuning"], subsample=32)
  assert len(reduced) == 32 and len({sweep_lib.trial_key(p) for p in reduced}) == 32
  assert reduced == sweep_lib.expand(sweeps.SWEEPS["brkga_tuning"], subsample=32)
  assert all(p in grid for p in reduced)
  assert sweep_lib.results_path(sweeps.SWEEPS["brkga_tuning"], "d", subsample=32) == (
      "d/brkga_tuning-subsample32.jsonl")
  records = {str(s): {"key": str(s), "params": {"x": s}, "status": "ok", "seconds": 1.0,
                      "result": {"score": float(s)}} for s in (3, 1, 2)}
  records["bad"] = {"key": "bad", "params": {"x": -1}, "status": "failed", "error": "E: no"}
  text = sweep_lib.summary_markdown(sweeps.SWEEPS["selftest"], records, "python -m x", "d",
                                    "f.jsonl", top=2)
  ranked = [line for line in text.splitlines() if line.startswith("| 1 ") or
            line.startswith("| 2 ")]
  assert ranked == ["| 1 | 1 | 1 | 1.0 |", "| 2 | 2 | 2 | 1.0 |"]
  assert "2 finished" not in text and "3 finished, 1 failed" in text and "E: no" in text


def test_search_preset_takes_each_models_decoder_from_its_training_group():
  from regal_experiments import sweeps

  def record(decoder, climbers, doppler, sinnen, synthetic):
    return {"params": {"decoder": decoder, "climbers": climbers, "improve_interval": 1},
            "result": {"score": (doppler + sinnen + synthetic) / 3, "doppler": doppler,
                       "sinnen": sinnen, "synthetic": synthetic}}

  records = [record("direct", 0, 0.90, 1.01, 0.80), record("list", 0, 0.80, 1.00, 0.95),
             record("direct", 2, 0.95, 1.02, 0.90), record("list", 2, 0.70, 1.03, 0.99)]
  setting, chosen = sweeps.search_preset(records)
  # Each model takes the trial that did best on its group: Doppler (and WC) list with 2
  # climbers (0.70), Sinnen (delay) list with 0 (1.00), synthetic (sync) direct with 0 (0.80).
  assert setting == {"improve_interval": 1,
                     "climbers": {"doppler": 2, "wc": 2, "delay": 0, "sync": 0},
                     "decoder": {"doppler": "list", "wc": "list", "delay": "list",
                                 "sync": "direct"}}
  assert chosen["chosen_per_model"]["sync"]["score"] == 0.80


def test_a_partial_last_line_is_cut_before_the_next_record(tmp_path):
  """A sweep killed mid-append leaves half a line; the rerun must not glue its first record
  onto it (which would lose that trial and run it again)."""
  sweep = sweeps.SWEEPS["selftest"]
  path = tmp_path / "selftest.jsonl"
  complete = sweep_lib.run(sweep, str(tmp_path), local=True, progress=lambda line: None)
  lines = path.read_text().splitlines(keepends=True)
  path.write_text("".join(lines[:3]) + lines[3][:len(lines[3]) // 2])  # Killed mid-write.
  assert atomic.cut_partial_line(str(path))
  assert path.read_text() == "".join(lines[:3])
  path.write_text("".join(lines[:3]) + lines[3][:len(lines[3]) // 2])
  again = sweep_lib.run(sweep, str(tmp_path), local=True, progress=lambda line: None)
  records = [json.loads(line) for line in path.read_text().splitlines()]
  finished = [r["key"] for r in records if r["status"] == "ok"]
  assert len(finished) == len(set(finished)) == 7  # Each finished trial exactly once.
  assert {r["key"] for r in records} == set(complete)  # (A failed trial is retried.)
  assert {k: r["status"] for k, r in again.items()} == {
      k: r["status"] for k, r in complete.items()}


def test_negative_subsample_is_refused():
  with pytest.raises(sweep_lib.errors.ConfigError, match="got -3"):
    sweep_lib.expand(sweeps.SWEEPS["brkga_tuning"], subsample=-3)
