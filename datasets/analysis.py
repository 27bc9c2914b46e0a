"""What a graph's structure alone says about any placement of it: dependencies, transfer
times, levels (top and bottom), the critical path and a makespan lower bound.

Every method and policy reads these from here: the list schedulers, CP-SAT, QuickP fusion,
the Enumerative Optimizer, coarsening, the Doppler policy's features and the readable
reference models (each `regal.scoring` model package's `reference.py`).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph

CONTROL_ONLY = -1.0  # Bytes of a dependency that carries no tensor.
EdgeTime = Callable[[float], float]  # Bytes of a dependency -> its time.


@dataclasses.dataclass(frozen=True)
class Dependencies:
  """Each op's distinct predecessors with the largest tensor it reads from each.

  preds[v][k] is a predecessor of v; pred_bytes[v][k] the largest tensor of it that v reads
  (CONTROL_ONLY when v only waits for it). succs[u] lists u's distinct successors, ascending.
  """
  preds: list[list[int]]
  pred_bytes: list[list[float]]
  succs: list[list[int]]
  succ_bytes: list[list[float]]

  @classmethod
  def of(cls, graph: Graph) -> "Dependencies":
    largest: dict[tuple[int, int], float] = {}
    for src, dst, is_control, size in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(),
                                          graph.edge_is_control.tolist(),
                                          graph.edge_bytes.tolist()):
      carried = CONTROL_ONLY if is_control else size
      largest[(src, dst)] = max(largest.get((src, dst), CONTROL_ONLY), carried)
    preds = [[] for _ in range(graph.num_ops)]
    pred_bytes = [[] for _ in range(graph.num_ops)]
    succs = [[] for _ in range(graph.num_ops)]
    succ_bytes = [[] for _ in range(graph.num_ops)]
    for (src, dst), size in sorted(largest.items()):
      preds[dst].append(src)
      pred_bytes[dst].append(size)
      succs[src].append(dst)
      succ_bytes[src].append(size)
    return cls(preds, pred_bytes, succs, succ_bytes)


def link_time(latency, bandwidth, num_bytes, src, dst, xp=np):
  """The transfer-time formula, on numpy or `jax.numpy` (`xp`) arrays that broadcast together:
  0 on one device (src == dst) or for a control dependency (CONTROL_ONLY bytes), else
  latency[src, dst] + bytes / bandwidth[src, dst], in the arrays' own dtype. Traced code
  (the Doppler policy's episodes) calls it with `xp=jax.numpy`."""
  moved = (src != dst) & (num_bytes != CONTROL_ONLY)
  delay = latency[src, dst] + xp.maximum(num_bytes, 0) / xp.where(moved, bandwidth[src, dst], 1)
  return xp.where(moved, delay, 0)


def transfer_time(devices: DeviceSpec, num_bytes, src, dst, dtype=np.float64):
  """`link_time` on a device description: each step rounded to `dtype` (float32 reproduces
  the performance models' arithmetic). Scalars give a `dtype` scalar, arrays an array."""
  if np.ndim(num_bytes) == 0 and np.ndim(src) == 0 and np.ndim(dst) == 0:
    # The list schedulers' inner loop: numpy's per-call overhead on 0-d arrays made critical
    # path and HEFT 4-5x slower, so scalars take the same steps on plain scalars.
    if src == dst or num_bytes == CONTROL_ONLY:
      return dtype(0.0)
    return dtype(dtype(devices.latency[src, dst])
                 + dtype(num_bytes) / dtype(devices.bandwidth[src, dst]))
  value = link_time(devices.latency.astype(dtype), devices.bandwidth.astype(dtype),
                    np.asarray(num_bytes, dtype), np.asarray(src), np.asarray(dst))
  return dtype(value) if np.ndim(value) == 0 else value.astype(dtype)


def mean_transfer_time_fn(devices: DeviceSpec) -> EdgeTime:
  """bytes -> `transfer_time` averaged over ordered pairs of distinct devices (0 with one
  device or for a control dependency); the pairs are found once, for the level loops."""
  src, dst = np.nonzero(~np.eye(devices.num_devices, dtype=bool))
  latency, bandwidth = devices.latency[src, dst], devices.bandwidth[src, dst]

  def mean_time(num_bytes: float) -> float:
    if num_bytes == CONTROL_ONLY or devices.num_devices == 1:
      return 0.0
    return float(np.mean(latency + num_bytes / bandwidth))

  return mean_time


def mean_transfer_time(devices: DeviceSpec, num_bytes: float) -> float:
  """`transfer_time` averaged over ordered pairs of distinct devices (0 with one device)."""
  return mean_transfer_time_fn(devices)(num_bytes)


def mean_compute_time(graph: Graph, devices: DeviceSpec) -> np.ndarray:
  """[o] each op's compute time averaged over the devices' speeds."""
  return graph.compute_cost * float(np.mean(1.0 / devices.speed))




def top_levels(graph: Graph, op_time: np.ndarray, deps: Dependencies | None = None,
               edge_time: EdgeTime | None = None, with_critical_predecessor: bool = False):
  """[o] the longest path from an entry op to each op, the op itself excluded: the sum of
  `op_time` over the path's ops plus `edge_time(bytes)` per dependency on it (none: free).
  With compute times that is an op's earliest start on unlimited devices; with ones, its
  depth. `with_critical_predecessor`: also [o] the predecessor that path comes through (the
  first of ties; -1 for entry ops)."""
  deps = deps or Dependencies.of(graph)
  level = np.zeros(graph.num_ops)
  critical = np.full(graph.num_ops, -1)
  for op in graph.topological_order.tolist():
    if edge_time is None:
      heads = [level[p] + op_time[p] for p in deps.preds[op]]
    else:
      heads = [level[p] + op_time[p] + edge_time(size)
               for p, size in zip(deps.preds[op], deps.pred_bytes[op])]
    if heads:
      k = max(range(len(heads)), key=heads.__getitem__)  # The first of ties.
      level[op], critical[op] = heads[k], deps.preds[op][k]
  return (level, critical) if with_critical_predecessor else level


def bottom_levels(graph: Graph, op_time: np.ndarray, deps: Dependencies | None = None,
                  edge_time: EdgeTime | None = None, with_critical_successor: bool = False):
  """[o] the longest path from each op to an exit op, the op itself included (the upward
  rank of HEFT and critical-path list scheduling with mean times). `with_critical_successor`:
  also [o] the successor that path goes through (the first of ties; -1 for exit ops)."""
  deps = deps or Dependencies.of(graph)
  level = np.zeros(graph.num_ops)
  critical = np.full(graph.num_ops, -1)
  for op in graph.topological_order[::-1].tolist():
    if edge_time is None:
      tails = [level[s] for s in deps.succs[op]]
    else:
      tails = [edge_time(size) + level[s] for s, size in zip(deps.succs[op], deps.succ_bytes[op])]
    if tails:
      k = max(range(len(tails)), key=tails.__getitem__)  # The first of ties.
      level[op], critical[op] = op_time[op] + tails[k], deps.succs[op][k]
    else:
      level[op] = op_time[op] + 0.0
  return (level, critical) if with_critical_successor else level


def mean_bottom_levels(graph: Graph, devices: DeviceSpec, deps: Dependencies | None = None,
                       with_critical_successor: bool = False):
  """Bottom levels of mean compute and mean transfer times (HEFT's upward rank)."""
  return bottom_levels(graph, mean_compute_time(graph, devices), deps,
                       mean_transfer_time_fn(devices), with_critical_successor)


def mean_top_levels(graph: Graph, devices: DeviceSpec, deps: Dependencies | None = None,
                    with_critical_predecessor: bool = False):
  """Top levels of mean compute and mean transfer times."""
  return top_levels(graph, mean_compute_time(graph, devices), deps,
                    mean_transfer_time_fn(devices), with_critical_predecessor)


def longest_compute_path(graph: Graph) -> float:
  """The largest total compute cost along a dependency path (transfers free)."""
  cost = np.asarray(graph.compute_cost, np.float64)
  return float((top_levels(graph, cost) + cost).max(initial=0.0))


def makespan_lower_bound(graph: Graph, devices: DeviceSpec) -> float:
  """No placement under any of our models finishes sooner: max(total compute over the summed
  device speeds, the longest compute path on the fastest device)."""
  speed = np.asarray(devices.speed, np.float64)
  return max(float(graph.compute_cost.sum()) / float(speed.sum()),
             longest_compute_path(graph) / float(speed.max()))
