"""QuickP-style graph shrinking: operator fusion and co-location groups.

QuickP ("Efficient Device Placement for Distributed DNN Training", 2025) makes exact placement
affordable on large graphs by solving a smaller model:

* **Fusion** (its Algorithm 1, `regal_datasets.coarsen.quickp_fusion`): straight-line edges and
  edges between cheap ops (at most alpha, by default the 90th percentile of the non-zero
  compute costs) are contracted, never an edge from a fan-out to a fan-in, and never one that
  would close a cycle. Fused ops run back to back on one device in topological order.
* **Co-location** (its critical-path rank rule): u and v must share a device when v is u's
  critical successor (it realizes u's upward rank: rank(u) = w(u) + c(u, v) + rank(v)), u is
  v's critical predecessor (it realizes v's top level), and moving the tensor costs more than
  the cheaper op's compute, so splitting them could only lengthen the critical path. Groups
  are therefore paths; they become equality constraints, not fused ops.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from regal_datasets import analysis
from regal_datasets.analysis import CONTROL_ONLY, Dependencies, mean_transfer_time
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal_datasets import coarsen


@dataclasses.dataclass(frozen=True)
class Fused:
  """A graph shrunk by fusion: node k stands for ops `members[k]` (topological order).

  cost [k] is the summed compute cost; edges (src, dst, bytes) join distinct nodes, bytes the
  largest tensor crossing (CONTROL_ONLY for ordering only); node_of [o] maps ops to nodes."""
  members: list[list[int]]
  cost: np.ndarray
  edges: list[tuple[int, int, float]]
  node_of: np.ndarray


def fuse(graph: Graph, alpha: float | None = None) -> Fused:
  """QuickP's operator fusion (`regal_datasets.coarsen.quickp_fusion`) as a node-level model."""
  coarsening = coarsen.quickp_fusion(graph, alpha)
  node_of = coarsening.group_of
  deps = Dependencies.of(graph)
  largest: dict[tuple[int, int], float] = {}
  for dst, (preds, sizes) in enumerate(zip(deps.preds, deps.pred_bytes)):
    for src, size in zip(preds, sizes):
      a, b = node_of[src], node_of[dst]
      if a != b:
        largest[(a, b)] = max(largest.get((a, b), CONTROL_ONLY), size)
  cost = np.bincount(node_of, weights=graph.compute_cost, minlength=coarsening.num_groups)
  return Fused(members=coarsening.members, cost=cost,
               edges=[(a, b, size) for (a, b), size in sorted(largest.items())],
               node_of=node_of)


def colocation_groups(graph: Graph, devices: DeviceSpec) -> list[list[int]]:
  """Ops that must share a device by the critical-path rank rule (groups of 2 or more)."""
  deps = Dependencies.of(graph)
  _, critical_succ = analysis.mean_bottom_levels(graph, devices, deps,
                                                 with_critical_successor=True)
  mean_time = analysis.mean_compute_time(graph, devices)
  _, critical_pred = analysis.mean_top_levels(graph, devices, deps, with_critical_predecessor=True)
  groups = coarsen.UnionFind(graph.num_ops)
  for u in range(graph.num_ops):
    if not deps.succs[u]:
      continue
    v = int(critical_succ[u])
    size = deps.succ_bytes[u][deps.succs[u].index(v)]
    # Mutual critical neighbours only, so groups stay paths and parallel branches stay free.
    if critical_pred[v] == u and mean_transfer_time(devices, size) > min(mean_time[u],
                                                                          mean_time[v]):
      groups.union(u, v)
  by_root: dict[int, list[int]] = {}
  for op in range(graph.num_ops):
    by_root.setdefault(groups.find(op), []).append(op)
  return [members for members in by_root.values() if len(members) > 1]
