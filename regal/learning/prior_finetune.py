"""REINFORCE on the learned prior (issue 82): after imitation, the network is fine-tuned on
what the search it steers achieves.

The policy is Gaussian around the network's outputs: a rollout perturbs each op's key logit
and class logits by noise of scale `noise` (the action) and steers the search with them exactly
as inference steers it with the outputs themselves (`prior_policy.PriorGuide`: keys, affinity
genes, the predicted seed); inference keeps the mean. Each step draws `graphs` training graphs;
each gets `samples` rollouts with one search seed (common random numbers: the samples differ by
their action only) and the unguided search with that seed. Reward: the % improvement over that
unguided search; advantage: the reward less the mean of the graph's other samples
(leave-one-out), so the graph's difficulty and the seed's luck cancel. The gradient of
sum(advantage * log N(action; outputs, noise)), per op averaged within a graph, goes to Adam.

Kill-safe: each step's metrics row and TensorBoard scalars are written, then the state
(parameters, optimizer, step) is saved in one file named by the run's settings; a rerun resumes from the last step saved
and drops what a killed step logged. The rollouts run on the training's Ray actors.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from regal_datasets.padding import bucket_size
from regal.learning import checkpoint
from regal.learning import policy as policy_lib
from regal.learning import prior_net, prior_policy
from regal.learning import workdir as workdir_files
from regal.learning.rollout import Task
from regal.scoring import performance
from regal.search import guides

METRICS_FILE = "finetune_metrics.csv"
SEED_BASE = 60_000_029  # Rollout seeds: none of the labels', calibration's or test's.


@dataclasses.dataclass(frozen=True)
class Settings:
  steps: int
  graphs: int  # Training graphs per step.
  samples: int  # Rollouts per graph (>= 2: the leave-one-out baseline).
  noise: float  # Scale of the Gaussian action around each output (logit units).
  learning_rate: float
  q: float  # The share of fresh keys from the prior (the calibrated one).
  placement: str = "calibrated"
  seeds: str = "none"
  seed: int = 0


def leave_one_out(rewards: np.ndarray) -> np.ndarray:
  """[G, K] advantages: each reward less the mean of its graph's other samples."""
  rewards = np.asarray(rewards, np.float64)
  samples = rewards.shape[1]
  others = (rewards.sum(axis=1, keepdims=True) - rewards) / (samples - 1)
  return rewards - others


def improvement(unguided: np.ndarray, guided: np.ndarray) -> np.ndarray:
  """% improvement of guided objectives over the unguided one of the same seed."""
  unguided = np.asarray(unguided, np.float64)
  return 100.0 * (unguided - np.asarray(guided, np.float64)) / unguided


def surrogate_loss(params, net: prior_net.PriorNet, graph, key_action, class_action,
                   weight, noise: float):
  """Minus the advantage-weighted log-likelihood of the actions under the Gaussian policy
  around the network's outputs (up to constants); `weight` [N] holds each node's advantage
  over its graph's node count (0 on padding), summed over the step's samples."""
  outputs = net.apply(params, graph)
  key_term = -0.5 * ((key_action - outputs.key[None]) / noise) ** 2  # [K, N]
  class_term = -0.5 * jnp.sum(((class_action - outputs.class_logits[None]) / noise) ** 2, -1)
  return -jnp.sum(weight * (key_term + class_term)) / key_action.shape[0]


class Finetuner:
  """The fine-tune of one training run: its graphs' features, the padded batch shape, the
  jitted gradient step, and the pool that runs its rollouts."""

  def __init__(self, net: prior_net.PriorNet, problems: Sequence[performance.Problem],
               train: Sequence[int], settings: Settings, pool, workdir: str, run_id: str,
               heuristic_seeds: Callable[[int], dict[str, np.ndarray]] | None = None):
    self.net, self.problems, self.train = net, list(problems), list(train)
    self.heuristic_seeds = heuristic_seeds  # Graph index -> its seeds (None: computed).
    self.settings, self.pool, self.workdir = settings, pool, workdir
    self.state_path = os.path.join(workdir, f"finetune-{run_id}.msgpack")
    self._features: dict[int, object] = {}
    largest = sorted(self.train, key=lambda i: -problems[i].graph.num_ops)[:settings.graphs]
    widest = sorted(self.train, key=lambda i: -problems[i].graph.num_edges)[:settings.graphs]
    self.node_bucket = bucket_size(sum(problems[i].graph.num_ops for i in largest) + 1)
    self.edge_bucket = bucket_size(max(sum(problems[i].graph.num_edges for i in widest), 1))
    self.optimizer = optax.adam(settings.learning_rate)
    noise = settings.noise

    def step(params, opt_state, graph, key_action, class_action, weight):
      loss, grads = jax.value_and_grad(surrogate_loss)(params, net, graph, key_action,
                                                       class_action, weight, noise)
      updates, opt_state = self.optimizer.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, loss
    self._step = jax.jit(step)
    self._apply = jax.jit(net.apply)

  def features(self, index: int):
    if index not in self._features:
      self._features[index] = prior_policy.features(
          self.problems[index],
          seeds=self.heuristic_seeds(index) if self.heuristic_seeds else None)
    return self._features[index]

  def batch(self, indices: Sequence[int]):
    graph = policy_lib.batch_graphs([self.features(i) for i in indices], self.node_bucket,
                                    self.edge_bucket)
    offsets = np.concatenate([[0], np.cumsum([self.problems[i].graph.num_ops
                                              for i in indices])])
    return graph, offsets

  def tasks(self, indices: Sequence[int], outputs: prior_net.PriorOutputs, offsets,
            key_action: np.ndarray, class_action: np.ndarray, step: int) -> list[Task]:
    """Per graph its samples' guided searches, then its unguided one, all with one seed."""
    settings = self.settings
    tasks = []
    for g, index in enumerate(indices):
      problem = self.problems[index]
      nodes = slice(offsets[g], offsets[g + 1])
      seed = SEED_BASE + 7919 * step + g
      for k in range(settings.samples):
        acted = prior_net.PriorOutputs(key_action[k, nodes], np.asarray(outputs.key_spread)[nodes],
                                       class_action[k, nodes])
        guided = prior_policy.PriorGuide(lambda p, a=acted: a, settings.q, settings.placement,
                                         settings.seeds).guide(problem, seed, guides.Guidance())
        tasks.append(Task(index, None, None, seed, seeds=guided.seeds or None,
                          prior=(guided.prior_q, guided.prior_mean, guided.prior_spread)))
      tasks.append(Task(index, None, None, seed))
    return tasks

  def run(self, params, events_dir: str, step_offset: int):
    """(fine-tuned parameters, history rows): from the last saved step to `settings.steps`.
    Each step's row goes to `METRICS_FILE` and its scalars to TensorBoard at `step_offset` +
    step before the state that covers it is saved."""
    settings = self.settings
    path = self.state_path
    opt_state = self.optimizer.init(params)
    start, history = 0, []
    if os.path.exists(path):
      state, meta = checkpoint.restore(path, {"params": params, "opt_state": opt_state})
      params, opt_state = state["params"], state["opt_state"]
      start, history = int(meta["step"]), list(meta["history"])
    if start >= settings.steps:
      return params, history
    metrics = os.path.join(self.workdir, METRICS_FILE)
    workdir_files.truncate_metrics(metrics, start)
    events = workdir_files.ScalarEvents(events_dir, step_offset + start)
    progress = workdir_files.Progress("fine-tuning the prior (REINFORCE)", settings.steps,
                                      start, "steps")
    try:
      for step in range(start, settings.steps):
        params, opt_state, row = self._one_step(params, opt_state, step)
        history.append(row)
        workdir_files.append_csv(metrics, row)
        events.add({f"finetune/{name}": value for name, value in row.items() if name != "step"},
                   step_offset + step + 1)
        checkpoint.save(path, {"params": params, "opt_state": opt_state},
                        {"step": step + 1, "history": history})
        progress.advance(1)
    finally:
      events.close()
    progress.finish()
    return params, history

  def _one_step(self, params, opt_state, step: int):
    settings = self.settings
    rng = np.random.default_rng([settings.seed, step])
    indices = [int(i) for i in rng.choice(self.train, size=min(settings.graphs, len(self.train)),
                                          replace=False)]
    graph, offsets = self.batch(indices)
    outputs = self._apply(params, graph)
    key_action = (np.asarray(outputs.key)[None] + settings.noise * rng.standard_normal(
        (settings.samples, self.node_bucket))).astype(np.float32)
    class_action = (np.asarray(outputs.class_logits)[None] + settings.noise
                    * rng.standard_normal((settings.samples,) + outputs.class_logits.shape)
                    ).astype(np.float32)
    objectives = np.asarray(self.pool.map(self.tasks(indices, outputs, offsets, key_action,
                                                     class_action, step)),
                            np.float64).reshape(len(indices), settings.samples + 1)
    rewards = improvement(objectives[:, -1:], objectives[:, :-1])  # [G, K]
    advantages = leave_one_out(rewards)
    weight = np.zeros((settings.samples, self.node_bucket), np.float32)
    for g, index in enumerate(indices):
      weight[:, offsets[g]:offsets[g + 1]] = (advantages[g][:, None]
                                              / self.problems[index].graph.num_ops)
    params, opt_state, loss = self._step(params, opt_state, graph, key_action, class_action,
                                         weight)
    row = {"step": step + 1, "reward_pct": float(rewards.mean()),
           "best_sample_reward_pct": float(rewards.max(axis=1).mean()),
           "advantage_spread_pct": float(np.abs(advantages).mean()),
           "surrogate_loss": float(loss)}
    return params, opt_state, row
