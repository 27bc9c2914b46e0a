"""regal.learning.rollout_pool and regal.learning.train_lib: Ray actors agree with the driver
and survive a killed actor; training runs, writes its report and resumes from its workdir."""
import fnmatch
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import REPO_ROOT
import event_files
from golden_test import stored_state

from regal_datasets import atomic
from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets.synthetic import sized_graph
from regal.app import methods, optimize_lib
from regal.learning import checkpoint, references, train_lib
from regal.learning import workdir as workdir_files
from regal.learning.configs import default as default_config
from regal.learning.rollout import Task
from regal.learning.rollout_pool import RolloutPool
from regal.scoring import performance


@pytest.fixture(scope="module")
def problems():
  return [performance.Problem(sized_graph(n, seed=n), devices_lib.homogeneous(2),
                              model="sync") for n in (8, 10, 12)]


def test_ray_actors_match_the_driver_and_survive_a_killed_actor(problems, ray_cluster):
  tasks = [Task(i % 3, None, None, seed=i, evals=120) for i in range(6)]
  local = RolloutPool(problems, evals=120, num_actors=0).map(tasks)
  pool = RolloutPool(problems, evals=120, num_actors=2)
  try:
    reported = []
    assert pool.map(tasks, on_done=lambda chunk, _: reported.extend(chunk)) == local
    assert sorted(reported) == list(range(6))  # Every task reported once, as it finished.
    pool.kill_actor(0)  # Its chunks of the next step must be rerun on a replacement.
    reported.clear()
    assert pool.map(tasks, on_done=lambda chunk, _: reported.extend(chunk)) == local
    assert sorted(reported) == list(range(6))
  finally:
    pool.shutdown()


def test_a_stage_interrupted_midway_computes_only_what_is_missing(tmp_path):
  """A per-graph stage saves each finished chunk: killed after two chunks, the rerun asks only
  for the other graphs and ends with what an uninterrupted run gives."""
  asked = []

  def compute(missing, on_done, stop_after=None):
    asked.append(list(missing))
    for k in range(0, len(missing), 2):
      if stop_after is not None and k >= 2 * stop_after:
        raise _Killed()
      chunk = missing[k:k + 2]
      on_done(chunk, [np.full(3, i, np.float32) for i in chunk])

  whole = workdir_files.per_graph_stage(str(tmp_path / "whole.npz"), None, "stage", list(range(7)),
                                    compute)
  path = str(tmp_path / "stage.npz")
  with pytest.raises(_Killed):
    workdir_files.per_graph_stage(path, None, "stage", list(range(7)),
                              lambda missing, on_done: compute(missing, on_done, stop_after=2))
  asked.clear()
  resumed = workdir_files.per_graph_stage(path, path, "stage", list(range(7)), compute)
  assert asked == [[4, 5, 6]]
  assert sorted(resumed) == list(range(7))
  assert all(np.array_equal(resumed[i], whole[i]) for i in range(7))
  values = str(tmp_path / "values.json")  # JSON stages (objectives) alike.
  workdir_files.per_graph_stage(values, None, "stage", [3, 1], lambda m, done: done(m, [0.5, 2.0]))
  assert workdir_files.per_graph_stage(values, values, "stage", [1, 3], None) == {3: 0.5, 1: 2.0}


def test_progress_lines_say_how_far_and_how_long(monkeypatch):
  import io
  monkeypatch.setattr(workdir_files, "PROGRESS_SECONDS", 0.0)
  stream = io.StringIO()  # Not a terminal: plain lines.
  progress = workdir_files.Progress("features", 10, done=4, stream=stream)
  progress.advance(0)
  progress.advance(3)
  progress.finish()
  lines = stream.getvalue().splitlines()
  assert lines[0] == "features: 10 graphs, 4 saved by an earlier run"
  assert "4/10 graphs" in lines[1] and "the first ones include compiling" in lines[1]
  assert "7/10 graphs" in lines[2] and "s left" in lines[2]
  assert lines[3].startswith("  features: done in")


def _tiny_config(dataset: str = "synthetic"):
  config = default_config.get_config("test")
  config.dataset = dataset
  config.learner = "mutants"  # This file trains REGAL's mutant policy (`train_lib`).
  return config


class _Killed(BaseException):
  """A SIGKILL at a chosen instant: nothing after it runs."""


def _metrics_rows(workdir: str) -> list[str]:
  with open(os.path.join(workdir, "metrics.csv")) as f:
    return f.read().splitlines()


def test_training_runs_reports_and_resumes(tmp_path, monkeypatch, golden_training):
  """Goes on from the session's 2-step run (conftest's `golden_training`, which the golden
  test pins), in a copy of its workdir."""
  workdir = str(tmp_path / "run")
  shutil.copytree(golden_training[0], workdir)
  config = _tiny_config()
  report = golden_training[1]
  assert report["steps"] == 2 and len(report["history"]) == 2 and report["dataset"] == "synthetic"
  held_apart = set(report["split_graphs"]["test"])
  assert len(held_apart) == 2 and not held_apart & set(report["split_graphs"]["train"])
  assert np.isfinite(report["test"]["improvement_pct"])
  for name in ("checkpoint.msgpack", "metrics.csv", "report.json",
               "reward_curve.png", f"unguided-{workdir_files.cache_fingerprint(config)}.npz"):
    assert os.path.exists(os.path.join(workdir, name)), name
  # A longer run in the same workdir continues from step 2 instead of starting over. It is
  # killed after appending step 3's metrics row and before saving step 3's checkpoint (with a
  # half-written temp file of that checkpoint and half a row behind), then rerun.
  config.num_steps = 3

  def killed_while_saving(path, *args):
    with open(os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.999999999."
                           f"killed.tmp"), "wb") as f:
      f.write(b"half a checkpoint")
    raise _Killed

  monkeypatch.setattr(checkpoint, "save", killed_while_saving)
  with pytest.raises(_Killed):
    train_lib.train_and_evaluate(config, workdir)
  monkeypatch.undo()
  killed_rows = _metrics_rows(workdir)
  assert [row.split(",")[0] for row in killed_rows[1:]] == ["1", "2", "3"]
  with open(os.path.join(workdir, "metrics.csv"), "a") as f:
    f.write("4,0.1")  # A kill mid-append.
  assert checkpoint.read_meta(checkpoint.in_workdir(workdir))["step"] == 2
  report = train_lib.train_and_evaluate(config, workdir)
  assert _metrics_rows(workdir) == killed_rows  # Step 3 logged once, as the killed run had it.
  assert report["steps"] == 3 and [h["step"] for h in report["history"]] == [0, 2, 3]
  assert not [n for n in os.listdir(workdir) if n.endswith(".tmp")]
  # TensorBoard reads what metrics.csv holds (the killed run's step-3 events purged).
  scalars = event_files.tensorboard_scalars(workdir)
  for row in killed_rows[1:]:
    step, loss = row.split(",")[:2]
    assert scalars["loss"][int(step)] == pytest.approx(float(loss), rel=1e-6)
  assert sorted(scalars["loss"]) == [1, 2, 3]
  # The REGAL table reads a workdir back: its config, its policy, the policy's Betas.
  restored = train_lib.workdir_config(workdir)
  assert workdir_files.fingerprint(restored) == workdir_files.fingerprint(config)
  trainer = train_lib.Trainer(restored, workdir)
  test = trainer.splits["test"]
  _, _, _, distributions = trainer.distributions(train_lib.trained_policy(trainer, workdir),
                                                 test, None, greedy=True)
  assert [a.shape for a, _ in distributions] == [(trainer.problems[i].layout.size,)
                                                 for i in test]
  assert all((a > 0).all() and (b > 0).all() for a, b in distributions)
  # Another configuration must not resume this checkpoint.
  config.learning_rate = 0.5
  with pytest.raises(errors.ConfigError, match="checkpoint of another config"):
    train_lib.train_and_evaluate(config, workdir)
  assert checkpoint.read_meta(checkpoint.in_workdir(workdir))["step"] == 3
  # The trained policy runs on any graph through regal.optimize --policy.
  result = optimize_lib.run(
      sized_graph(50, seed=5), devices_lib.homogeneous(2),
      methods.RunConfig(model="sync", evals=700,
                        brkga=methods.BrkgaOptions(policy_dir=workdir))).result
  assert result.evaluations <= 700 and result.details["policy"] == workdir
  assert "unguided" not in result.details  # No second search unless asked.
  with pytest.raises(errors.ConfigError, match="trained for 2 devices"):
    optimize_lib.run(
        sized_graph(12, seed=5), devices_lib.homogeneous(3),
        methods.RunConfig(model="sync", evals=700, brkga=methods.BrkgaOptions(policy_dir=workdir)))
  # Fine-tuning that policy on measured run times (the session's 2 host devices, see
  # conftest): one step, the source workdir's caches reused, the measured references cached.
  tuned_config = _tiny_config(config.dataset)
  tuned_config.num_steps, tuned_config.eval_every = 1, 1
  tuned_config.reward, tuned_config.finetune_from = "measured", workdir
  tuned_config.measure_repeats = 1
  tuned = str(tmp_path / "measured")
  report = train_lib.train_and_evaluate(tuned_config, tuned)
  assert report["reward"] == "measured" and report["steps"] == 1
  assert not any(n.startswith("unguided-" + workdir_files.cache_fingerprint(tuned_config))
                 for n in os.listdir(tuned))
  with open(os.path.join(tuned, f"unguided-measured-{workdir_files.fingerprint(tuned_config)}.json")
            ) as f:
    assert all(seconds > 0 for seconds in json.load(f).values())
  tuned_config.policy.hidden = 16
  with pytest.raises(errors.ConfigError, match="differs from this config"):
    train_lib.train_and_evaluate(tuned_config, str(tmp_path / "other"))


def _kill_when_replacing(monkeypatch, pattern: str) -> None:
  """A SIGKILL just before an atomic write's rename onto a file matching `pattern`: the
  whole temp file stays behind, named as a dead writer's."""
  real_replace = os.replace

  def replace(src, dst):
    if fnmatch.fnmatch(os.path.basename(dst), pattern):
      real_replace(src, os.path.join(os.path.dirname(dst),
                                     f".{os.path.basename(dst)}.999999999.killed.tmp"))
      raise _Killed
    return real_replace(src, dst)

  monkeypatch.setattr(atomic.os, "replace", replace)


def _kill_mid_row(monkeypatch, step: int) -> None:
  """A SIGKILL halfway through appending step `step`'s metrics row."""
  real_append = workdir_files.append_csv

  def append(path, row):
    if row["step"] != step:
      return real_append(path, row)
    with open(path, "a") as f:
      f.write(f"{row['step']},{row['loss']}"[:6])
    raise _Killed

  monkeypatch.setattr(workdir_files, "append_csv", append)


def _run_state(workdir: str) -> dict:
  """What must not depend on kills: metrics rows, TensorBoard scalars, the report (but its
  timing), the checkpoint's step, history and every state leaf."""
  with open(os.path.join(workdir, "report.json")) as f:
    report = json.load(f)
  del report["inference_seconds_per_graph"]
  meta = checkpoint.read_meta(checkpoint.in_workdir(workdir))
  state = stored_state(checkpoint.in_workdir(workdir))
  import jax
  leaves = {jax.tree_util.keystr(path): np.asarray(leaf).tobytes()
            for path, leaf in jax.tree_util.tree_leaves_with_path(state)}
  return {"metrics": _metrics_rows(workdir), "tensorboard": event_files.tensorboard_scalars(workdir),
          "report": report, "step": meta["step"], "history": meta["history"],
          "state": leaves}


def test_kills_at_any_instant_resume_to_the_uninterrupted_run(tmp_path, monkeypatch,
                                                              golden_training):
  """The session's 2-step run (conftest's `golden_training`) again, in a fresh workdir,
  killed four times: mid-write of the first checkpoint (after its metrics row: between
  files), mid-append of the second metrics row, between report.json and the reward curve,
  and (with nothing left to train) mid-write of report.json. Each rerun resumes; the end
  state is the uninterrupted run's, bit for bit."""
  workdir = str(tmp_path / "killed")
  config = _tiny_config()
  kills = (lambda: _kill_when_replacing(monkeypatch, "checkpoint.msgpack"),
           lambda: _kill_mid_row(monkeypatch, 2),
           lambda: _kill_when_replacing(monkeypatch, "reward_curve.png"),
           lambda: _kill_when_replacing(monkeypatch, "report.json"))
  for kill in kills:
    kill()
    with pytest.raises(_Killed):
      train_lib.train_and_evaluate(config, workdir)
    monkeypatch.undo()
  train_lib.train_and_evaluate(config, workdir)
  assert not [n for n in os.listdir(workdir) if n.endswith(".tmp")]
  assert _run_state(workdir) == _run_state(golden_training[0])


def test_rollout_returns_the_best_solution_it_scored(problems):
  worker_tasks = [Task(1, None, None, seed=3, evals=120, best=True)]
  [(value, chromosome)] = RolloutPool(problems, evals=120, num_actors=0).map(worker_tasks)
  assert chromosome.shape == (problems[1].layout.size,)
  assert performance.score_reference(problems[1], chromosome)[0] == pytest.approx(value)


def test_test_filter_keeps_graphs_with_room_for_improvement():
  short = [100.0, 100.0, 50.0, 80.0]
  long = [82.0, 82.1, 50.0, 60.0]  # 18%, 17.9%, 0%, 25% better
  assert references.room_for_improvement(short, long, 18.0).tolist() == [True, False, False, True]
  assert references.room_for_improvement(short, long, 0.0).all()


def _ray_processes() -> set[int]:
  """Processes of any local Ray cluster (its servers, agents and workers)."""
  found = set()
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        command = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
      continue
    if command.startswith("ray::") or any(part in command for part in (
        "gcs_server", "raylet", "/ray/_private/", "/ray/dashboard/")):
      found.add(int(entry))
  return found


def _descendants(pid: int) -> set[int]:
  """The processes below `pid` in the process tree, now."""
  children: dict[int, list[int]] = {}
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat") as f:
        parent = int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
      continue
    children.setdefault(parent, []).append(int(entry))
  found, frontier = set(), [pid]
  while frontier:
    for child in children.get(frontier.pop(), []):
      if child not in found:
        found.add(child)
        frontier.append(child)
  return found


def test_sigint_says_where_and_how_to_resume_and_leaves_no_ray_process(tmp_path):
  args = [f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
          "--config.learner=mutants", "--config.num_actors=1", "--workdir", str(tmp_path / "run")]
  process = subprocess.Popen([sys.executable, "-m", "regal.train", *args], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  for line in process.stdout:  # Progress lines go to stdout, errors to stderr.
    if "unguided search reference" in line:
      break
  # This run's Ray processes (its servers, agents and actors descend from it): another test
  # may run a Ray cluster of its own meanwhile, whose processes must not count here.
  ours = _descendants(process.pid) & _ray_processes()
  assert ours, "the run started no Ray process"
  process.send_signal(signal.SIGINT)
  _, stderr = process.communicate(timeout=120)
  assert process.returncode == 130, stderr
  lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
  assert len(lines) == 1 and "Traceback" not in stderr, stderr
  assert "during unguided search reference" in lines[0]
  assert lines[0].endswith(f"rerun the same command to resume (python -m regal.train "
                           f"{shlex.join(args)})")
  assert "Token authentication" not in stderr and "Ray instance" not in stderr
  deadline = time.time() + 30
  while ours & _ray_processes() and time.time() < deadline:
    time.sleep(0.5)
  assert not ours & _ray_processes()


def test_the_best_validated_policy_is_kept(tmp_path):
  """Validation (never the test split) chooses the policy inference uses: a later step that
  validates worse leaves the best file alone; ties keep the earlier."""
  import jax.numpy as jnp
  workdir = str(tmp_path)
  best = checkpoint.best_in_workdir(workdir)
  history = [{"step": 0, "improvement_pct": 1.0}]
  train_lib._keep_if_best(workdir, {"w": jnp.zeros(2)}, history, "c")
  assert checkpoint.read_meta(best)["step"] == 0
  for step, score in ((20, 0.5), (40, 1.0)):
    history.append({"step": step, "improvement_pct": score})
    train_lib._keep_if_best(workdir, {"w": jnp.ones(2)}, history, "c")
    assert checkpoint.read_meta(best)["step"] == 0
  history.append({"step": 60, "improvement_pct": 1.5})
  train_lib._keep_if_best(workdir, {"w": jnp.ones(2)}, history, "c")
  assert checkpoint.read_meta(best)["step"] == 60


@pytest.mark.parametrize("interval, said", [
    ((0.4, 2.1), "verdict: the policy pays"), ((-3.0, -0.2), "verdict: the policy hurts"),
    ((-0.5, 1.6), "verdict: no evidence the policy pays: its interval holds 0")])
def test_training_ends_with_a_verdict_from_the_paired_interval(interval, said):
  """It ended with a raw JSON line and no verdict; the interval decides, not the mean."""
  from regal.learning import train_lib
  report = {"test_graphs": 16, "inference_seconds_per_graph": 0.0042,
            "test": {"improvement_pct": 0.55, "improvement_interval_pct": list(interval),
                     "win_rate": 0.46, "matched_or_beaten": 0.5}}
  lines = train_lib.verdict(report, seeds=5).splitlines()
  assert lines[0].startswith("test: on 16 unseen graphs x 5 seeds, the guided search is "
                             "+0.55% against the same search unguided (95% interval [")
  assert lines[1] == said
