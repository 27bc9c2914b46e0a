"""REGAL's policy: a jraph GNN that predicts Beta distributions for BRKGA's mutant genes.

Network (REGAL equations 1-2, appendix A.14-A.16): node and edge encoders (MLPs), `rounds`
rounds of message passing with separate forward (producer -> consumer) and backward messages,
each an MLP of (own state, neighbour state, edge), aggregated by sum or mean; a residual MLP or a
GRU updates the node state. A shared head gives every node, for each of its d + 1 genes (d
device affinities, 1 priority), categorical logits over k quantized means and k quantized
variances (k = `placement_bins` for affinities, `priority_bins` for the priority). Transfer
genes stay uniform. `Baseline` is the separate value network b(G): an MLP of the mean-pooled
encoded nodes, starting near -1 (the reward of matching uniform BRKGA).

Dequantization (our reading of appendix A.6; the paper's text is not at hand): bin i of k
means mu = (i + 1/2) / k; variance bin j means a fraction (j + 1/2) / k of the largest
variance a Beta with that mean can have, mu (1 - mu). Then with nu = mu (1 - mu) / var - 1 =
k / (j + 1/2) - 1: alpha = mu nu, beta = (1 - mu) nu (both > 0 for every bin).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from regal.scoring import chromosome as chromosome_lib


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
  hidden: int = 64
  rounds: int = 3
  update: str = "residual"  # or "gru"
  aggregation: str = "sum"  # or "mean"
  placement_bins: int = 2
  priority_bins: int = 16


class Logits(NamedTuple):
  """Per node: [N, d, kp] placement mean / variance logits, [N, ks] priority ones."""
  placement_mean: jnp.ndarray
  placement_var: jnp.ndarray
  priority_mean: jnp.ndarray
  priority_var: jnp.ndarray


class Actions(NamedTuple):
  """Chosen bins, shaped like the matching logits without their last axis."""
  placement_mean: jnp.ndarray  # [N, d] int
  placement_var: jnp.ndarray
  priority_mean: jnp.ndarray  # [N] int
  priority_var: jnp.ndarray


def dequantize(mean_bin, var_bin, bins: int) -> tuple[jnp.ndarray, jnp.ndarray]:
  """Beta (alpha, beta) of a (mean bin, variance bin) pair (see the module docstring)."""
  mean = (mean_bin + 0.5) / bins
  concentration = bins / (var_bin + 0.5) - 1.0
  return mean * concentration, (1.0 - mean) * concentration


class _MLP(nn.Module):
  """Dense layers with `activation` between them (none after the last). The class keeps its
  private name: Flax names parameters after it, and checkpoints hold those names."""
  features: tuple[int, ...]
  activation: Callable[[jnp.ndarray], jnp.ndarray] = nn.relu

  @nn.compact
  def __call__(self, x):
    for i, width in enumerate(self.features):
      x = nn.Dense(width)(x)
      if i < len(self.features) - 1:
        x = self.activation(x)
    return x


MLP = _MLP


def _aggregate(messages, segments, num_segments, how: str):
  total = jax.ops.segment_sum(messages, segments, num_segments)
  if how == "sum":
    return total
  count = jax.ops.segment_sum(jnp.ones(messages.shape[:1]), segments, num_segments)
  return total / jnp.maximum(count, 1.0)[:, None]


class Encoder(nn.Module):
  """Node embeddings [N, hidden] after message passing."""
  config: PolicyConfig

  @nn.compact
  def __call__(self, graph: jraph.GraphsTuple) -> jnp.ndarray:
    c = self.config
    nodes = _MLP((c.hidden, c.hidden))(graph.nodes)
    edges = _MLP((c.hidden, c.hidden))(graph.edges)
    num_nodes = nodes.shape[0]
    gru = nn.GRUCell(c.hidden) if c.update == "gru" else None
    for _ in range(c.rounds):
      src, dst = nodes[graph.senders], nodes[graph.receivers]
      forward = _MLP((c.hidden, c.hidden))(jnp.concatenate([dst, src, edges], axis=-1))
      backward = _MLP((c.hidden, c.hidden))(jnp.concatenate([src, dst, edges], axis=-1))
      incoming = _aggregate(forward, graph.receivers, num_nodes, c.aggregation)
      outgoing = _aggregate(backward, graph.senders, num_nodes, c.aggregation)
      message = jnp.concatenate([incoming, outgoing], axis=-1)
      if gru is not None:
        nodes, _ = gru(nodes, message)
      else:
        nodes = nodes + _MLP((c.hidden, c.hidden))(jnp.concatenate([nodes, message], -1))
    return nodes


class Policy(nn.Module):
  config: PolicyConfig
  num_devices: int

  @nn.compact
  def __call__(self, graph: jraph.GraphsTuple) -> Logits:
    c, d = self.config, self.num_devices
    nodes = Encoder(c)(graph)
    kp, ks = c.placement_bins, c.priority_bins
    out = _MLP((c.hidden, 2 * d * kp + 2 * ks))(nodes)
    placement = out[:, :2 * d * kp].reshape(-1, d, 2, kp)
    priority = out[:, 2 * d * kp:].reshape(-1, 2, ks)
    return Logits(placement[:, :, 0], placement[:, :, 1], priority[:, 0], priority[:, 1])


class Baseline(nn.Module):
  """b(G): an MLP of the mean-pooled encoded nodes, one value per graph."""
  config: PolicyConfig

  @nn.compact
  def __call__(self, graph: jraph.GraphsTuple) -> jnp.ndarray:
    nodes = _MLP((self.config.hidden, self.config.hidden))(graph.nodes)
    num_graphs = graph.n_node.shape[0]
    graph_of = jnp.repeat(jnp.arange(num_graphs), graph.n_node,
                          total_repeat_length=nodes.shape[0])
    pooled = _aggregate(nodes, graph_of, num_graphs, "mean")
    hidden = nn.relu(nn.Dense(self.config.hidden)(pooled))
    # Rewards are -objective / uniform BRKGA's objective: -1 is the natural starting guess.
    return nn.Dense(1, bias_init=nn.initializers.constant(-1.0))(hidden)[:, 0]


def sample(key: jax.Array, logits: Logits) -> Actions:
  keys = jax.random.split(key, 4)
  return Actions(*(jax.random.categorical(k, l) for k, l in zip(keys, logits)))


def greedy(logits: Logits) -> Actions:
  return Actions(*(jnp.argmax(l, axis=-1) for l in logits))


def node_log_prob(logits: Logits, actions: Actions) -> jnp.ndarray:
  """[N] log-probability of each node's chosen bins (all its genes)."""
  def picked(l, a):
    return jnp.take_along_axis(jax.nn.log_softmax(l), a[..., None], axis=-1)[..., 0]
  placement = picked(logits.placement_mean, actions.placement_mean) + picked(
      logits.placement_var, actions.placement_var)
  priority = picked(logits.priority_mean, actions.priority_mean) + picked(
      logits.priority_var, actions.priority_var)
  return placement.sum(axis=-1) + priority


def graph_log_prob(graph: jraph.GraphsTuple, logits: Logits, actions: Actions) -> jnp.ndarray:
  """[G] summed log-probability per graph (padding nodes belong to the padding graph)."""
  num_graphs = graph.n_node.shape[0]
  graph_of = jnp.repeat(jnp.arange(num_graphs), graph.n_node,
                        total_repeat_length=graph.nodes.shape[0])
  return jax.ops.segment_sum(node_log_prob(logits, actions), graph_of, num_graphs)


def node_entropy(logits: Logits) -> jnp.ndarray:
  def entropy(l):
    p = jax.nn.softmax(l)
    return -(p * jax.nn.log_softmax(l)).sum(-1)
  return (entropy(logits.placement_mean).sum(-1) + entropy(logits.placement_var).sum(-1)
          + entropy(logits.priority_mean) + entropy(logits.priority_var))


def mutant_distributions(actions: Actions, layout: chromosome_lib.Layout, config: PolicyConfig,
                         first_node: int = 0) -> tuple[jnp.ndarray, jnp.ndarray]:
  """Per-gene Beta (alpha, beta) [layout.size] for one graph whose nodes start at
  `first_node` in the batch: affinities and priorities from the actions, transfers uniform."""
  o = layout.num_ops
  sl = slice(first_node, first_node + o)
  pa, pb = dequantize(actions.placement_mean[sl], actions.placement_var[sl],
                      config.placement_bins)
  sa, sb = dequantize(actions.priority_mean[sl], actions.priority_var[sl],
                      config.priority_bins)
  ones = jnp.ones(layout.num_tensors * layout.num_devices)
  return (jnp.concatenate([pa.reshape(-1), sa, ones]),
          jnp.concatenate([pb.reshape(-1), sb, ones]))


def batch_graphs(graphs: list[jraph.GraphsTuple], node_bucket: int, edge_bucket: int
                 ) -> jraph.GraphsTuple:
  """Graphs in one padded GraphsTuple (+1 padding graph) so each bucket compiles once."""
  batched = jraph.batch_np(graphs)
  nodes = int(np.sum(batched.n_node))
  edges = int(np.sum(batched.n_edge))
  if nodes >= node_bucket or edges > edge_bucket:
    raise ValueError(f"batch of {nodes} nodes / {edges} edges exceeds the bucket "
                     f"({node_bucket} / {edge_bucket})")
  return jraph.pad_with_graphs(batched, node_bucket, edge_bucket, len(graphs) + 1)
