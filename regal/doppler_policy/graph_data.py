"""What a Doppler episode needs of a graph, as fixed-shape arrays (host-side numpy, once).

Static node features X_G (Doppler appendix E.1), per op: compute cost, summed communication
cost from its predecessors, summed communication cost to its successors, t-level and b-level
(mean compute over the devices, mean transfer time over device pairs; the list schedulers'
definitions). Times are divided by the graph's critical path length (the largest b-level), so
features of graphs of any scale lie in [0, 1].

SEL reads the sums of node embeddings along an op's b-level path (the op, then repeatedly the
successor that attains the b-level, down to an exit) and its t-level path (the op, then the
predecessor that attains the t-level, up to an entry); they are 0/1 membership matrices here,
so a path sum is one matrix product per episode.

Everything is padded to a size bucket (`regal_datasets.padding.bucket_size`) so graphs of similar size
share one compilation; padding ops are never ready and carry zero cost.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import struct

from regal_datasets import analysis
from regal_datasets.analysis import Dependencies, mean_transfer_time
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal_datasets.padding import bucket_size

NUM_NODE_FEATURES = 5
NUM_DEVICE_FEATURES = 5


@struct.dataclass
class EpisodeGraph:
  """A graph for the episode scan and the networks; N ops (padded), K predecessors each
  (padded), S successors each (padded), E encoder edges (padded), D devices."""
  node_features: np.ndarray  # [N, 5] normalized X_G
  node_mask: np.ndarray  # [N] bool: a real op
  cost: np.ndarray  # [N] compute cost (time on a device of speed 1)
  pred_index: np.ndarray  # [N, K] int; padding entries point at op N-1 and are masked
  pred_mask: np.ndarray  # [N, K] bool
  pred_bytes: np.ndarray  # [N, K] the largest tensor read from that predecessor; -1: control
  succ_index: np.ndarray  # [N, S] distinct successors; padding entries point at op N-1
  b_path: np.ndarray  # [N, N] 0/1: row v marks the ops of v's b-level path
  t_path: np.ndarray  # [N, N] 0/1: row v marks the ops of v's t-level path
  senders: np.ndarray  # [E] int: encoder edges producer -> consumer (padding: masked)
  receivers: np.ndarray  # [E] int
  edge_features: np.ndarray  # [E, 1] mean transfer time, normalized
  edge_mask: np.ndarray  # [E] bool
  speed: np.ndarray  # [D]
  latency: np.ndarray  # [D, D]
  bandwidth: np.ndarray  # [D, D]
  time_scale: np.ndarray  # [] the critical path length features are divided by


def _path_matrix(num_ops: int, next_op: np.ndarray, size: int) -> np.ndarray:
  """Row v: v and the ops reached by following next_op (-1 ends the path)."""
  matrix = np.zeros((size, size), np.float32)
  for op in range(num_ops):
    current = op
    while current >= 0:
      matrix[op, current] = 1.0
      current = int(next_op[current])
  return matrix


def static_features(graph: Graph, devices: DeviceSpec, deps: Dependencies | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(X_G [o, 5] unnormalized, next op on the b-level path [o], previous on the t-level path
  [o]; -1 where a path ends)."""
  deps = deps or Dependencies.of(graph)
  mean_time = analysis.mean_compute_time(graph, devices)
  b_level, b_next = analysis.mean_bottom_levels(graph, devices, deps, with_critical_successor=True)
  t_level, t_prev = analysis.mean_top_levels(graph, devices, deps, with_critical_predecessor=True)
  comm_in = np.array([sum(mean_transfer_time(devices, s) for s in deps.pred_bytes[v])
                      for v in range(graph.num_ops)])
  comm_out = np.array([sum(mean_transfer_time(devices, s) for s in deps.succ_bytes[v])
                       for v in range(graph.num_ops)])
  features = np.stack([mean_time, comm_in, comm_out, t_level, b_level], axis=1)
  return features, b_next, t_prev


def episode_graph(graph: Graph, devices: DeviceSpec, num_nodes: int | None = None
                  ) -> EpisodeGraph:
  """The padded arrays of `graph` on `devices` (`num_nodes` forces the node bucket)."""
  deps = Dependencies.of(graph)
  o = graph.num_ops
  size = num_nodes or bucket_size(o + 1)  # At least one padding op: masked indices point at it.
  if size <= o:
    raise ValueError(f"node bucket {size} must exceed the {o} ops")
  features, b_next, t_prev = static_features(graph, devices, deps)
  scale = max(float(features[:, 4].max(initial=0.0)), 1e-12)
  node_features = np.zeros((size, NUM_NODE_FEATURES), np.float32)
  node_features[:o] = features / scale
  # Predecessor slots round up to a power of two (coarser than the op buckets: graphs of one op
  # bucket differ most in their largest in-degree), so those graphs share one compilation.
  max_preds = 1 << max(max([len(p) for p in deps.preds] + [1]) - 1, 3).bit_length()
  pred_index = np.full((size, max_preds), size - 1, np.int32)
  pred_mask = np.zeros((size, max_preds), bool)
  pred_bytes = np.zeros((size, max_preds), np.float32)
  for v in range(o):
    k = len(deps.preds[v])
    pred_index[v, :k] = deps.preds[v]
    pred_mask[v, :k] = True
    pred_bytes[v, :k] = deps.pred_bytes[v]
  max_succs = 1 << max(max([len(p) for p in deps.succs] + [1]) - 1, 3).bit_length()
  succ_index = np.full((size, max_succs), size - 1, np.int32)
  for v in range(o):
    succ_index[v, :len(deps.succs[v])] = deps.succs[v]
  senders = [u for v in range(o) for u in deps.preds[v]]
  receivers = [v for v in range(o) for _ in deps.preds[v]]
  edge_time = [mean_transfer_time(devices, s) / scale for v in range(o) for s in deps.pred_bytes[v]]
  num_edges = bucket_size(max(len(senders), 1))
  pad = num_edges - len(senders)
  cost = np.zeros(size, np.float32)
  cost[:o] = graph.compute_cost
  mask = np.zeros(size, bool)
  mask[:o] = True
  return EpisodeGraph(
      node_features=node_features, node_mask=mask, cost=cost, pred_index=pred_index,
      pred_mask=pred_mask, pred_bytes=pred_bytes, succ_index=succ_index,
      b_path=_path_matrix(o, b_next, size), t_path=_path_matrix(o, t_prev, size),
      senders=np.asarray(senders + [size - 1] * pad, np.int32),
      receivers=np.asarray(receivers + [size - 1] * pad, np.int32),
      edge_features=np.asarray(edge_time + [0.0] * pad, np.float32)[:, None],
      edge_mask=np.arange(num_edges) < len(senders),
      speed=np.asarray(devices.speed, np.float32),
      latency=np.asarray(devices.latency, np.float32),
      # The diagonal is never used (no transfer on one device); 1 keeps the division finite.
      bandwidth=np.where(np.eye(devices.num_devices, dtype=bool), 1.0,
                         devices.bandwidth).astype(np.float32),
      time_scale=np.asarray(scale, np.float32))


def transfer_times(pred_bytes, src_device, latency, bandwidth, num_devices: int):
  """Arrival delay [..., D] of predecessors' tensors on every device (`analysis.link_time`
  traced: 0 on the producer's own device or for a control dependency)."""
  return analysis.link_time(latency, bandwidth, pred_bytes[..., None], src_device[..., None],
                            jnp.arange(num_devices), xp=jnp)
