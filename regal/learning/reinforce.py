"""Contextual-bandit REINFORCE for REGAL's policy (REGAL section 4.1).

One step: for a mini-batch of graphs, sample the policy's actions (mutant distributions), run
the search with them (`rollout`), reward r = log(unguided objective / guided objective), the
unguided search on the same graph with the same seed and budget (0: no better, no worse),
and minimize  -(r - b) log p(actions) + 1e-4 (b - r)^2 (+ optional entropy bonus),
with b = Baseline(G), by Adam with gradient clipping.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import optax

from regal.learning import policy as policy_lib

BASELINE_WEIGHT = 1e-4


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  learning_rate: float = 1e-4
  clip_norm: float = 10.0
  entropy_weight: float = 0.0
  # Scale advantages by their batch standard deviation (not in the paper; steadier steps).
  normalize_advantage: bool = False


@flax.struct.dataclass
class TrainState:
  policy_params: Any
  baseline_params: Any
  opt_state: Any
  step: jnp.ndarray


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
  return optax.chain(optax.clip_by_global_norm(config.clip_norm),
                     optax.adam(config.learning_rate))


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def init_state(key: jax.Array, example: jraph.GraphsTuple, num_devices: int,
               policy_config: policy_lib.PolicyConfig, config: TrainConfig) -> TrainState:
  """A fresh state (compiled: run op by op, the networks' initializers took seconds; the
  values are the same bit for bit)."""
  policy_key, baseline_key = jax.random.split(key)
  policy_params = policy_lib.Policy(policy_config, num_devices).init(policy_key, example)
  baseline_params = policy_lib.Baseline(policy_config).init(baseline_key, example)
  opt_state = make_optimizer(config).init((policy_params, baseline_params))
  return TrainState(policy_params, baseline_params, opt_state, jnp.zeros((), jnp.int32))


def state_template(example: jraph.GraphsTuple, num_devices: int,
                   policy_config: policy_lib.PolicyConfig, config: TrainConfig) -> TrainState:
  """The shapes and dtypes of `init_state`'s state, not computed (`jax.eval_shape`): what a
  checkpoint restores into. Initializing for real runs the networks op by op (seconds)."""
  return jax.eval_shape(lambda key: init_state(key, example, num_devices, policy_config, config),
                        jax.random.key(0))


def loss_fn(params, graph: jraph.GraphsTuple, actions: policy_lib.Actions,
            rewards: jnp.ndarray, graph_mask: jnp.ndarray, num_devices: int,
            policy_config: policy_lib.PolicyConfig, config: TrainConfig,
            reference: jnp.ndarray | None = None):
  """Mean over real graphs of -(r - b) log p + 1e-4 (b - r)^2 - entropy bonus.

  `reference` [G], if given, replaces b(G) in the advantage (e.g. `leave_one_out` over several
  samples of one graph); b(G) is fitted either way."""
  policy_params, baseline_params = params
  logits = policy_lib.Policy(policy_config, num_devices).apply(policy_params, graph)
  log_prob = policy_lib.graph_log_prob(graph, logits, actions)
  value = policy_lib.Baseline(policy_config).apply(baseline_params, graph)
  advantage = jax.lax.stop_gradient(rewards - (value if reference is None else reference))
  if config.normalize_advantage:
    real = jnp.where(graph_mask, advantage, 0.0)
    count = jnp.maximum(graph_mask.sum(), 1)
    std = jnp.sqrt(jnp.sum(jnp.where(graph_mask, (advantage - real.sum() / count) ** 2, 0.0))
                   / count)
    advantage = advantage / (std + 1e-3)
  per_graph = -advantage * log_prob + BASELINE_WEIGHT * (value - rewards) ** 2
  if config.entropy_weight:
    num_graphs = graph.n_node.shape[0]
    graph_of = jnp.repeat(jnp.arange(num_graphs), graph.n_node,
                          total_repeat_length=graph.nodes.shape[0])
    entropy = jax.ops.segment_sum(policy_lib.node_entropy(logits), graph_of, num_graphs)
    per_graph = per_graph - config.entropy_weight * entropy
  count = jnp.maximum(graph_mask.sum(), 1)
  return jnp.sum(jnp.where(graph_mask, per_graph, 0.0)) / count


def imitation_loss(policy_params, graph: jraph.GraphsTuple, targets: policy_lib.Actions,
                   node_mask: jnp.ndarray, num_devices: int,
                   policy_config: policy_lib.PolicyConfig) -> jnp.ndarray:
  """Mean over real nodes of -log p(target actions) (`policy.imitation_targets`)."""
  logits = policy_lib.Policy(policy_config, num_devices).apply(policy_params, graph)
  log_prob = policy_lib.node_log_prob(logits, targets)
  return -jnp.sum(jnp.where(node_mask, log_prob, 0.0)) / jnp.maximum(node_mask.sum(), 1)


def imitation_optimizer(learning_rate: float) -> optax.GradientTransformation:
  return optax.adam(learning_rate)


@functools.partial(jax.jit, static_argnums=(5, 6, 7))
def imitation_step(policy_params, opt_state, graph: jraph.GraphsTuple,
                   targets: policy_lib.Actions, node_mask: jnp.ndarray, num_devices: int,
                   policy_config: policy_lib.PolicyConfig, learning_rate: float):
  """One Adam step of imitation (compiled; arguments 5-7 static): (params, opt_state, loss).
  REINFORCE then starts from the imitated policy with its own optimizer."""
  loss, grads = jax.value_and_grad(imitation_loss)(policy_params, graph, targets, node_mask,
                                                   num_devices, policy_config)
  updates, opt_state = imitation_optimizer(learning_rate).update(grads, opt_state,
                                                                 policy_params)
  return optax.apply_updates(policy_params, updates), opt_state, loss


@functools.partial(jax.jit, static_argnums=(5, 6, 7))
def update(state: TrainState, graph: jraph.GraphsTuple, actions: policy_lib.Actions,
           rewards: jnp.ndarray, graph_mask: jnp.ndarray, num_devices: int,
           policy_config: policy_lib.PolicyConfig, config: TrainConfig,
           reference: jnp.ndarray | None = None) -> tuple[TrainState, jnp.ndarray]:
  """One Adam step on the REINFORCE loss (compiled; arguments 5-7 static)."""
  params = (state.policy_params, state.baseline_params)
  loss, grads = jax.value_and_grad(loss_fn)(params, graph, actions, rewards, graph_mask,
                                            num_devices, policy_config, config, reference)
  updates, opt_state = make_optimizer(config).update(grads, state.opt_state, params)
  policy_params, baseline_params = optax.apply_updates(params, updates)
  return TrainState(policy_params, baseline_params, opt_state, state.step + 1), loss


def leave_one_out(rewards: np.ndarray, groups: np.ndarray) -> np.ndarray:
  """Per sample, the mean reward of the other samples of its group (the same graph and
  rollout seed): a baseline free of the graph's difficulty and of the draw's luck. A sample
  alone in its group gets its own reward (advantage 0)."""
  rewards, groups = np.asarray(rewards, np.float64), np.asarray(groups)
  _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
  totals = np.bincount(inverse, weights=rewards)
  count = counts[inverse]
  return np.where(count > 1, (totals[inverse] - rewards) / np.maximum(count - 1, 1), rewards)


def log_ratio_rewards(unguided: np.ndarray, guided: np.ndarray) -> np.ndarray:
  """log(unguided / guided) per rollout: positive when the guided search found less (both
  objectives minimized, positive)."""
  return np.log(np.asarray(unguided, np.float64) / np.asarray(guided, np.float64))

