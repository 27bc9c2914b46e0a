"""A learned prior over fresh keys: per op, where a long run schedules it and on which class of
device it puts it (issue 68).

The network is REGAL's encoder (`policy.Encoder`: message passing over the graph's features)
with a per-node head of three outputs:
  key          the logit of the op's priority key in a long run's schedule (label
               1 - (rank + 1/2) / ops: larger keys run first, `chromosome.order_priorities`);
  key_spread   the logit-normal spread of that key (a confidence), trained by likelihood;
  class        logits over the placement classes: the link groups of a grouped device set,
               else the devices (`placement_classes`).
The search draws a steered key from a logit-normal (`brkga.with_prior`: one normal and a
sigmoid per key, no Gamma rejection), so the head predicts that distribution's parameters
directly and is trained by its exact likelihood.

Placement labels are only defined up to relabelling interchangeable classes (two identical
devices, two identical groups): the class loss of a graph is the smallest cross-entropy over
every relabelling of the classes (`class_loss`), so a graph's loss is the same whichever of its
equivalent answers the long run happened to find, and the network picks its own labelling.
"""
from __future__ import annotations

import itertools
import statistics
from typing import NamedTuple

import flax.linen as nn
from flax import struct
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from regal_datasets import devices as devices_lib
from regal.learning import policy as policy_lib

MAX_ENUMERATED = 4  # Up to 4! = 24 relabellings are enumerated; beyond, the Hungarian method.
MIN_SPREAD, MAX_SPREAD = 0.05, 3.0


class PriorOutputs(NamedTuple):
  key: jnp.ndarray  # [N] logit of the priority key.
  key_spread: jnp.ndarray  # [N] logit-normal spread (> 0).
  class_logits: jnp.ndarray  # [N, k]


class PriorNet(nn.Module):
  config: policy_lib.PolicyConfig
  num_classes: int

  @nn.compact
  def __call__(self, graph: jraph.GraphsTuple) -> PriorOutputs:
    nodes = policy_lib.Encoder(self.config)(graph)
    hidden = nn.relu(nn.Dense(self.config.hidden)(nodes))
    out = nn.Dense(2 + self.num_classes)(hidden)
    spread = MIN_SPREAD + (MAX_SPREAD - MIN_SPREAD) * jax.nn.sigmoid(out[:, 1])
    return PriorOutputs(out[:, 0], spread, out[:, 2:])


def placement_classes(devices: devices_lib.DeviceSpec) -> np.ndarray:
  """Each device's placement class [num_devices]: its link group where the devices form
  several groups (which ops share a group is what matters there), else the device itself."""
  groups = devices_lib.link_groups(devices)
  return groups if groups.max() > 0 else np.arange(devices.num_devices)


def num_classes(devices: devices_lib.DeviceSpec) -> int:
  return int(placement_classes(devices).max()) + 1


def key_label(position: np.ndarray, num_ops: int) -> np.ndarray:
  """The priority key [o] of ops at schedule positions `position` (0 first), strictly inside
  (0, 1) so its logit is finite."""
  return 1.0 - (np.asarray(position, np.float64) + 0.5) / max(num_ops, 1)


def relabellings(k: int) -> np.ndarray:
  """[k!, k] every permutation of k classes."""
  return np.array(list(itertools.permutations(range(k))), np.int32)


def best_relabelling(cost: np.ndarray) -> np.ndarray:
  """[G, k] per graph the relabelling a -> perm[a] of least total cost (`cost` [G, k, k]:
  cost[g, a, b] of reading label a as class b), by the Hungarian method."""
  from scipy.optimize import linear_sum_assignment  # scipy comes with jax.
  cost = np.asarray(cost, np.float64)
  return np.stack([linear_sum_assignment(c)[1] for c in cost]).astype(np.int32).reshape(
      cost.shape[:2])


def key_loss(outputs: PriorOutputs, key: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
  """Mean over real nodes of the logit-normal negative log-likelihood of the label keys
  (without the constant and the Jacobian, which do not depend on the parameters)."""
  z = jnp.log(key) - jnp.log1p(-key)
  nll = jnp.log(outputs.key_spread) + 0.5 * ((z - outputs.key) / outputs.key_spread) ** 2
  return jnp.sum(jnp.where(mask, nll, 0.0)) / jnp.maximum(mask.sum(), 1)


def class_loss(outputs: PriorOutputs, classes: jnp.ndarray, mask: jnp.ndarray,
               graph_of: jnp.ndarray, num_graphs: int) -> jnp.ndarray:
  """Per real node mean cross-entropy of the label classes, each graph under the relabelling
  of its classes that fits best (invariant under permuting the classes of any graph): every
  relabelling tried for up to `MAX_ENUMERATED` classes, else the Hungarian method's choice
  (the same minimum; no gradient flows through the choice, as through a min)."""
  k = outputs.class_logits.shape[-1]
  log_p = jax.nn.log_softmax(outputs.class_logits)  # [N, k]
  labels = jax.nn.one_hot(classes, k) * mask[:, None]  # [N, k]
  # cost[g, a, b]: graph g's nodes labelled a, read as class b.
  cost = -jax.ops.segment_sum(labels[:, :, None] * log_p[:, None, :], graph_of, num_graphs)
  if k <= MAX_ENUMERATED:
    perms = jnp.asarray(relabellings(k))  # [R, k]
    per_graph = cost[:, jnp.arange(k)[None, :], perms].sum(-1).min(-1)  # [G]
  else:
    perm = jax.pure_callback(best_relabelling,
                             jax.ShapeDtypeStruct((num_graphs, k), jnp.int32),
                             jax.lax.stop_gradient(cost))
    per_graph = jnp.take_along_axis(cost, perm[..., None], axis=-1)[..., 0].sum(-1)
  return per_graph.sum() / jnp.maximum(mask.sum(), 1)


@struct.dataclass
class Batch:
  """Training graphs in one padded `GraphsTuple` with their labels per node."""
  graph: jraph.GraphsTuple
  key: np.ndarray  # [N] label keys (0.5 on padding)
  classes: np.ndarray  # [N] label classes (0 on padding)
  mask: np.ndarray  # [N] real nodes
  graph_of: np.ndarray  # [N] graph index of each node


def make_batch(graphs: list[jraph.GraphsTuple], keys: list[np.ndarray],
               classes: list[np.ndarray], node_bucket: int, edge_bucket: int) -> Batch:
  graph = policy_lib.batch_graphs(graphs, node_bucket, edge_bucket)
  real = int(sum(len(k) for k in keys))
  pad = node_bucket - real
  num_graphs = int(graph.n_node.shape[0])
  graph_of = np.repeat(np.arange(num_graphs), np.asarray(graph.n_node))
  return Batch(graph, np.concatenate(keys + [np.full(pad, 0.5)]).astype(np.float32),
               np.concatenate(classes + [np.zeros(pad, int)]).astype(np.int32),
               np.arange(node_bucket) < real, graph_of.astype(np.int32))


def loss_fn(params, net: PriorNet, batch: Batch, class_weight: float = 1.0):
  outputs = net.apply(params, batch.graph)
  num_graphs = int(batch.graph.n_node.shape[0])
  key = key_loss(outputs, batch.key, batch.mask)
  placement = class_loss(outputs, batch.classes, batch.mask, batch.graph_of, num_graphs)
  return key + class_weight * placement, (key, placement)


def affinity_means(probability: np.ndarray, how: str = "calibrated") -> np.ndarray:
  """Prior means of affinity genes [o, d] from the predicted probability of each device's
  class. "calibrated": logit means (spread / sqrt 2) Phi^-1(p), so that on two devices the
  prior's keys place an op on a device with exactly its predicted probability (each draw is
  logit-normal with spread `AFFINITY_SPREAD`; their difference normal with spread sqrt 2 times
  it); "sharp": the probability itself as the mean, which places the op on its likelier device
  almost always (the label oracle's rows)."""
  probability = np.clip(np.asarray(probability, np.float64), 0.01, 0.99)
  if how == "sharp":
    return np.clip(probability, 0.02, 0.98)
  if how not in AFFINITY_MAPPINGS:
    raise ValueError(f"unknown affinity mapping {how!r}")
  return 1.0 / (1.0 + np.exp(-AFFINITY_SPREAD / np.sqrt(2.0) * _normal_quantile(probability)))


def _normal_quantile(probability: np.ndarray) -> np.ndarray:
  """The standard normal's quantile function, elementwise (the standard library's: importing
  scipy.special for it cost every guided run: experiments/results/issue82/README.md)."""
  inverse = statistics.NormalDist().inv_cdf
  flat = np.asarray(probability, np.float64).ravel()
  return np.array([inverse(p) for p in flat], np.float64).reshape(np.shape(probability))


def steered_keys(outputs: PriorOutputs, num_ops: int, layout, devices: devices_lib.DeviceSpec,
                 q: float, first_node: int = 0, placement: str = "calibrated"
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(prior_q, prior_mean, prior_spread) [layout.size] of one graph whose nodes start at
  `first_node`: priority genes around the predicted key with the predicted spread; each device's
  affinity gene around `affinity_means` of its class's predicted probability (devices of one
  class alike, so the device inside a class stays the search's choice), spread
  `AFFINITY_SPREAD`; transfer genes unsteered."""
  sl = slice(first_node, first_node + num_ops)
  # In numpy: each eager JAX op on a new shape compiles a program
  # (experiments/results/issue82/README.md).
  key = 1.0 / (1.0 + np.exp(-np.asarray(outputs.key, np.float64)[sl]))
  spread = np.asarray(outputs.key_spread, np.float64)[sl]
  logits = np.asarray(outputs.class_logits, np.float64)[sl]
  probability = np.exp(logits - logits.max(axis=-1, keepdims=True))
  probability /= probability.sum(axis=-1, keepdims=True)  # [o, k]
  affinity = affinity_means(probability[:, placement_classes(devices)], placement)  # [o, d]
  prior_q = np.zeros(layout.size, np.float32)
  mean = np.full(layout.size, 0.5, np.float32)
  width = np.full(layout.size, 1.0, np.float32)
  prior_q[layout.priority_slice] = q
  mean[layout.priority_slice] = key
  width[layout.priority_slice] = spread
  prior_q[layout.affinity_slice] = q
  mean[layout.affinity_slice] = affinity.ravel()
  width[layout.affinity_slice] = AFFINITY_SPREAD
  return prior_q, mean, width


AFFINITY_SPREAD = 0.5  # As the oracle rows of experiments/results/prior_table.
AFFINITY_MAPPINGS = ("calibrated", "sharp")  # `affinity_means`.
