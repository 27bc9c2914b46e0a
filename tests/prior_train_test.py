"""regal.learning.prior_train: the default learner end to end on the `:test` preset (labels,
training, calibration on validation, test), its report and verdict, a resume that redoes
nothing, a kill mid-stage that resumes to the uninterrupted run, and the trained prior in
regal.optimize --policy."""
import json
import os
import shutil

import numpy as np
import pytest

import event_files

from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets.synthetic import sized_graph
from regal.app import methods, optimize_lib
from regal.learning import checkpoint, prior_finetune, prior_guide, prior_train
from regal.learning.configs import default as default_config
from regal.learning.rollout_pool import RolloutPool
from regal.scoring import performance
from regal.search import guides


def _config():
  config = default_config.get_config("test")
  config.num_actors = 0
  return config


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("prior") / "run")
  return workdir, prior_train.train_and_evaluate(_config(), workdir)


def test_training_reports_a_verdict_and_keeps_its_choices(trained):
  workdir, report = trained
  for name in ("report.json", "training_curves.png", checkpoint.PRIOR_FILE):
    assert os.path.exists(os.path.join(workdir, name)), name
  assert report["verdict"].count("\n") == 1
  assert report["verdict"].splitlines()[1].startswith("verdict: ")
  assert report["chosen_q"]["learned"] in _config().prior.qs
  meta = checkpoint.read_meta(os.path.join(workdir, checkpoint.PRIOR_FILE))
  assert meta["q"] == report["chosen_q"]["learned"] and meta["time_ratio"] > 0
  objectives = report["objectives"]
  test = _config().prior.test_seeds
  assert all(np.shape(v) == (report["test_graphs"], test) for v in objectives.values())
  # The summary is recomputable from the objectives it reports.
  kept = np.array(objectives[report["kept"]])  # The imitation's or the fine-tune's.
  improvement = 100 * (np.array(objectives["unguided"]) - kept) / np.array(objectives["unguided"])
  assert report["test"]["improvement_pct"] == pytest.approx(improvement.mean(axis=1).mean())
  with open(os.path.join(workdir, "report.json")) as f:
    assert json.load(f)["verdict"] == report["verdict"]


def _metrics(workdir: str) -> list[tuple[int, float, float]]:
  with open(os.path.join(workdir, prior_train.METRICS_FILE)) as f:
    header, *rows = f.read().splitlines()
  assert header == "step,train_loss,valid_loss"
  return [(int(step), float(train), float(valid))
          for step, train, valid in (row.split(",") for row in rows)]


def _check_watchable(workdir: str, report: dict) -> None:
  """metrics.csv holds the loss curve once; TensorBoard the same losses, the validation
  calibration of every arm and the test figures, each once."""
  history = [tuple(row) for row in report["history"]]
  assert _metrics(workdir) == pytest.approx(history) and history
  scalars = event_files.tensorboard_scalars(workdir)
  assert scalars["loss/train"] == pytest.approx({k: train for k, train, _ in history})
  assert scalars["loss/valid"] == pytest.approx({k: valid for k, _, valid in history})
  steps, tuned = _config().prior.steps, _config().prior.finetune_steps
  for arm, row in report["calibration"].items():
    assert scalars[f"valid/improvement_pct/{arm}"] == pytest.approx(
        {steps + 1: row["improvement_pct"]})
  # REINFORCE's steps after it, in finetune_metrics.csv and TensorBoard alike.
  finetune = report["finetune"]["history"]
  assert [row["step"] for row in finetune] == list(range(1, tuned + 1))
  with open(os.path.join(workdir, prior_finetune.METRICS_FILE)) as f:
    header, *rows = f.read().splitlines()
  assert header.split(",")[:2] == ["step", "reward_pct"]
  assert [float(row.split(",")[1]) for row in rows] == pytest.approx(
      [row["reward_pct"] for row in finetune])
  assert scalars["finetune/reward_pct"] == pytest.approx(
      {steps + 1 + row["step"]: row["reward_pct"] for row in finetune})
  assert scalars["finetune/valid_vs_imitation_points"] == pytest.approx(
      {steps + tuned + 2: report["finetune"]["valid_vs_imitation"]["improvement_pct"]})
  assert scalars["test/improvement_pct"] == pytest.approx(
      {steps + tuned + 3: report["test"]["improvement_pct"]})
  assert scalars["test/improvement_pct_equal_time"] == pytest.approx(
      {steps + tuned + 3: report["test_equal_time"]["improvement_pct"]})


def test_training_can_be_watched(trained):
  _check_watchable(*trained)


def test_a_rerun_redoes_nothing(trained, tmp_path, monkeypatch):
  workdir = str(tmp_path / "copy")
  shutil.copytree(trained[0], workdir)

  def no_search(self, tasks, on_done=None):
    raise AssertionError(f"{len(tasks)} searches rerun")
  monkeypatch.setattr(RolloutPool, "map", no_search)
  report = prior_train.train_and_evaluate(_config(), workdir)
  assert report["objectives"] == trained[1]["objectives"]


def test_a_run_computes_each_graphs_heuristic_seeds_once(trained, tmp_path, monkeypatch):
  # The prior's features read them at every arm and seed: recomputed, they were most of a
  # resumed default run's 87 s (experiments/results/issue82/README.md).
  from regal.baselines import heuristics
  workdir = str(tmp_path / "copy")
  shutil.copytree(trained[0], workdir)
  calls, seeds = [], heuristics.seeds

  def counted(problem, *args, **kwargs):
    calls.append(problem.graph.name)
    return seeds(problem, *args, **kwargs)
  monkeypatch.setattr(heuristics, "seeds", counted)
  prior_train.train_and_evaluate(_config(), workdir)
  assert calls and len(calls) == len(set(calls)), sorted(calls)


def test_kills_mid_stage_resume_to_the_uninterrupted_run(trained, tmp_path, monkeypatch):
  """Killed after the first saved chunk of the labels, then of the calibration, then of the
  test searches: each rerun computes what is missing only, and the end is the uninterrupted
  run's."""
  workdir = str(tmp_path / "killed")
  real_map = RolloutPool.map

  class Killed(BaseException):
    pass

  # Labels; calibration (after the labels' rest); REINFORCE's second step (its first saved);
  # the fine-tune's validation; test.
  for kill_at in (0, 1, 2, 1, 1):
    calls = []

    def map_then_die(self, tasks, on_done=None):
      calls.append(len(tasks))
      if len(calls) - 1 != kill_at:
        return real_map(self, tasks, on_done)
      if on_done is None:  # A REINFORCE step: killed once its rollouts are back.
        real_map(self, tasks)
        raise Killed

      def dying(chunk, values):
        on_done(chunk, values)
        if chunk:
          raise Killed
      return real_map(self, tasks, dying)
    monkeypatch.setattr(RolloutPool, "map", map_then_die)
    with pytest.raises(Killed):
      prior_train.train_and_evaluate(_config(), workdir)
    monkeypatch.undo()
  report = prior_train.train_and_evaluate(_config(), workdir)
  # Objectives are the uninterrupted run's; seconds (and so the equal-time arm's budget)
  # are measurements of each run.
  for arm in ("unguided", "learned", "finetuned", "bottom_level"):
    assert report["objectives"][arm] == trained[1]["objectives"][arm], arm
  assert report["finetune"]["history"] == trained[1]["finetune"]["history"]
  for arm, row in report["calibration"].items():
    assert row["improvement_pct"] == trained[1]["calibration"][arm]["improvement_pct"], arm
  _check_watchable(workdir, report)


def test_a_kill_while_the_network_trains_logs_each_step_once(trained, tmp_path, monkeypatch):
  """Killed after the network logged some steps (labels kept): the rerun trains it again from
  step 0, and metrics.csv and TensorBoard hold each step once, as the uninterrupted run's."""
  workdir = str(tmp_path / "net")
  shutil.copytree(trained[0], workdir)
  for name in os.listdir(workdir):  # What a run killed in the network's training holds.
    if not name.startswith("answers-"):
      path = os.path.join(workdir, name)
      shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
  real_append = prior_train.workdir_files.append_csv

  class Killed(BaseException):
    pass

  def append_then_die(path, row):
    real_append(path, row)
    if row["step"] >= 2 * 10 or row["step"] == _config().prior.steps:
      raise Killed
  monkeypatch.setattr(prior_train.workdir_files, "append_csv", append_then_die)
  with pytest.raises(Killed):
    prior_train.train_and_evaluate(_config(), workdir)
  monkeypatch.undo()
  assert _metrics(workdir)
  report = prior_train.train_and_evaluate(_config(), workdir)
  for arm in ("unguided", "learned", "finetuned", "bottom_level"):  # Not the timed arm's.
    assert report["objectives"][arm] == trained[1]["objectives"][arm], arm
  _check_watchable(workdir, report)


def test_the_trained_prior_guides_regal_optimize(trained):
  workdir = trained[0]
  result = optimize_lib.run(sized_graph(40, seed=5), devices_lib.homogeneous(2),
                            methods.RunConfig(
                                model="sync", evals=700,
                                brkga=methods.BrkgaOptions(policy_dir=workdir))).result
  assert result.evaluations <= 700 and result.details["policy"] == workdir
  # Past the budget q was chosen at (the :test preset's 500), q falls with the budget.
  assert result.details["prior_q"] == pytest.approx(
      trained[1]["chosen_q"]["learned"] * 500 / 700)
  assert "prior" in result.details["seed_arms"]  # Its predicted split and order.
  # Beside it, the same search without the prior or its seed.
  compared = optimize_lib.run(sized_graph(40, seed=5), devices_lib.homogeneous(2),
                              methods.RunConfig(
                                  model="sync", evals=700, brkga=methods.BrkgaOptions(
                                      policy_dir=workdir, compare_unguided=True))).result
  assert compared.details["unguided"]["evaluations"] <= 700
  with pytest.raises(errors.ConfigError, match="trained for 2 devices"):
    optimize_lib.run(sized_graph(12, seed=5), devices_lib.homogeneous(3),
                     methods.RunConfig(model="sync", evals=700,
                                       brkga=methods.BrkgaOptions(policy_dir=workdir)))


def test_the_budget_scales_q_past_the_calibrated_budget():
  assert prior_guide.budget_q(0.6, 5000, None) == 0.6
  assert prior_guide.budget_q(0.6, 5000, 4000) == 0.6
  assert prior_guide.budget_q(1.0, 5000, 100_000) == pytest.approx(0.05)


def test_inference_reads_the_last_runs_guide_settings(trained, tmp_path):
  """A rerun that changes only how the prior guides (its seeds) keeps the trained network,
  and `--policy` then guides as the rerun measured, not as the first run did."""
  workdir = str(tmp_path / "rerun")
  shutil.copytree(trained[0], workdir)
  config = _config()
  config.prior.seeds = "none"
  prior_train.train_and_evaluate(config, workdir)
  problem = performance.Problem(sized_graph(30, seed=2), devices_lib.homogeneous(2),
                                model="sync")
  _, _, _, prior, _ = prior_guide.load(workdir, problem)
  assert prior.seeds == "none"
  guided = prior_guide.LearnedPriorGuide(workdir).guide(problem, 0, guides.Guidance())
  assert not guided.seeds


def test_a_shipped_prior_is_found_by_its_problem_and_checked_against_its_index(trained,
                                                                               tmp_path):
  from regal.learning import shipped
  folder = str(tmp_path / "policies")
  policies = shipped.ship(trained[0], "sync_x2", "python -m regal.train ...", folder)
  assert [(e["name"], e["model"], e["num_devices"], e["objective"]) for e in policies] == [
      ("sync_x2", "sync", 2, "runtime")]
  assert policies[0]["test_improvement_pct"] == trained[1]["test"]["improvement_pct"]
  found = shipped.resolve("default", "sync", 2, "runtime", folder)
  assert found == os.path.join(folder, "sync_x2")
  assert shipped.resolve("runs/mine", "wc", 3, "runtime", folder) == "runs/mine"
  with pytest.raises(errors.ConfigError, match=r"no shipped policy for the wc model on 2 "
                     r"devices \(runtime\); shipped: sync x2 \(runtime\)"):
    shipped.resolve("default", "wc", 2, "runtime", folder)
  # It steers a search as any workdir's prior does.
  result = optimize_lib.run(sized_graph(40, seed=5), devices_lib.homogeneous(2),
                            methods.RunConfig(model="sync", evals=700,
                                              brkga=methods.BrkgaOptions(policy_dir=found))).result
  assert result.details["policy"] == found
  # A prior replaced without its index (or an index edited) is refused.
  index_path = os.path.join(folder, shipped.INDEX_FILE)
  with open(index_path) as f:
    index = json.load(f)
  index["policies"][0]["fingerprint"] = "0" * 16
  with open(index_path, "w") as f:
    json.dump(index, f)
  with pytest.raises(errors.ConfigError, match="does not match its index"):
    shipped.resolve("default", "sync", 2, "runtime", folder)


def test_a_prior_refuses_a_device_layout_it_was_not_trained_on(trained):
  meta = checkpoint.read_meta(os.path.join(trained[0], checkpoint.PRIOR_FILE))
  checkpoint.check_trained_for(meta, "w", "sync", devices_lib.homogeneous(2), "runtime")
  eight = {**meta, "config_values": {**meta["config_values"], "num_devices": 8}}
  checkpoint.check_trained_for(eight, "w", "sync", devices_lib.homogeneous(8), "runtime")
  with pytest.raises(errors.ConfigError, match="trained on identical devices, every pair "
                     "linked alike; these 8 devices are in 2 link groups"):
    checkpoint.check_trained_for(eight, "w", "sync", devices_lib.nvlink_two_groups(4),
                                 "runtime")
  slower = devices_lib.DeviceSpec(memory_capacity=np.full(2, np.inf), speed=np.array([1., 2.]),
                                  bandwidth=np.ones((2, 2)), latency=np.zeros((2, 2)))
  with pytest.raises(errors.ConfigError, match="are of different speeds"):
    checkpoint.check_trained_for(meta, "w", "sync", slower, "runtime")
