"""`regal.train`'s default learner: a prior over the search's fresh keys, learned by imitating
long runs (issue 68; `config.learner = "prior"`).

Stages, each saved in the workdir as it goes (a killed run resumes with nothing lost or
redone twice; a stage's file is named by the settings it depends on):
  1. labels: on every training and validation graph, the best of `prior.label_runs` unguided
     searches of `prior.label_evals` evaluations (`answers-<id>.npz`, per graph, on the Ray
     actors of `RolloutPool`);
  2. the network (`prior_net.PriorNet`): `prior.steps` full-batch Adam steps on the training
     labels, the step of lowest validation loss kept (`prior.msgpack`, with its config and the
     loss curves);
  3. calibration on the validation graphs (`valid-<id>.json`): the learned prior and the
     bottom-level prior at each q of `prior.qs` against the unguided search,
     `prior.calibration_seeds` paired seeds per graph at `evals` evaluations; each prior's best
     q is kept;
  4. test (`test-<id>.json`): unguided, learned and bottom-level at their chosen q, and the
     unguided search at equal wall time (the evaluations the guided search's extra seconds,
     guide included, buy at the validation graphs' rates), `prior.test_seeds` paired seeds on
     the test graphs, which nothing before has read.
The report (`report.json`) holds every figure, the verdict line and `training_curves.png`;
`metrics.csv` the losses per logged step, `tb/` TensorBoard scalars of them and of the
validation and test improvements (kill-safe as `workdir.ScalarEvents` says).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import time
from typing import Any, Callable

import jax
import ml_collections
import numpy as np

from regal_datasets import atomic, errors
from regal.learning import checkpoint
from regal.learning import prior_guide, prior_net, prior_policy, stats, train_lib
from regal.learning import workdir as workdir_files
from regal.learning.rollout import Task
from regal.learning.rollout_pool import RolloutPool
from regal.search import guides

PRIOR_FILE = checkpoint.PRIOR_FILE  # What inference reads: the kept parameters, q, costs.
PRETRAINED_FILE = "pretrained.msgpack"  # Stage 2: the network after imitation.
METRICS_FILE = "metrics.csv"  # Per logged Adam step: training and validation losses.
EVENTS_DIR = "tb"  # TensorBoard: those losses, then the validation and test improvements.
FEATURES = "policy+seed_placements"  # `prior_policy.features`: a change retrains the network.
LABEL_SEED_BASE = 40_000_003  # Long runs: seeds none of the measured searches use.
MEASURE_SEED_BASE = 50_000_017  # Validation and test searches (paired across arms).


def _digest(values: dict) -> str:
  return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]


def _ids(config: ml_collections.ConfigDict) -> dict[str, str]:
  """Stage names: each depends on what its results depend on, nothing else."""
  data = {k: config[k] for k in ("dataset", "num_train", "num_valid", "num_test", "num_devices",
                                 "model", "objective", "brkga_preset")}
  labels = {**data, "label_evals": config.prior.label_evals,
            "label_runs": config.prior.label_runs}
  net = {**labels, "features": FEATURES, "policy": config.policy.to_dict(),
         "steps": config.prior.steps,
         "learning_rate": config.prior.learning_rate, "seed": config.seed}
  measured = {**net, "evals": config.evals, "qs": list(config.prior.qs),
              "calibration_seeds": config.prior.calibration_seeds,
              "placement": config.prior.placement, "seeds": config.prior.seeds}
  finetune = {**measured, **{name: config.prior[name] for name in FINETUNE_SETTINGS}}
  return {"labels": _digest(labels), "net": _digest(net), "valid": _digest(measured),
          "finetune": _digest(finetune),
          "test": _digest({**finetune, "test_seeds": config.prior.test_seeds})}


FINETUNE_SETTINGS = ("finetune_steps", "finetune_graphs", "finetune_samples", "finetune_noise",
                     "finetune_learning_rate")


def check_config(config: ml_collections.ConfigDict) -> None:
  prior = config.prior
  for name in ("label_evals", "label_runs", "steps", "calibration_seeds", "test_seeds"):
    if not isinstance(prior[name], int) or isinstance(prior[name], bool) or prior[name] < 1:
      raise errors.ConfigError(f"config.prior.{name} must be a positive integer, got "
                               f"{prior[name]!r}")
  if not prior.learning_rate > 0:
    raise errors.ConfigError(f"config.prior.learning_rate must be positive, got "
                             f"{prior.learning_rate!r}")
  if not prior.qs or not all(isinstance(q, (int, float)) and 0 < q <= 1 for q in prior.qs):
    raise errors.ConfigError(f"config.prior.qs must be numbers in (0, 1], got {prior.qs!r}")
  for name, low in (("finetune_steps", 0), ("finetune_graphs", 1), ("finetune_samples", 2)):
    value = prior[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
      raise errors.ConfigError(f"config.prior.{name} must be an integer of at least {low}, "
                               f"got {value!r}")
  for name in ("finetune_noise", "finetune_learning_rate"):
    if not (isinstance(prior[name], (int, float)) and prior[name] > 0):
      raise errors.ConfigError(f"config.prior.{name} must be positive, got {prior[name]!r}")
  if prior.seeds not in prior_policy.PRIOR_SEEDS:
    raise errors.ConfigError(f"config.prior.seeds must be one of "
                             f"{', '.join(prior_policy.PRIOR_SEEDS)}, got {prior.seeds!r}")
  if prior.placement not in prior_net.AFFINITY_MAPPINGS:
    raise errors.ConfigError(f"config.prior.placement must be one of "
                             f"{', '.join(prior_net.AFFINITY_MAPPINGS)}, got {prior.placement!r}")
  if prior.label_evals <= config.evals:
    raise errors.ConfigError(f"config.prior.label_evals ({prior.label_evals}) must exceed "
                             f"config.evals ({config.evals}): labels come from longer runs")
  if config.reward != "model" or config.finetune_from:
    raise errors.ConfigError("the prior learner imitates long runs of the model: "
                             "config.reward=measured and config.finetune_from need "
                             "config.learner=mutants")


def long_run_answers(pool_of: Callable[[], RolloutPool], indices: list[int], runs: int,
                     evals: int, path: str, what: str) -> dict[int, np.ndarray]:
  """{index: the best answer of `runs` unguided searches of `evals` evaluations} for the
  problems `indices` of the pool `pool_of()` gives (asked for only when something is
  missing): a per-graph stage saved at `path` as each graph's runs finish."""
  tasks = [t for i in indices for t in prior_policy.answer_tasks(i, runs, evals,
                                                                 LABEL_SEED_BASE)]

  def compute(missing, on_done):
    wanted = [tasks[k] for graph in missing for k in range(graph * runs, (graph + 1) * runs)]
    collected: dict[int, list] = {}

    def finished(positions, values):
      done = []
      for position, value in zip(positions, values):
        graph = missing[position // runs]
        collected.setdefault(graph, []).append(value)
        if len(collected[graph]) == runs:
          done.append(graph)
      on_done(done, [prior_policy.best_answer(collected[g]) for g in done])
    pool_of().map(wanted, finished)

  done = workdir_files.per_graph_stage(path, path if os.path.exists(path) else None, what,
                                   list(range(len(indices))), compute, "graphs")
  return {index: np.asarray(done[k], np.float32) for k, index in enumerate(indices)}


def _runs_phrase(runs: int) -> str:
  return "one run" if runs == 1 else f"the best of {runs} runs"


class _Run:
  """One training run's problems, pool and stage files."""

  def __init__(self, config: ml_collections.ConfigDict, workdir: str):
    self.config, self.workdir = config, workdir
    self.ids = _ids(config)
    self.problems, self.splits = train_lib.split_problems(config)
    self.pool = RolloutPool(self.problems, config.evals, config.num_actors,
                            preset=config.get("brkga_preset", "default"))
    self._seeds: dict[int, dict[str, np.ndarray]] = {}

  def path(self, name: str) -> str:
    return os.path.join(self.workdir, name)

  def heuristic_seeds(self, index: int) -> dict[str, np.ndarray]:
    """Graph `index`'s heuristic seeds, computed once per run: the prior's features read
    them, and the stages ask for each graph's features once per arm and seed."""
    if index not in self._seeds:
      from regal.baselines import heuristics
      self._seeds[index] = heuristics.seeds(self.problems[index])
    return self._seeds[index]

  def stage(self, name: str, what: str, count: int, compute, unit: str) -> dict[int, Any]:
    path = self.path(name)
    return workdir_files.per_graph_stage(path, path if os.path.exists(path) else None, what,
                                     list(range(count)), compute, unit)

  def answers(self) -> dict[int, np.ndarray]:
    """Every training and validation graph's label answer (stage 1)."""
    prior = self.config.prior
    return long_run_answers(
        lambda: self.pool, self.splits["train"] + self.splits["valid"], prior.label_runs,
        prior.label_evals, self.path(f"answers-{self.ids['labels']}.npz"),
        f"labels: {_runs_phrase(prior.label_runs)} of {prior.label_evals:,} evaluations")

  def network(self, answers: dict[int, np.ndarray]):
    """(network, parameters, loss history) of stage 2, trained or read back."""
    net = prior_guide.network(self.config)
    path = self.path(PRETRAINED_FILE)
    problem_of = lambda split: [self.problems[i] for i in self.splits[split]]  # noqa: E731
    batches = {split: prior_policy.batch(
        problem_of(split), [answers[i] for i in self.splits[split]],
        seeds=[self.heuristic_seeds(i) for i in self.splits[split]])
               for split in ("train", "valid")}
    if os.path.exists(path):
      meta = checkpoint.read_meta(path)
      if meta.get("net") == self.ids["net"]:
        params, _ = checkpoint.restore(path, net.init(jax.random.PRNGKey(0),
                                                      batches["train"].graph))
        return net, params, meta["history"]
    started = time.perf_counter()
    settings = prior_policy.TrainSettings(steps=self.config.prior.steps,
                                          learning_rate=self.config.prior.learning_rate,
                                          seed=self.config.seed)
    line = _Line(f"training the prior: {settings.steps} steps")
    # The network restarts from step 0 after a kill: what a killed run logged goes first.
    metrics = self.path(METRICS_FILE)
    workdir_files.truncate_metrics(metrics, 0)
    events = workdir_files.ScalarEvents(self.path(EVENTS_DIR), 0)

    def log(k: int, train: float, valid: float) -> None:
      line.say(f"step {k}/{settings.steps}: train loss {train:.3f}, validation loss "
               f"{valid:.3f}")
      workdir_files.append_csv(metrics, {"step": k, "train_loss": train, "valid_loss": valid})
      events.add({"loss/train": train, "loss/valid": valid}, k)

    try:
      params, history = prior_policy.train(net, batches["train"], batches["valid"], settings,
                                           log=log)
    finally:
      events.close()
    line.done(time.perf_counter() - started)
    checkpoint.save(path, params, {"net": self.ids["net"], "history": history,
                                   "config_values": self.config.to_dict()})
    return net, params, history

  def measure(self, name: str, what: str, indices: list[int], seeds: int,
              arms: dict[str, Callable[[int, int], guides.Guidance] | int]
              ) -> dict[str, np.ndarray]:
    """{arm: [graphs, seeds] objectives, arm + ' seconds': wall seconds}: each arm's search
    on each graph and paired seed. An arm is a function of (graph index, search seed) giving
    its guidance (a prior, seeds besides the heuristics'), or an int: the unguided search with
    that many evaluations."""
    tasks = []
    for arm, prior in arms.items():
      for i in indices:
        for k in range(seeds):
          seed = MEASURE_SEED_BASE + k
          if isinstance(prior, int):
            tasks.append(Task(i, None, None, seed, evals=prior, timed=True))
            continue
          guided = prior(i, seed)
          tasks.append(Task(i, None, None, seed, timed=True, seeds=guided.seeds or None,
                            prior=None if guided.prior_q is None else (
                                guided.prior_q, guided.prior_mean, guided.prior_spread)))

    def compute(missing, on_done):
      self.pool.map([tasks[k] for k in missing], lambda chunk, values: on_done(
          [missing[c] for c in chunk], [list(v) for v in values]))

    done = self.stage(name, what, len(tasks), compute, "searches")
    values = np.array([done[k] for k in range(len(tasks))], np.float64).reshape(
        len(arms), len(indices), seeds, 2)
    result = {}
    for a, arm in enumerate(arms):
      result[arm] = values[a, ..., 0]
      result[arm + " seconds"] = values[a, ..., 1]
    return result


class _Line:
  def __init__(self, what: str):
    from regal.search import progress as search_progress
    self.what = what
    self.line = search_progress.LiveLine(log_interval=workdir_files.PROGRESS_SECONDS)
    print(what, flush=True)

  def say(self, text: str) -> None:
    self.line.update(f"  {text}")

  def done(self, seconds: float) -> None:
    self.line.close()
    print(f"  {self.what}: done in {seconds:.1f} s", flush=True)


def _improvement(objectives: dict[str, np.ndarray], arm: str, base: str = "unguided"
                 ) -> np.ndarray:
  return 100 * (objectives[base] - objectives[arm]) / objectives[base]


def _summary(objectives: dict[str, np.ndarray], arm: str, base: str = "unguided") -> dict:
  improvement = _improvement(objectives, arm, base)
  low, high = stats.bootstrap_interval(improvement, np.random.default_rng(0))
  return {"improvement_pct": float(improvement.mean(axis=1).mean()),
          "interval_pct": [low, high],
          "win_rate": float((objectives[arm] < objectives[base]).mean()),
          "loss_rate": float((objectives[arm] > objectives[base]).mean()),
          "seconds_per_search": float(objectives[arm + " seconds"].mean())}


def _learned_prior(run: _Run, net, params, q: float):
  def prior(index: int, seed: int) -> guides.Guidance:
    return prior_guide.prior_guide(net, params, q, run.config.prior,
                                   run.heuristic_seeds(index)).guide(
        run.problems[index], seed, guides.Guidance())
  return prior


def _bottom_level_prior(run: _Run, q: float):
  def prior(index: int, seed: int) -> guides.Guidance:
    return guides.BottomLevelPrior(q).guide(run.problems[index], seed, guides.Guidance())
  return prior


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  train_lib.check_config(config)
  check_config(config)
  if os.path.exists(os.path.join(workdir, PRIOR_FILE)):  # Unreadable: said before any work.
    checkpoint.read_meta(os.path.join(workdir, PRIOR_FILE))
  os.makedirs(workdir, exist_ok=True)
  run = _Run(config, workdir)
  try:
    return _train_and_evaluate(run)
  finally:
    run.pool.shutdown()


def _train_and_evaluate(run: _Run) -> dict[str, Any]:
  config, started = run.config, time.perf_counter()
  answers = run.answers()
  label_seconds = time.perf_counter() - started
  net, params, history = run.network(answers)
  qs = [float(q) for q in config.prior.qs]
  unguided = lambda i, seed: guides.Guidance()  # noqa: E731
  valid_arms: dict[str, Any] = {"unguided": unguided}
  for q in qs:
    valid_arms[f"learned q={q:g}"] = _learned_prior(run, net, params, q)
    valid_arms[f"bottom_level q={q:g}"] = _bottom_level_prior(run, q)
  valid = run.measure(f"valid-{run.ids['valid']}.json", "calibration on validation graphs",
                      run.splits["valid"], config.prior.calibration_seeds, valid_arms)
  calibration = {arm: _summary(valid, arm) for arm in valid_arms if arm != "unguided"}
  _log_scalars(run, {f"valid/improvement_pct/{arm}": row["improvement_pct"]
                     for arm, row in calibration.items()}, stage=1)
  chosen = {kind: max(qs, key=lambda q: calibration[f"{kind} q={q:g}"]["improvement_pct"])
            for kind in ("learned", "bottom_level")}
  q = chosen["learned"]
  finetune = _finetune(run, net, params, q, valid) if config.prior.finetune_steps else None
  kept_arm = "finetuned" if finetune and finetune["kept"] else "learned"
  kept = finetune["params"] if kept_arm == "finetuned" else params
  # The kept parameters and the chosen q go into the inference file (`regal.optimize
  # --policy` runs the prior with them), with the equal-time budget, measured once: a resumed
  # test stage keeps its tasks. What inference reads comes from this run's config (the
  # network may be an earlier run's with other guide settings: its stage depends on the
  # labels and the network only).
  path = run.path(PRIOR_FILE)
  meta = checkpoint.read_meta(path) if os.path.exists(path) else {}
  wanted = json.loads(json.dumps(  # As read back (tuples are lists).
      {"net": run.ids["net"], "history": history, "config_values": config.to_dict(), "q": q,
       "calibrated": run.ids["finetune"], "kept": kept_arm}))
  if any(meta.get(name) != value for name, value in wanted.items()):
    checkpoint.save(path, kept, wanted)
    # Equal wall time: the unguided search gets the evaluations the guided one's extra
    # seconds (its guide, its draws) would have bought, at the validation graphs' rates.
    guide_seconds = _guide_seconds(net, config.prior, path,
                                   [run.problems[i] for i in run.splits["valid"]])
    learned_seconds = calibration[f"learned q={q:g}"]["seconds_per_search"]
    meta = {**wanted, "guide_seconds": guide_seconds, "time_ratio": (
        learned_seconds + guide_seconds) / float(valid["unguided seconds"].mean())}
    checkpoint.save(path, kept, meta)
  guide_seconds, time_ratio = meta["guide_seconds"], meta["time_ratio"]
  equal_time_evals = int(np.ceil(config.evals * max(time_ratio, 1.0)))
  test_arms: dict[str, Any] = {
      "unguided": unguided,
      "learned": _learned_prior(run, net, params, q),
      **({"finetuned": _learned_prior(run, net, finetune["params"], q)} if finetune else {}),
      "bottom_level": _bottom_level_prior(run, chosen["bottom_level"]),
      "unguided, equal time": equal_time_evals}
  # Named by the equal-time budget too: its arm's searches are only valid for that budget.
  test = run.measure(f"test-{run.ids['test']}-{equal_time_evals}.json", "test graphs",
                     run.splits["test"],
                     config.prior.test_seeds, test_arms)
  report = {
      "learner": "prior", "dataset": config.dataset, "evals": config.evals,
      "test_graphs": len(run.splits["test"]), "test_seeds": config.prior.test_seeds,
      "label_evals": config.prior.label_evals, "label_runs": config.prior.label_runs,
      "label_seconds": label_seconds, "history": history, "chosen_q": chosen,
      # This run's wall time (a resumed run's: since it resumed).
      "seconds": time.perf_counter() - started,
      "calibration": calibration,
      # The kept prior (the fine-tuned one where it beat the imitation on validation).
      "kept": kept_arm,
      "test": _summary(test, kept_arm),
      "test_imitation": _summary(test, "learned"),
      "test_bottom_level": _summary(test, "bottom_level"),
      "test_learned_vs_bottom_level": _summary(test, kept_arm, "bottom_level"),
      "test_equal_time": {**_summary(test, kept_arm, "unguided, equal time"),
                          "unguided_evals": equal_time_evals, "time_ratio": time_ratio},
      "guide_seconds_per_graph": guide_seconds,
      "unguided_seconds_per_search": float(test["unguided seconds"].mean()),
      "split_graphs": {split: [run.problems[i].graph.name for i in indices]
                       for split, indices in run.splits.items()},
      "objectives": {arm: test[arm].tolist() for arm in test_arms}}
  if finetune:
    report["finetune"] = {
        "steps": config.prior.finetune_steps, "kept": finetune["kept"],
        "history": finetune["history"], "valid_vs_imitation": finetune["valid_vs_imitation"],
        "test": _summary(test, "finetuned"),
        "test_vs_imitation": _summary(test, "finetuned", "learned")}
  report["verdict"] = verdict(report)
  _log_scalars(run, {"test/improvement_pct": report["test"]["improvement_pct"],
                     "test/improvement_pct_equal_time":
                         report["test_equal_time"]["improvement_pct"],
                     "test/vs_bottom_level_points":
                         report["test_learned_vs_bottom_level"]["improvement_pct"]},
               stage=config.prior.finetune_steps + 3)
  atomic.write_text(run.path("report.json"), json.dumps(report, indent=1))
  _plot(history, run.path("training_curves.png"))
  return report


def _finetune(run: _Run, net, params, q: float, valid: dict[str, np.ndarray]) -> dict:
  """REINFORCE from the imitation's parameters (`prior_finetune`), then the fine-tuned prior
  on the validation graphs with the calibration's seeds, paired against the imitation's
  searches there: kept only if it is better on average."""
  from regal.learning import prior_finetune
  config, prior = run.config, run.config.prior
  settings = prior_finetune.Settings(
      steps=prior.finetune_steps, graphs=prior.finetune_graphs, samples=prior.finetune_samples,
      noise=float(prior.finetune_noise), learning_rate=float(prior.finetune_learning_rate),
      q=q, placement=prior.placement, seeds=prior.seeds, seed=config.seed)
  tuner = prior_finetune.Finetuner(net, run.problems, run.splits["train"], settings, run.pool,
                                   run.workdir, run.ids["finetune"], run.heuristic_seeds)
  tuned, history = tuner.run(params, run.path(EVENTS_DIR), prior.steps + 1)
  measured = run.measure(f"finetune-valid-{run.ids['finetune']}.json",
                         "the fine-tuned prior on validation graphs", run.splits["valid"],
                         prior.calibration_seeds,
                         {"finetuned": _learned_prior(run, net, tuned, q)})
  paired = {"finetuned": measured["finetuned"],
            "finetuned seconds": measured["finetuned seconds"],
            "learned": valid[f"learned q={q:g}"],
            "learned seconds": valid[f"learned q={q:g} seconds"]}
  versus = _summary(paired, "finetuned", "learned")
  _log_scalars(run, {"finetune/valid_vs_imitation_points": versus["improvement_pct"]},
               stage=prior.finetune_steps + 2)
  return {"params": tuned, "history": history, "valid_vs_imitation": versus,
          "kept": versus["improvement_pct"] > 0}


def _log_scalars(run: _Run, values: dict[str, float], stage: int) -> None:
  """A measured stage's figures as TensorBoard scalars, `stage` steps past the network's last
  (1: calibration; 1 + k: fine-tune step k of F; F + 2: the fine-tune on validation; F + 3:
  test). No purge: the stages are saved, so a rerun logs the same figures at the same step."""
  step = run.config.prior.steps + stage
  events = workdir_files.ScalarEvents(run.path(EVENTS_DIR), step - 1, purge=False)
  try:
    events.add(values, step)
  finally:
    events.close()


def _guide_seconds(net, prior: ml_collections.ConfigDict, path: str, problems) -> float:
  """Median wall seconds of the learned guide per graph as `regal.optimize --policy` pays it
  in a new process whose persistent compilation cache holds the network's program: the
  checkpoint read, the network traced and its program loaded from that cache, the features,
  the forward pass, the keys and the seed (the heuristic seeds it reads are the search's
  own, computed before). Each graph's first call fills the cache; JAX's in-memory caches are
  then cleared and the second is timed."""
  seconds = []
  for problem in problems:
    seeded = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
    for timed in (False, True):
      _forget_compiled()
      started = time.perf_counter()
      params, _ = checkpoint.restore_raw(path)
      prior_guide.prior_guide(net, params, 1.0, prior, seeded.seeds).guide(problem, 0, seeded)
      if timed:
        seconds.append(time.perf_counter() - started)
  return float(np.median(seconds))


def _forget_compiled() -> None:
  """Forgets every traced and compiled program of this process (a new process's state)."""
  prior_policy.forget_compiled()
  jax.clear_caches()


def verdict(report: dict) -> str:
  """The test result in two lines: the learned prior against the unguided search and against
  the bottom-level prior, with 95% intervals, and whether it pays."""
  test, versus = report["test"], report["test_learned_vs_bottom_level"]
  low, high = test["interval_pct"]
  said = ("the learned prior pays" if low > 0 else "the learned prior hurts" if high < 0 else
          "no evidence the learned prior pays: its interval holds 0")
  if low > 0 and versus["interval_pct"][0] <= 0:
    said += ", but not told apart from the bottom-level prior"
  finetune = report.get("finetune")
  tuned = "" if finetune is None else (
      f", imitation then REINFORCE ({finetune['steps']} steps, "
      f"{finetune['valid_vs_imitation']['improvement_pct']:+.2f} points over the imitation on "
      f"validation: kept)" if finetune["kept"] else
      f", by imitation (REINFORCE's {finetune['steps']} steps "
      f"{finetune['valid_vs_imitation']['improvement_pct']:+.2f} points on validation: "
      f"dropped; on test {finetune['test_vs_imitation']['improvement_pct']:+.2f})")
  return (f"test: on {report['test_graphs']} unseen graphs x {report['test_seeds']} seeds at "
          f"{report['evals']:,} evaluations, the learned prior "
          f"(q {report['chosen_q']['learned']:g}{tuned})"
          f" is {test['improvement_pct']:+.2f}% against the same search unguided (95% interval "
          f"[{low:+.2f}, {high:+.2f}], better on {100 * test['win_rate']:.0f}% of runs) and "
          f"{versus['improvement_pct']:+.2f} points against the bottom-level prior "
          f"([{versus['interval_pct'][0]:+.2f}, {versus['interval_pct'][1]:+.2f}]); "
          f"{report['guide_seconds_per_graph'] * 1000:.1f} ms of guide per graph against "
          f"{report['unguided_seconds_per_search'] * 1000:.0f} ms per search; at equal wall time "
          f"(unguided {report['test_equal_time']['unguided_evals']:,} evaluations) "
          f"{report['test_equal_time']['improvement_pct']:+.2f}% "
          f"([{report['test_equal_time']['interval_pct'][0]:+.2f}, "
          f"{report['test_equal_time']['interval_pct'][1]:+.2f}])\n"
          f"verdict: {said}")


def _plot(history, path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(6, 3.5))
  steps = [h[0] for h in history]
  ax.plot(steps, [h[1] for h in history], label="training loss")
  ax.plot(steps, [h[2] for h in history], label="validation loss")
  ax.set_xlabel("Adam step")
  ax.set_ylabel("negative log-likelihood per op")
  ax.legend()
  fig.tight_layout()
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=120)
  plt.close(fig)
  atomic.write_bytes(path, buffer.getvalue())
