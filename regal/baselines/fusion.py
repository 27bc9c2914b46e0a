"""QuickP-style graph shrinking: operator fusion and co-location groups.

QuickP ("Efficient Device Placement for Distributed DNN Training", 2025) makes exact placement
affordable on large graphs by solving a smaller model:

* **Fusion** (its Algorithm 1, as implemented here): an edge u -> v is contracted when both
  ends are cheap (the fused compute cost stays at most alpha, by default the 90th percentile of
  the non-zero compute costs) and the contraction keeps the graph acyclic. QuickP's theorem:
  contracting u -> v creates a cycle exactly when another path leads from u to v, so that is
  what `_has_other_path` checks before every contraction. Fused ops run back to back on one
  device in topological order.
* **Co-location** (its critical-path rank rule): u and v must share a device when v is u's
  critical successor (it realizes u's upward rank: rank(u) = w(u) + c(u, v) + rank(v)), u is
  v's critical predecessor (it realizes v's top level), and moving the tensor costs more than
  the cheaper op's compute, so splitting them could only lengthen the critical path. Groups
  are therefore paths; they become equality constraints, not fused ops.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from datasets.devices import DeviceSpec
from datasets.graph import Graph
from regal.baselines.list_scheduling import (CONTROL_ONLY, Dependencies, bottom_levels,
                                             mean_transfer_time)


@dataclasses.dataclass(frozen=True)
class Fused:
  """A graph shrunk by fusion: node k stands for ops `members[k]` (topological order).

  cost [k] is the summed compute cost; edges (src, dst, bytes) join distinct nodes, bytes the
  largest tensor crossing (CONTROL_ONLY for ordering only); node_of [o] maps ops to nodes."""
  members: list[list[int]]
  cost: np.ndarray
  edges: list[tuple[int, int, float]]
  node_of: np.ndarray


def default_alpha(graph: Graph) -> float:
  """The 90th percentile of the non-zero compute costs (0 when every cost is 0)."""
  nonzero = graph.compute_cost[graph.compute_cost > 0]
  return float(np.percentile(nonzero, 90)) if len(nonzero) else 0.0


class _UnionFind:
  def __init__(self, size: int):
    self.parent = list(range(size))

  def find(self, item: int) -> int:
    while self.parent[item] != item:
      self.parent[item] = self.parent[self.parent[item]]
      item = self.parent[item]
    return item

  def union(self, a: int, b: int) -> int:
    a, b = self.find(a), self.find(b)
    self.parent[max(a, b)] = min(a, b)
    return min(a, b)


def _has_other_path(succ: dict[int, set[int]], u: int, v: int) -> bool:
  """Whether v is reachable from u other than by the direct edge u -> v."""
  stack = [s for s in succ[u] if s != v]
  seen = set(stack)
  while stack:
    node = stack.pop()
    if node == v:
      return True
    for nxt in succ[node]:
      if nxt not in seen:
        seen.add(nxt)
        stack.append(nxt)
  return False


def fuse(graph: Graph, alpha: float | None = None) -> Fused:
  """Contract cheap edges while the graph stays a DAG (see the module docstring)."""
  alpha = default_alpha(graph) if alpha is None else alpha
  deps = Dependencies.of(graph)
  groups = _UnionFind(graph.num_ops)
  cost = {op: float(c) for op, c in enumerate(graph.compute_cost)}
  succ = {op: set(deps.succs[op]) for op in range(graph.num_ops)}
  pred = {op: set(deps.preds[op]) for op in range(graph.num_ops)}
  for u in graph.topological_order.tolist():
    for v in sorted(deps.succs[u]):
      a, b = groups.find(u), groups.find(v)
      if a == b or cost[a] + cost[b] > alpha or _has_other_path(succ, a, b):
        continue
      keep, gone = groups.union(a, b), max(a, b)
      cost[keep] = cost[a] + cost[b]
      del cost[gone]
      merged_succ = (succ.pop(gone) | succ[keep]) - {a, b}
      merged_pred = (pred.pop(gone) | pred[keep]) - {a, b}
      succ[keep], pred[keep] = merged_succ, merged_pred
      for node in merged_succ:
        pred[node].discard(gone)
        pred[node].add(keep)
      for node in merged_pred:
        succ[node].discard(gone)
        succ[node].add(keep)
  roots = sorted(cost)
  index = {root: k for k, root in enumerate(roots)}
  node_of = np.array([index[groups.find(op)] for op in range(graph.num_ops)], np.int64)
  members = [[] for _ in roots]
  for op in graph.topological_order.tolist():
    members[node_of[op]].append(op)
  largest: dict[tuple[int, int], float] = {}
  for dst, (preds, sizes) in enumerate(zip(deps.preds, deps.pred_bytes)):
    for src, size in zip(preds, sizes):
      a, b = node_of[src], node_of[dst]
      if a != b:
        largest[(a, b)] = max(largest.get((a, b), CONTROL_ONLY), size)
  edges = [(a, b, size) for (a, b), size in sorted(largest.items())]
  return Fused(members=members, cost=np.array([cost[r] for r in roots]), edges=edges,
               node_of=node_of)


def colocation_groups(graph: Graph, devices: DeviceSpec) -> list[list[int]]:
  """Ops that must share a device by the critical-path rank rule (groups of 2 or more)."""
  deps = Dependencies.of(graph)
  rank = bottom_levels(graph, devices, deps)
  mean_time = graph.compute_cost * float(np.mean(1.0 / devices.speed))
  top = np.zeros(graph.num_ops)  # Top level: the longest path into each op.
  critical_pred = np.full(graph.num_ops, -1)
  for v in graph.topological_order.tolist():
    heads = [top[u] + mean_time[u] + mean_transfer_time(devices, size)
             for u, size in zip(deps.preds[v], deps.pred_bytes[v])]
    if heads:
      k = int(np.argmax(heads))
      top[v], critical_pred[v] = heads[k], deps.preds[v][k]
  groups = _UnionFind(graph.num_ops)
  for u in range(graph.num_ops):
    if not deps.succs[u]:
      continue
    tails = [mean_transfer_time(devices, size) + rank[v]
             for v, size in zip(deps.succs[u], deps.succ_bytes[u])]
    k = int(np.argmax(tails))
    v, size = deps.succs[u][k], deps.succ_bytes[u][k]
    # Mutual critical neighbours only, so groups stay paths and parallel branches stay free.
    if critical_pred[v] == u and mean_transfer_time(devices, size) > min(mean_time[u],
                                                                          mean_time[v]):
      groups.union(u, v)
  by_root: dict[int, list[int]] = {}
  for op in range(graph.num_ops):
    by_root.setdefault(groups.find(op), []).append(op)
  return [members for members in by_root.values() if len(members) > 1]
