"""Doppler's training stages (section 4.4) over batched episodes.

* Stage I, imitation: teacher forcing along the critical-path heuristic's own trajectory
  (`list_scheduling.critical_path_assignment`), cross-entropy on its op and device choices.
* Stage II, REINFORCE against a simulator: episodes sampled epsilon-greedily (epsilon decaying
  linearly to 0), reward r = -makespan / the critical path's makespan under the same reward
  source, advantage r minus the running mean of past rewards, entropy bonus, Adam with a
  learning rate decaying linearly to 0.
* Stage III is stage II with another `RewardSource` (measured run times, once an executor
  provides them): a reward source is anything mapping assignments to makespans.

Every step runs a batch of episodes with one `jit(vmap(run_episode))`; the gradient replays the
sampled actions (forced mode) so the log-probabilities are differentiated in one scan. The best
assignment any episode found is kept (`Trained.best_*`), scored by the reward source.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import logging

from regal.baselines import list_scheduling
from regal.doppler_policy import episode as episode_lib
from regal.doppler_policy import graph_data, networks
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance


@dataclasses.dataclass(frozen=True)
class DopplerConfig:
  hidden: int = 64
  rounds: int = 2
  imitation_steps: int = 300  # At most; stops early at `imitation_target` agreement.
  imitation_target: float = 0.98
  imitation_learning_rate: float = 3e-3
  reinforce_steps: int = 50
  episodes_per_step: int = 32
  learning_rate: float = 1e-4  # Decays linearly to 0 over the REINFORCE steps.
  entropy_weight: float = 1e-2
  epsilon: float = 0.2  # Decays linearly to 0.
  baseline_decay: float = 0.9  # Running mean of past rewards.
  clip_norm: float = 10.0

  @property
  def network(self) -> networks.NetworkConfig:
    return networks.NetworkConfig(hidden=self.hidden, rounds=self.rounds)


class RewardSource(Protocol):
  """Makespans [B] of assignments: placements [B, o] and op orders [B, o]."""

  def __call__(self, placements: np.ndarray, orders: np.ndarray) -> np.ndarray: ...


class ModelReward:
  """The problem's performance model, batched (the doppler model exactly, by
  `regal.scoring.doppler.native`)."""

  def __init__(self, problem: performance.Problem):
    self.problem = problem
    self.fitness = jax.jit(performance.make_fitness_fn(self.problem))
    self.evaluations = 0

  def __call__(self, placements: np.ndarray, orders: np.ndarray) -> np.ndarray:
    layout = self.problem.layout
    chromosomes = np.stack([chromosome_lib.encode(p, o, layout)
                            for p, o in zip(placements, orders)])
    self.evaluations += len(chromosomes)
    return np.asarray(self.fitness(jnp.asarray(chromosomes, jnp.float32)), np.float64)


@dataclasses.dataclass
class Agent:
  """A graph prepared for episodes (padded to a size bucket: the batched functions take it as
  an argument, so graphs of one bucket share their compilations)."""
  problem: performance.Problem
  graph: graph_data.EpisodeGraph
  config: DopplerConfig

  @classmethod
  def create(cls, problem: performance.Problem, config: DopplerConfig) -> "Agent":
    g = graph_data.episode_graph(problem.graph, problem.devices)
    return cls(problem, jax.tree_util.tree_map(jnp.asarray, g), config)

  @property
  def num_ops(self) -> int:
    return self.problem.graph.num_ops

  def teacher(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(forced nodes [N], forced devices [N], the teacher's placement [o])."""
    placement, order = list_scheduling.critical_path_assignment(self.problem.graph,
                                                                self.problem.devices)
    return (*self.pad_actions(order, placement[order]), placement)

  def teacher_episode(self, params) -> episode_lib.Episode:
    """The teacher's actions recorded as a batch of one forced episode."""
    nodes, devices, _ = self.teacher()
    return episode_runner(self, episode_lib.FORCED)(
        params, jax.random.split(jax.random.key(0), 1), 0.0, jnp.asarray(nodes)[None],
        jnp.asarray(devices)[None])

  def pad_actions(self, nodes, devices) -> tuple[np.ndarray, np.ndarray]:
    n = self.graph.node_mask.shape[0]
    padded_nodes, padded_devices = np.zeros(n, np.int32), np.zeros(n, np.int32)
    padded_nodes[:len(nodes)], padded_devices[:len(devices)] = nodes, devices
    return padded_nodes, padded_devices


@functools.partial(jax.jit, static_argnames=("network", "mode"))
def run_episodes(params, keys, epsilon, nodes, devices, g: graph_data.EpisodeGraph,
                 network: networks.NetworkConfig, mode: str):
  """A batch of episodes (one per key; forced mode replays `nodes` / `devices`) on the padded
  graph `g`: an argument, not a constant, so every graph of one size bucket shares the
  compilation."""
  forced = mode == episode_lib.FORCED

  def one(key, episode_nodes, episode_devices):
    return episode_lib.run_episode(params, g, key, network, mode, epsilon,
                                   episode_nodes if forced else None,
                                   episode_devices if forced else None)
  return jax.vmap(one)(keys, nodes, devices)


def episode_runner(agent: Agent, mode: str):
  """`run_episodes` on the agent's graph: (params, keys, epsilon, nodes, devices) -> episodes."""
  return functools.partial(run_episodes, g=agent.graph, network=agent.config.network, mode=mode)


init_params_jit = jax.jit(episode_lib.init_params, static_argnames="config")


def init_params(key: jax.Array, agent: Agent) -> dict:
  return init_params_jit(key, agent.graph, agent.config.network)


def replay_episodes(params, g: graph_data.EpisodeGraph, network: networks.NetworkConfig,
                    episodes) -> episode_lib.Replayed:
  """`episode_lib.replay` over a batch of recorded episodes (leading axis)."""
  return jax.vmap(episode_lib.replay, (None, None, None, 0, 0, 0, 0))(
      params, g, network, episodes.nodes, episodes.devices, episodes.valid,
      episodes.device_features)


def imitation_loss(params, g: graph_data.EpisodeGraph, network: networks.NetworkConfig,
                   teacher):
  """Mean negative log-likelihood of the teacher's actions (an episode of batch 1 forced
  along them, recorded once: its device features do not depend on the policy), and the
  greedy policy's agreement with them."""
  replayed = replay_episodes(params, g, network, teacher)
  valid = teacher.valid
  agree_node = jnp.sum((replayed.greedy_nodes == teacher.nodes) & valid)
  agree_device = jnp.sum((replayed.greedy_devices == teacher.devices) & valid)
  count = jnp.maximum(valid.sum(), 1)
  return -jnp.sum(replayed.log_prob) / count, (agree_node / count, agree_device / count)


def _imitation_optimizer(clip_norm: float, learning_rate: float) -> optax.GradientTransformation:
  return optax.chain(optax.clip_by_global_norm(clip_norm), optax.adam(learning_rate))


@functools.partial(jax.jit, static_argnames=("network", "clip_norm", "learning_rate"))
def _imitation_step(params, opt_state, teacher, g: graph_data.EpisodeGraph,
                    network: networks.NetworkConfig, clip_norm: float, learning_rate: float):
  (loss, agree), grads = jax.value_and_grad(imitation_loss, has_aux=True)(
      params, g, network, teacher)
  updates, opt_state = _imitation_optimizer(clip_norm, learning_rate).update(
      grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, loss, agree


def imitate(params, agents: list[Agent], config: DopplerConfig, log_every: int = 50
            ) -> tuple[dict, dict]:
  """Stage I on every agent's graph; stops once both agreements reach the target everywhere.
  Returns (params, {"steps", "node_agreement", "device_agreement"})."""
  opt_state = _imitation_optimizer(config.clip_norm, config.imitation_learning_rate).init(params)
  teachers = [agent.teacher_episode(params) for agent in agents]
  agreement = [(0.0, 0.0)] * len(agents)
  step_count = 0
  for step_count in range(1, config.imitation_steps + 1):
    for k, agent in enumerate(agents):
      params, opt_state, loss, agree = _imitation_step(
          params, opt_state, teachers[k], g=agent.graph, network=config.network,
          clip_norm=config.clip_norm, learning_rate=config.imitation_learning_rate)
      agreement[k] = (float(agree[0]), float(agree[1]))
    if step_count % log_every == 0:
      logging.info("imitation step %d: loss %.4f, agreement %s", step_count, float(loss),
                   [(round(a, 3), round(b, 3)) for a, b in agreement])
    if min(min(a) for a in agreement) >= config.imitation_target:
      break
  return params, {"steps": step_count,
                  "node_agreement": float(np.mean([a for a, _ in agreement])),
                  "device_agreement": float(np.mean([b for _, b in agreement]))}


class Best:
  """The `keep` best distinct assignments seen, by the reward source's makespan (callers
  re-score the few kept ones with the reference model)."""

  def __init__(self, keep: int = 8):
    self.keep = keep
    self.entries: dict[bytes, tuple[float, np.ndarray, np.ndarray]] = {}

  def offer(self, makespans, placements, orders) -> None:
    for makespan, placement, order in zip(makespans, placements, orders):
      key = np.asarray(placement).tobytes() + np.asarray(order).tobytes()
      if key not in self.entries:
        self.entries[key] = (float(makespan), np.array(placement), np.array(order))
    if len(self.entries) > self.keep:
      ranked = sorted(self.entries.items(), key=lambda item: item[1][0])[:self.keep]
      self.entries = dict(ranked)

  def ranked(self) -> list[tuple[float, np.ndarray, np.ndarray]]:
    return sorted(self.entries.values(), key=lambda entry: entry[0])

  @property
  def makespan(self) -> float:
    return self.ranked()[0][0] if self.entries else np.inf

  @property
  def placement(self) -> np.ndarray:
    return self.ranked()[0][1]

  @property
  def order(self) -> np.ndarray:
    return self.ranked()[0][2]


def assignments(agent: Agent, episodes) -> tuple[np.ndarray, np.ndarray]:
  """(placements [B, o], orders [B, o]) of a batch of episodes."""
  o = agent.num_ops
  return (np.asarray(episodes.placement)[:, :o], np.asarray(episodes.nodes)[:, :o])


def _reinforce_optimizer(clip_norm: float) -> optax.GradientTransformation:
  return optax.chain(optax.clip_by_global_norm(clip_norm), optax.scale_by_adam())


@functools.partial(jax.jit, static_argnames=("network", "entropy_weight", "clip_norm"))
def _reinforce_update(params, opt_state, episodes, advantages, learning_rate,
                      g: graph_data.EpisodeGraph, network: networks.NetworkConfig,
                      entropy_weight: float, clip_norm: float):
  """One stage-II step: the sampled actions replayed (every step at once) and differentiated.
  The learning rate is an argument, so its schedule needs no recompilation."""
  num_ops = jnp.sum(g.node_mask)

  def loss_fn(params):
    replayed = replay_episodes(params, g, network, episodes)
    log_prob = jnp.sum(replayed.log_prob, 1)
    entropy = jnp.sum(replayed.entropy, 1) / num_ops
    return jnp.mean(-advantages * log_prob - entropy_weight * entropy)

  loss, grads = jax.value_and_grad(loss_fn)(params)
  updates, opt_state = _reinforce_optimizer(clip_norm).update(grads, opt_state, params)
  updates = jax.tree_util.tree_map(lambda u: -learning_rate * u, updates)
  return optax.apply_updates(params, updates), opt_state, loss


def reinforce(params, agent: Agent, config: DopplerConfig, reward: RewardSource,
              key: jax.Array, log_every: int = 10,
              on_step: Callable[[int, dict], None] | None = None) -> tuple[dict, Best, dict]:
  """Stage II (or III, with a measured reward source) on one graph. Returns (params, the best
  assignment found, a summary)."""
  sample = episode_runner(agent, episode_lib.SAMPLE)
  opt_state = _reinforce_optimizer(config.clip_norm).init(params)
  batch = config.episodes_per_step

  teacher_placement, teacher_order = list_scheduling.critical_path_assignment(
      agent.problem.graph, agent.problem.devices)
  reference = float(reward(teacher_placement[None], teacher_order[None])[0])
  best = Best()
  best.offer(np.array([reference]), teacher_placement[None], teacher_order[None])
  running_mean = None
  started = time.perf_counter()
  history = []
  for step in range(config.reinforce_steps):
    key, sample_key = jax.random.split(key)
    keys = jax.random.split(sample_key, batch)
    epsilon = config.epsilon * (1.0 - step / max(config.reinforce_steps, 1))
    episodes = sample(params, keys, epsilon, jnp.zeros((batch, 1)), jnp.zeros((batch, 1)))
    placements, orders = assignments(agent, episodes)
    makespans = reward(placements, orders)
    best.offer(makespans, placements, orders)
    rewards = -makespans / reference
    mean = float(rewards.mean())
    running_mean = mean if running_mean is None else running_mean
    advantages = rewards - running_mean
    running_mean = config.baseline_decay * running_mean + (1 - config.baseline_decay) * mean
    learning_rate = config.learning_rate * (1.0 - step / max(config.reinforce_steps, 1))
    params, opt_state, loss = _reinforce_update(
        params, opt_state, episodes, jnp.asarray(advantages, jnp.float32), learning_rate,
        g=agent.graph, network=agent.config.network, entropy_weight=config.entropy_weight,
        clip_norm=config.clip_norm)
    record = {"step": step + 1, "mean_makespan": float(makespans.mean()),
              "best_makespan": best.makespan, "loss": float(loss)}
    history.append(record)
    if on_step is not None:
      on_step(step, record)
    if (step + 1) % log_every == 0:
      elapsed = time.perf_counter() - started
      logging.info("reinforce step %d/%d: %.0f episodes/s, mean makespan %.6g, best %.6g",
                   step + 1, config.reinforce_steps, (step + 1) * batch / elapsed,
                   record["mean_makespan"], best.makespan)
  elapsed = time.perf_counter() - started
  return params, best, {"reference_makespan": reference, "history": history,
                        "episodes": config.reinforce_steps * batch,
                        "episodes_per_second": config.reinforce_steps * batch / max(elapsed,
                                                                                   1e-9)}


def greedy_and_sampled(params, agent: Agent, key: jax.Array, num_samples: int
                       ) -> tuple[np.ndarray, np.ndarray]:
  """(placements [1 + K, o], orders [1 + K, o]): the greedy assignment, then K sampled ones."""
  greedy = episode_runner(agent, episode_lib.GREEDY)(
      params, jax.random.split(key, 1), 0.0, jnp.zeros((1, 1)), jnp.zeros((1, 1)))
  placements, orders = assignments(agent, greedy)
  if num_samples:
    sampled = episode_runner(agent, episode_lib.SAMPLE)(
        params, jax.random.split(jax.random.fold_in(key, 1), num_samples), 0.0,
        jnp.zeros((num_samples, 1)), jnp.zeros((num_samples, 1)))
    more_placements, more_orders = assignments(agent, sampled)
    placements = np.concatenate([placements, more_placements])
    orders = np.concatenate([orders, more_orders])
  return placements, orders
