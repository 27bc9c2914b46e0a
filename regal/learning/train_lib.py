"""REGAL training: `train_and_evaluate(config, workdir)` behind `python -m regal.train`.

Rollouts run the one search (`regal.search.guides.run_guided`: what `regal.optimize` runs, the
preset's settings for the model, the heuristic seeds, every evaluation from the problem's own
model). Per graph: features of the graph and its heuristic seeds (no evaluations). Per graph
and reference seed (`reference_seeds` of them), once: the unguided search's objective, cached
in the workdir as it is needed. Then REINFORCE steps: a batch of training graphs, each with
one of its reference seeds, sampled actions (`samples_per_graph` per graph, a leave-one-out
baseline), guided searches on the rollout pool (Ray actors by default), rewards
r = log(unguided / guided) at the same seed and budget, one Adam step. Every `eval_every`
steps the policy's most likely distributions are scored on validation graphs with
`eval_seeds` seeds each (mean % improvement over the unguided search, win rate).

Measured rewards (`config.reward = "measured"`, REGAL fine-tuning on devices): the objective
is the measured run time of a rollout's best solution (`regal.execute`: stand-in kernels for
the synthetic graphs, host devices on a CPU, measurements cached by assignment), the reference
the measured time of the unguided search's best solution on the graph and seed (cached in the
workdir as `unguided-measured-<config>.json`); validation and test are measured the same way.
`config.finetune_from` names a trained workdir whose policy is the starting point.

Workdir (`regal.learning.workdir`): `checkpoint.msgpack` (`regal.learning.checkpoint`: the
state with its step, config fingerprint, config and validation history in one file, written
atomically after every step, so a killed run resumes where it stopped; a checkpoint from
another config is refused), `metrics.csv`, TensorBoard events in `tb/`, the references'
caches (`regal.learning.references`), and at the end `report.json` and `reward_curve.png`.
Every per-graph stage is saved as its chunks finish and reports progress every few seconds,
so an interrupt at any instant loses at most one chunk of work.
"""
from __future__ import annotations

import io
import json
import os
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from regal_datasets import atomic
from regal_datasets import dataset as dataset_lib
from regal_datasets import devices as devices_lib
from regal_datasets import cli, errors
from regal_datasets import synthetic
from regal_datasets.padding import bucket_size
from regal.learning import checkpoint
from regal.learning import features as features_lib
from regal.learning import policy as policy_lib
from regal.learning import policy_runner
from regal.learning import references, reinforce
from regal.learning import stats
from regal.learning import workdir as workdir_files
from regal.learning.rollout import Task
from regal.learning.rollout_pool import RolloutPool
from regal.scoring import performance
from regal.search import progress as search_progress



_POSITIVE = ("num_train", "num_valid", "num_test", "num_devices", "evals", "batch_size",
             "samples_per_graph", "reference_seeds", "eval_seeds", "imitation_learning_rate", "eval_every", "num_eval_graphs", "log_every",
             "measure_repeats", "policy.hidden", "policy.rounds", "policy.placement_bins",
             "policy.priority_bins")
_NOT_NEGATIVE = ("num_steps", "imitation_steps", "num_actors", "clip_norm", "entropy_weight", "test_filter_pct",
                 "standin_seconds")


def check_config(config: ml_collections.ConfigDict) -> None:
  """Refuses, before any work, counts and sizes that cannot run: one line naming the field."""
  def value(name):
    node = config
    for part in name.split("."):
      node = node[part]
    return node
  for name in _POSITIVE + _NOT_NEGATIVE:
    number = value(name)
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not np.isfinite(
        number) or number < 0 or (name in _POSITIVE and number == 0):
      raise errors.ConfigError(f"config.{name} must be "
                               f"{'positive' if name in _POSITIVE else 'non-negative'}, "
                               f"got {number!r}")
  if not config.learning_rate > 0:
    raise errors.ConfigError(f"config.learning_rate must be positive, got "
                             f"{config.learning_rate!r}")
  devices = devices_lib.homogeneous(config.num_devices)  # The device-count ceiling.
  if config.eval_seeds > config.reference_seeds:
    raise errors.ConfigError(f"config.eval_seeds ({config.eval_seeds}) must not exceed "
                             f"config.reference_seeds ({config.reference_seeds})")
  if not 0 < config.policy.initial_steer < 1:
    raise errors.ConfigError(f"config.policy.initial_steer must lie in (0, 1), got "
                             f"{config.policy.initial_steer!r}")
  # The model and objective must be scorable (rewards come from that model): checked on a
  # small graph before the dataset is built.
  performance.Problem(synthetic.sized_graph(4), devices, model=config.model,
                      objective=config.objective)


def _policy_config(config) -> policy_lib.PolicyConfig:
  return policy_lib.PolicyConfig(**config.policy.to_dict())


def _train_config(config) -> reinforce.TrainConfig:
  return reinforce.TrainConfig(learning_rate=config.learning_rate, clip_norm=config.clip_norm,
                               entropy_weight=config.entropy_weight,
                               normalize_advantage=config.normalize_advantage)


def split_problems(config: ml_collections.ConfigDict
                   ) -> tuple[list[performance.Problem], dict[str, list[int]]]:
  """(problems, {split: indices into problems}) of the config's dataset, devices and model."""
  dataset = dataset_lib.for_training(config.dataset, config.num_train, config.num_valid,
                                     config.num_test)
  devices = devices_lib.homogeneous(config.num_devices)
  splits, problems = {}, []
  for split in ("train", "valid", "test"):
    graphs = dataset[split]
    splits[split] = list(range(len(problems), len(problems) + len(graphs)))
    problems += [performance.Problem(g, devices, model=config.model,
                                     objective=config.objective) for g in graphs]
  return problems, splits


class Trainer:
  """Everything a training run holds: problems, features, pool, compiled steps."""

  def __init__(self, config: ml_collections.ConfigDict, workdir: str):
    self.config, self.workdir = config, workdir
    os.makedirs(workdir, exist_ok=True)
    problems, self.splits = split_problems(config)
    self.problems = problems
    self.policy_config = _policy_config(config)
    self.train_config = _train_config(config)
    self.num_devices = config.num_devices
    # Rollouts and the unguided reference run the one search (`regal.search.guides`) with the
    # preset's parameters and settings for the model.
    self.pool = RolloutPool(problems, config.evals, config.num_actors,
                            preset=config.get("brkga_preset", "default"))
    if config.reward not in ("model", "measured"):
      raise errors.ConfigError(f"unknown reward {config.reward!r}; known: model, measured")
    self.references = references.References(config, workdir, problems, self.pool)
    self.features = self._features()
    self.splits["test"] = self.references.filtered_test(self.splits["test"])
    if not self.measured:  # Every reference up front: one stage, spread over the pool.
      pairs = [(i, k) for i in self.splits["train"] for k in range(config.reference_seeds)]
      pairs += [(i, k) for split in ("valid", "test") for i in self.splits[split]
                for k in range(config.eval_seeds)]
      self.references.unguided(*zip(*pairs))
    max_nodes = max(p.graph.num_ops for p in problems)
    max_edges = max(p.graph.num_edges for p in problems)
    self.graphs_per_step = config.batch_size * config.samples_per_graph
    self.node_bucket = bucket_size(self.graphs_per_step * max_nodes + 1)
    self.edge_bucket = bucket_size(max(self.graphs_per_step * max_edges, 1))
    policy = policy_lib.Policy(self.policy_config, self.num_devices)
    self.apply_policy = jax.jit(policy.apply)

  @property
  def measured(self) -> bool:
    return self.references.measured

  def _features(self) -> list:
    """Each graph's features, its heuristic seeds' included (`policy_runner.padded_graph`'s,
    without the padding): no model evaluations."""
    return [features_lib.graph_features(p, features_lib.seed_features(
        p, policy_runner.feature_seeds(p))) for p in self.problems]

  # ----- imitation --------------------------------------------------------------------------
  def imitate(self, state: reinforce.TrainState) -> reinforce.TrainState:
    """`imitation_steps` Adam steps toward what the unguided search's answers on each
    training graph agree on (`policy.imitation_targets`; deterministic, so a run killed
    before its first checkpoint imitates the same again)."""
    config = self.config
    train = self.splits["train"]
    targets = {i: policy_lib.imitation_targets(
        [self.references.unguided_best(i, k) for k in range(config.reference_seeds)],
        self.problems[i].layout, self.policy_config) for i in train}
    params = state.policy_params
    opt_state = reinforce.imitation_optimizer(config.imitation_learning_rate).init(params)
    progress = workdir_files.Progress("imitating the unguided search's agreed choices",
                        config.imitation_steps, unit="steps")
    for step in range(config.imitation_steps):
      rng = np.random.default_rng([config.seed, 1_000_000 + step])
      chosen = rng.choice(train, size=min(self.graphs_per_step, len(train)), replace=False)
      graph, _ = self._batch(chosen)
      nodes = graph.nodes.shape[0]
      real = sum(self.problems[i].graph.num_ops for i in chosen)
      batch = policy_lib.Actions(*(np.concatenate(
          [np.asarray(getattr(targets[i], field)) for i in chosen]
          + [np.zeros((nodes - real,) + np.asarray(getattr(targets[chosen[0]], field)).shape[1:],
                      np.int32)]) for field in policy_lib.Actions._fields))
      node_mask = np.arange(nodes) < real
      params, opt_state, loss = reinforce.imitation_step(
          params, opt_state, graph, batch, node_mask, self.num_devices, self.policy_config,
          config.imitation_learning_rate)
      progress.advance(1)
    progress.finish()
    if config.imitation_steps:
      print(f"imitation: loss {float(loss):.4f} after {config.imitation_steps} steps",
            flush=True)
    return state.replace(policy_params=params)

  # ----- policy rollouts -------------------------------------------------------------------
  def _batch(self, indices):
    graph = policy_lib.batch_graphs([self.features[i] for i in indices], self.node_bucket,
                                    self.edge_bucket)
    mask = np.zeros(len(indices) + 1, bool)
    mask[:len(indices)] = True
    return graph, mask

  def distributions(self, policy_params, indices, key, greedy: bool):
    """(graph, mask, actions, [(alpha, beta) per graph on its own layout]): the policy's
    mutant distributions on graphs `indices` (sampled with `key`, or its most likely ones)."""
    graph, mask = self._batch(indices)
    logits = self.apply_policy(policy_params, graph)
    actions = policy_lib.greedy(logits) if greedy else policy_lib.sample(key, logits)
    distributions, first = [], 0
    for i in indices:
      alpha, beta = policy_lib.mutant_distributions(actions, self.problems[i].layout,
                                                    self.policy_config, first_node=first)
      first += self.problems[i].graph.num_ops
      distributions.append((np.asarray(alpha), np.asarray(beta)))
    return graph, mask, actions, distributions

  def rollouts(self, policy_params, indices, key, greedy: bool, slots):
    """(graph, mask, actions, objectives) of the policy's distributions on graphs `indices`
    (repeats allowed: each copy draws its own actions), rollout k with the seed of reference
    slot `slots[k]`; objectives are measured seconds with measured rewards."""
    graph, mask, actions, distributions = self.distributions(policy_params, indices, key,
                                                             greedy)
    tasks = [Task(i, alpha, beta, references.seed_of(slot), self.config.evals,
                  best=self.measured)
             for i, slot, (alpha, beta) in zip(indices, slots, distributions)]
    results = self.pool.map(tasks)
    if self.measured:
      results = [self.references.measure(i, chromosome)
                 for i, (_, chromosome) in zip(indices, results)]
    return graph, mask, actions, np.asarray(results)

  def evaluate(self, policy_params, indices, what: str = "validation") -> dict[str, float]:
    """The policy's most likely distributions on `indices`, each graph with the first
    `eval_seeds` reference seeds: mean % improvement over the unguided search with the same
    seed and budget, the share of (graph, seed) pairs improved, and the mean reward."""
    pairs = [(i, slot) for i in indices for slot in range(self.config.eval_seeds)]
    objectives = []
    batch = self.config.batch_size
    progress = workdir_files.Progress(f"{what}: the guided searches", len(pairs),
                                      unit="searches",
                        announce=False)
    for start in range(0, len(pairs), batch):
      chunk = pairs[start:start + batch]
      _, _, _, values = self.rollouts(policy_params, [i for i, _ in chunk], None, True,
                                      [slot for _, slot in chunk])
      objectives += values.tolist()
      progress.advance(len(chunk))
    progress.finish()
    objectives = np.asarray(objectives)
    unguided = self.references.reference([i for i, _ in pairs], [slot for _, slot in pairs])
    improvement = 100.0 * (unguided - objectives) / unguided
    low, high = stats.bootstrap_interval(improvement.reshape(len(indices), -1),
                                         np.random.default_rng(0))
    return {"improvement_pct": float(improvement.mean()),
            "improvement_interval_pct": [low, high],
            "win_rate": float((objectives < unguided).mean()),
            "matched_or_beaten": float((objectives <= unguided).mean()),
            "reward": float(reinforce.log_ratio_rewards(unguided, objectives).mean())}


def _checkpoint_meta(workdir: str, config_id: str) -> dict | None:
  """The checkpoint's metadata, None without one; a one-line error if another config's."""
  if not os.path.exists(checkpoint.in_workdir(workdir)):
    return None
  meta = checkpoint.read_meta(checkpoint.in_workdir(workdir))
  if meta.get("config") != config_id:
    raise errors.ConfigError(f"{workdir} holds a checkpoint of another config "
                             f"({meta.get('config')}, this one is {config_id}); use a new "
                             f"--workdir")
  return meta


def _finetune_source(config: ml_collections.ConfigDict) -> str:
  """The checkpoint of the trained workdir `config.finetune_from`, checked to share this
  config's policy shape (network config and device count) before any work starts."""
  source = checkpoint.in_workdir(config.finetune_from)
  if not os.path.exists(source):
    raise errors.ConfigError(f"finetune_from {config.finetune_from}: no checkpoint")
  trained = checkpoint.read_meta(source).get("config_values", {})
  if (trained.get("policy") != config.policy.to_dict()
      or trained.get("num_devices") != config.num_devices):
    raise errors.ConfigError(f"finetune_from {config.finetune_from}: its policy (network "
                             f"{trained.get('policy')}, {trained.get('num_devices')} devices) "
                             f"differs from this config's")
  return source


def _start_from(source: str, template: reinforce.TrainState) -> reinforce.TrainState:
  """`template` with the trained policy and baseline (a fresh optimizer and step count)."""
  state, _ = checkpoint.restore(source, template)
  print(f"fine-tuning the policy of {source} (step {int(state.step)})", flush=True)
  return template.replace(policy_params=state.policy_params,
                          baseline_params=state.baseline_params)


def initial_state(trainer: Trainer, template: bool = False) -> reinforce.TrainState:
  """The state training starts from; `template`: only its shapes (what a checkpoint restores
  into: `reinforce.state_template`)."""
  example, _ = trainer._batch(trainer.splits["train"][:trainer.graphs_per_step])
  if template:
    return reinforce.state_template(example, trainer.config.num_devices, trainer.policy_config,
                                    trainer.train_config)
  return reinforce.init_state(jax.random.key(trainer.config.seed), example,
                              trainer.config.num_devices, trainer.policy_config,
                              trainer.train_config)


def workdir_config(workdir: str) -> ml_collections.ConfigDict:
  """The training config a workdir's checkpoint was written with."""
  path = checkpoint.in_workdir(workdir)
  if not os.path.exists(path) and os.path.exists(os.path.join(workdir, checkpoint.PRIOR_FILE)):
    path = os.path.join(workdir, checkpoint.PRIOR_FILE)  # The learned prior's (`prior_train`).
  if not os.path.exists(path):
    raise errors.ConfigError(f"no trained policy in {workdir} ({checkpoint.WORKDIR_FILE} missing)")
  meta = checkpoint.read_meta(path)
  if "config_values" not in meta:
    raise errors.ConfigError(f"{path}: checkpoint written without its config")
  return ml_collections.ConfigDict(meta["config_values"])


def trained_policy(trainer: Trainer, workdir: str):
  """The best-validated policy parameters of `workdir` (its last checkpoint's without a best
  file), trained with `trainer`'s config."""
  if _checkpoint_meta(workdir, workdir_files.fingerprint(trainer.config)) is None:
    raise errors.ConfigError(f"no checkpoint in {workdir}")
  best = checkpoint.best_in_workdir(workdir)
  path = best if os.path.exists(best) else checkpoint.in_workdir(workdir)
  state, _ = checkpoint.restore(path, initial_state(trainer, template=True))
  return state.policy_params


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
  check_config(config)
  if config.get("learner", "mutants") != "mutants":
    raise errors.ConfigError(f"this trains REGAL's mutant policy (config.learner=mutants), "
                             f"not {config.learner!r} (`regal.learning.prior_train`)")
  config_id = workdir_files.fingerprint(config)
  meta = _checkpoint_meta(workdir, config_id)  # Refuse another config's workdir first.
  start = _finetune_source(config) if config.finetune_from and meta is None else None
  trainer = Trainer(config, workdir)
  state = initial_state(trainer, template=meta is not None)
  history = []
  if meta is not None:
    state, meta = checkpoint.restore(checkpoint.in_workdir(workdir), state)
    history = meta["history"]
    print(f"resuming {workdir} at step {int(state.step)}", flush=True)
  elif start is not None:
    state = _start_from(start, state)
  elif config.imitation_steps and not trainer.measured:
    state = trainer.imitate(state)
  valid = trainer.splits["valid"][:config.num_eval_graphs]
  if not history:
    history.append({"step": 0, **trainer.evaluate(state.policy_params, valid)})
    print(f"step 0: validation improvement {history[-1]['improvement_pct']:.2f}%", flush=True)
    _keep_if_best(workdir, state, history, config_id)
  workdir_files.truncate_metrics(os.path.join(workdir, "metrics.csv"), int(state.step))
  events = workdir_files.ScalarEvents(os.path.join(workdir, "tb"), int(state.step))
  train = trainer.splits["train"]
  started, done = time.perf_counter(), 0
  line = search_progress.LiveLine(log_interval=workdir_files.PROGRESS_SECONDS)
  cli.note_progress(f"training, step {int(state.step)} of {config.num_steps} saved")
  while int(state.step) < config.num_steps:
    step = int(state.step)
    rng = np.random.default_rng([config.seed, step])
    chosen = rng.choice(train, size=min(config.batch_size, len(train)), replace=False)
    # Common random numbers: each rollout runs with one of the graph's reference seeds, so its
    # reward compares it with the unguided search of the same seed; the samples of one graph
    # in one step share the seed (their leave-one-out baseline needs that).
    graph_slots = rng.integers(0, config.reference_seeds, len(chosen))
    indices = np.repeat(chosen, config.samples_per_graph).tolist()
    slots = np.repeat(graph_slots, config.samples_per_graph)
    key = jax.random.fold_in(jax.random.key(config.seed), step)
    graph, mask, actions, objectives = trainer.rollouts(state.policy_params, indices, key,
                                                        False, slots)
    rewards = reinforce.log_ratio_rewards(trainer.references.reference(indices, slots),
                                          objectives)
    padded_rewards = np.zeros(len(mask), np.float32)
    padded_rewards[:len(indices)] = rewards
    reference = None
    if config.samples_per_graph > 1:
      reference = np.zeros(len(mask), np.float32)
      reference[:len(indices)] = reinforce.leave_one_out(
          rewards, np.repeat(np.arange(len(chosen)), config.samples_per_graph))
      reference = jnp.asarray(reference)
    state, loss = reinforce.update(state, graph, actions, jnp.asarray(padded_rewards),
                                   jnp.asarray(mask), config.num_devices, trainer.policy_config,
                                   trainer.train_config, reference)
    done += 1
    row = {"step": step + 1, "loss": float(loss), "reward": float(rewards.mean()),
           "improvement_pct": float(100 * (1 - np.exp(-rewards)).mean())}
    if (step + 1) % config.eval_every == 0 or step + 1 == config.num_steps:
      history.append({"step": step + 1, **trainer.evaluate(state.policy_params, valid)})
      row["valid_improvement_pct"] = history[-1]["improvement_pct"]
      _keep_if_best(workdir, state, history, config_id)
    workdir_files.append_csv(os.path.join(workdir, "metrics.csv"), {**row, "valid_improvement_pct":
                                                       row.get("valid_improvement_pct", "")})
    events.add({name: value for name, value in row.items() if name != "step"}, step + 1)
    checkpoint.save(checkpoint.in_workdir(workdir), state,
                    {"step": step + 1, "config": config_id, "config_values": config.to_dict(),
                     "history": history})
    cli.note_progress(f"training, step {step + 1} of {config.num_steps} saved")
    lasting = ((step + 1) % config.log_every == 0 or "valid_improvement_pct" in row
               or step + 1 == config.num_steps)
    if lasting or line.due():
      elapsed = time.perf_counter() - started
      text = (f"step {step + 1}/{config.num_steps}: {done / elapsed:.2f} steps/s, "
              f"{done * trainer.graphs_per_step / elapsed:.1f} rollouts/s, reward "
              f"{row['reward']:.4f}, loss {row['loss']:.4f}"
              + (f", validation improvement {row['valid_improvement_pct']:.2f}%"
                 if "valid_improvement_pct" in row else ""))
      line.say(text) if lasting else line.update(text)
  line.close()
  events.close()
  report = _final_report(trainer, trained_policy(trainer, workdir), history, workdir)
  trainer.pool.shutdown()
  return report


def _keep_if_best(workdir: str, state, history: list[dict], config_id: str) -> None:
  """Saves `state` as the workdir's best policy when the last validation beats every earlier
  one (ties keep the earlier). Written before the checkpoint of its step, so a kill between
  the two reruns that step and saves the same again."""
  scores = [h["improvement_pct"] for h in history]
  if scores[-1] > max(scores[:-1], default=-np.inf):
    checkpoint.save(checkpoint.best_in_workdir(workdir), state,
                    {"step": history[-1]["step"], "config": config_id,
                     "validation": history[-1]})


def _final_report(trainer: Trainer, policy_params, history, workdir: str) -> dict[str, Any]:
  """The best-validated policy on the test graphs."""
  test = trainer.splits["test"]
  start = time.perf_counter()
  graph, _ = trainer._batch(test[:trainer.config.batch_size])
  jax.block_until_ready(trainer.apply_policy(policy_params, graph))
  inference = (time.perf_counter() - start) / min(len(test), trainer.config.batch_size)
  result = trainer.evaluate(policy_params, test, "test")
  # Which graphs each split held (training never saw the test ones).
  names = {split: [trainer.problems[i].graph.name for i in indices]
           for split, indices in trainer.splits.items()}
  report = {"dataset": trainer.config.dataset, "split_graphs": names,
            "test": result, "test_graphs": len(test), "history": history,
            "inference_seconds_per_graph": inference, "steps": history[-1]["step"],
            "best_validation_step": max(history, key=lambda h: h["improvement_pct"])["step"],
            "evals": trainer.config.evals, "reward": trainer.config.reward}
  atomic.write_text(os.path.join(workdir, "report.json"), json.dumps(report, indent=1))
  _plot(history, os.path.join(workdir, "reward_curve.png"))
  return report


def _plot(history, path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(6, 3.5))
  ax.plot([h["step"] for h in history], [h["improvement_pct"] for h in history], marker="o")
  ax.axhline(0, color="grey", lw=0.8)
  ax.set_xlabel("training step")
  ax.set_ylabel("validation: % better than unguided")
  fig.tight_layout()
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=120)
  plt.close(fig)
  atomic.write_bytes(path, buffer.getvalue())


def verdict(report: dict, seeds: int) -> str:
  """Two lines: what the trained policy did on the unseen test graphs, against the same search
  unguided at the same budget and seed, and whether that pays (its 95% interval above 0),
  hurts (below) or is not told apart from nothing."""
  test = report["test"]
  low, high = test["improvement_interval_pct"]
  said = ("the policy pays" if low > 0 else "the policy hurts" if high < 0 else
          "no evidence the policy pays: its interval holds 0")
  return (f"test: on {report['test_graphs']} unseen graphs x {seeds} seeds, the guided search "
          f"is {test['improvement_pct']:+.2f}% against the same search unguided (95% interval "
          f"[{low:+.2f}, {high:+.2f}]), better on {100 * test['win_rate']:.0f}% of runs, at "
          f"least as good on {100 * test['matched_or_beaten']:.0f}%; "
          f"{report['inference_seconds_per_graph'] * 1000:.1f} ms of policy per graph\n"
          f"verdict: {said}")
