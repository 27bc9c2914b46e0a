"""REGAL's policy: a jraph GNN that predicts Beta distributions for BRKGA's mutant genes.

Every gene's mean has a neutral action besides the k quantized means: the gene stays uniform,
as in the unguided search. The last layer starts at zero and the neutral logit above the
others (`PolicyConfig.initial_steer`), so an untrained policy read out by argmax is the
unguided search, bit for bit, and sampled it steers few genes.

Network (REGAL equations 1-2, appendix A.14-A.16): node and edge encoders (MLPs), `rounds`
rounds of message passing with separate forward (producer -> consumer) and backward messages,
each an MLP of (own state, neighbour state, edge), aggregated by sum or mean; a residual MLP or a
GRU updates the node state. A shared head gives every node, for each of its d + 1 genes (d
device affinities, 1 priority), categorical logits over k quantized means and k quantized
variances (k = `placement_bins` for affinities, `priority_bins` for the priority). Transfer
genes stay uniform. `Baseline` is the separate value network b(G): an MLP of the mean-pooled
encoded nodes, starting near 0 (the reward of matching the unguided search).

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
  # The probability with which an untrained policy steers a gene when sampled (the neutral
  # action's logit starts above the others' so; with argmax it never steers).
  initial_steer: float = 0.1


class Logits(NamedTuple):
  """Per node: [N, d, 1 + kp] placement mean and [N, d, kp] variance logits, [N, 1 + ks] and
  [N, ks] priority ones. Mean bin 0 is the neutral action: the gene stays uniform, as in the
  unguided search, and its variance bin is ignored."""
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


NEUTRAL = 0  # The mean bin that leaves a gene uniform.


def guided_beta(action_mean, action_var, bins: int) -> tuple[jnp.ndarray, jnp.ndarray]:
  """(alpha, beta) of actions whose mean bin 0 is neutral (exactly 1, 1: uniform keys) and
  whose bins 1..k are `dequantize`'s 0..k-1."""
  alpha, beta = dequantize(action_mean - 1, action_var, bins)
  neutral = action_mean == NEUTRAL
  return jnp.where(neutral, 1.0, alpha), jnp.where(neutral, 1.0, beta)


def neutral_logit(bins: int, initial_steer: float) -> float:
  """The neutral bin's starting logit (the others' start at 0): sampled, an untrained policy
  steers a gene with probability `initial_steer`."""
  return float(np.log(bins * (1.0 - initial_steer) / initial_steer))


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
    # The last layer starts at zero: every node starts at the neutral action's prior.
    hidden = nn.relu(nn.Dense(c.hidden)(nodes))
    out = nn.Dense(d * (2 * kp + 1) + 2 * ks + 1, kernel_init=nn.initializers.zeros)(hidden)
    placement = out[:, :d * (2 * kp + 1)].reshape(-1, d, 2 * kp + 1)
    priority = out[:, d * (2 * kp + 1):]
    prior = lambda bins: jnp.zeros(bins + 1).at[NEUTRAL].set(  # noqa: E731
        neutral_logit(bins, c.initial_steer))
    return Logits(placement[..., :kp + 1] + prior(kp), placement[..., kp + 1:],
                  priority[:, :ks + 1] + prior(ks), priority[:, ks + 1:])


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
    # Rewards are log(unguided / guided objective): 0 is the natural starting guess.
    return nn.Dense(1)(hidden)[:, 0]


def sample(key: jax.Array, logits: Logits) -> Actions:
  keys = jax.random.split(key, 4)
  return Actions(*(jax.random.categorical(k, l) for k, l in zip(keys, logits)))


def greedy(logits: Logits) -> Actions:
  return Actions(*(jnp.argmax(l, axis=-1) for l in logits))


def node_log_prob(logits: Logits, actions: Actions) -> jnp.ndarray:
  """[N] log-probability of each node's chosen bins (all its genes)."""
  def picked(l, a):
    return jnp.take_along_axis(jax.nn.log_softmax(l), a[..., None], axis=-1)[..., 0]

  def gene(mean_logits, mean, var_logits, var):  # A neutral gene's variance is not chosen.
    return picked(mean_logits, mean) + jnp.where(mean == NEUTRAL, 0.0, picked(var_logits, var))
  placement = gene(logits.placement_mean, actions.placement_mean, logits.placement_var,
                   actions.placement_var)
  priority = gene(logits.priority_mean, actions.priority_mean, logits.priority_var,
                  actions.priority_var)
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
  pa, pb = guided_beta(actions.placement_mean[sl], actions.placement_var[sl],
                       config.placement_bins)
  sa, sb = guided_beta(actions.priority_mean[sl], actions.priority_var[sl],
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


def imitation_targets(best: list[np.ndarray], layout: chromosome_lib.Layout,
                      config: PolicyConfig) -> Actions:
  """Per-node target actions (numpy) that steer mutants toward what good solutions of one
  graph agree on (`best`: chromosomes of the graph's own layout, e.g. the unguided search's
  answers with different seeds): an op whose device they all share gets a high mean on that
  device's gene and a low one elsewhere; a priority whose mean-bins they all share within one
  gets their rounded mean bin; the rest stay neutral. Chosen means take the narrowest
  variance bin."""
  chromosomes = np.stack([np.asarray(c, np.float32) for c in best])
  decoded = chromosome_lib.decode(chromosomes, layout)
  placement = np.asarray(decoded.placement)  # [K, o]
  agreed = (placement == placement[:1]).all(axis=0)
  kp, ks = config.placement_bins, config.priority_bins
  device_mean = np.where(np.arange(layout.num_devices)[None, :] == placement[0][:, None],
                         kp, 1)  # Bins 1..k: the lowest and the highest mean.
  placement_mean = np.where(agreed[:, None], device_mean, NEUTRAL)
  bins = np.minimum((np.asarray(decoded.op_priority) * ks).astype(np.int64), ks - 1)  # [K, o]
  close = bins.max(axis=0) - bins.min(axis=0) <= 1
  priority_mean = np.where(close, 1 + np.rint(bins.mean(axis=0)).astype(np.int64), NEUTRAL)
  return Actions(placement_mean.astype(np.int32), np.zeros_like(placement_mean, np.int32),
                 priority_mean.astype(np.int32), np.zeros_like(priority_mean, np.int32))
