"""Coarsening huge graphs: merge ops into groups, solve the small graph, map the answer back.

Two ways to form groups, both contracting one edge at a time on the quotient graph:
* `quickp_fusion` (QuickP's Algorithm 1): never fuse an edge u -> v when u has two or more
  successors and v two or more predecessors; fuse straight-line edges (u's only successor is v
  and v's only predecessor is u); fuse the other edges when one end is cheap (its compute cost
  at most alpha, by default the 90th percentile of the non-zero compute costs). QuickP's theorem: contracting
  u -> v creates a cycle exactly when another path leads from u to v (`has_other_path`);
  every contraction is checked against it, so the result stays a DAG.
* `heavy_edge_coarsening`: contract the edges carrying the most bytes first, while the quotient
  stays acyclic, until at most `target` groups remain (or no edge can be contracted).

`coarse_graph` builds the group graph (cost = summed member costs, extra memory = the largest
member's, every tensor kept with its producer's group, data edges only between groups: a
transfer inside a group costs nothing). `expand` maps a coarse placement and order back: every
op gets its group's device, and groups are expanded in order, members topologically.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from datasets import errors
from datasets.graph import Graph


@dataclasses.dataclass(frozen=True)
class Coarsening:
  """group_of [o]: the group of every op; members[g]: its ops in topological order."""
  group_of: np.ndarray
  members: list[list[int]]

  @property
  def num_groups(self) -> int:
    return len(self.members)


class UnionFind:
  """Disjoint sets over 0..size-1; a set's root is its smallest member."""

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


class _Quotient(UnionFind):
  """A DAG under edge contractions (union-find over ops, adjacency between group roots)."""

  def __init__(self, graph: Graph):
    super().__init__(graph.num_ops)
    self.succ = {op: set(graph.successors(op).tolist()) for op in range(graph.num_ops)}
    self.pred = {op: set(graph.predecessors(op).tolist()) for op in range(graph.num_ops)}
    self.cost = {op: float(c) for op, c in enumerate(graph.compute_cost)}
    self.graph = graph

  def contract(self, u: int, v: int) -> bool:
    """Merges the groups of u and v if they are joined by an edge and no other path."""
    a, b = self.find(u), self.find(v)
    if a == b or b not in self.succ[a] or has_other_path(self.succ, a, b):
      return False
    keep, gone = self.union(a, b), max(a, b)
    self.cost[keep] = self.cost[a] + self.cost[b]
    del self.cost[gone]
    succ = (self.succ.pop(gone) | self.succ[keep]) - {a, b}
    pred = (self.pred.pop(gone) | self.pred[keep]) - {a, b}
    self.succ[keep], self.pred[keep] = succ, pred
    for node in succ:
      self.pred[node].discard(gone)
      self.pred[node].add(keep)
    for node in pred:
      self.succ[node].discard(gone)
      self.succ[node].add(keep)
    return True

  def result(self) -> Coarsening:
    roots = sorted(self.cost)
    index = {root: k for k, root in enumerate(roots)}
    group_of = np.array([index[self.find(op)] for op in range(self.graph.num_ops)], np.int64)
    members = [[] for _ in roots]
    for op in self.graph.topological_order.tolist():
      members[group_of[op]].append(op)
    return Coarsening(group_of=group_of, members=members)


def has_other_path(succ: dict[int, set[int]], u: int, v: int) -> bool:
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


def default_alpha(graph: Graph) -> float:
  """The 90th percentile of the non-zero compute costs (0 when every cost is 0)."""
  nonzero = graph.compute_cost[graph.compute_cost > 0]
  return float(np.percentile(nonzero, 90)) if len(nonzero) else 0.0


def quickp_fusion(graph: Graph, alpha: float | None = None) -> Coarsening:
  """QuickP's operator fusion (see the module docstring), repeated until nothing fuses."""
  alpha = default_alpha(graph) if alpha is None else alpha
  quotient = _Quotient(graph)
  changed = True
  while changed:
    changed = False
    for u in graph.topological_order.tolist():
      for v in list(quotient.succ.get(quotient.find(u), ())):
        a, b = quotient.find(u), quotient.find(v)
        if a == b or b not in quotient.succ[a]:
          continue
        fan_out, fan_in = len(quotient.succ[a]), len(quotient.pred[b])
        if fan_out >= 2 and fan_in >= 2:
          continue
        straight = fan_out == 1 and fan_in == 1
        cheap = min(quotient.cost[a], quotient.cost[b]) <= alpha
        if (straight or cheap) and quotient.contract(a, b):
          changed = True
  return quotient.result()


def heavy_edge_coarsening(graph: Graph, target: int) -> Coarsening:
  """Contract the heaviest edges first until at most `target` groups remain."""
  if target < 1:
    raise errors.ConfigError(f"coarsening target must be at least 1 group, got {target}")
  quotient = _Quotient(graph)
  weight: dict[tuple[int, int], float] = {}
  for src, dst, size in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(),
                            graph.edge_bytes.tolist()):
    weight[(src, dst)] = max(weight.get((src, dst), 0.0), size)
  edges = sorted(weight, key=lambda e: (-weight[e], e))
  groups = graph.num_ops
  while groups > target:
    merged = 0
    for u, v in edges:
      if groups <= target:
        break
      if quotient.contract(u, v):
        groups -= 1
        merged += 1
    if not merged:
      break
  return quotient.result()


def coarse_graph(graph: Graph, coarsening: Coarsening) -> Graph:
  """The group graph: one op per group, data edges only where a tensor crosses groups."""
  group_of = coarsening.group_of
  count = coarsening.num_groups
  cost = np.bincount(group_of, weights=graph.compute_cost, minlength=count)
  extra = np.zeros(count)
  np.maximum.at(extra, group_of, graph.extra_memory)
  crossing = {}
  for tensor, consumer in zip(graph.data_edge_tensor.tolist(),
                              graph.data_edge_consumer.tolist()):
    src, dst = group_of[graph.tensor_producer[tensor]], group_of[consumer]
    if src != dst:
      crossing[(tensor, dst)] = None
  control = {(group_of[a], group_of[b]): None for a, b in zip(graph.control_edge_src.tolist(),
                                                              graph.control_edge_dst.tolist())
             if group_of[a] != group_of[b]}
  control_pairs = np.array(list(control), np.int64).reshape(-1, 2)
  names = [f"group{g}:{graph.op_names[members[0]]}" + (f"+{len(members) - 1}"
                                                       if len(members) > 1 else "")
           for g, members in enumerate(coarsening.members)]
  types = [graph.op_types[members[0]] if len(members) == 1 else "group"
           for members in coarsening.members]
  return Graph(op_names=names, op_types=types, compute_cost=cost, extra_memory=extra,
               tensor_producer=group_of[graph.tensor_producer], tensor_size=graph.tensor_size,
               data_edge_tensor=[t for t, _ in crossing], data_edge_consumer=[d for _, d in crossing],
               control_edge_src=control_pairs[:, 0], control_edge_dst=control_pairs[:, 1],
               name=f"{graph.name}_coarse{count}",
               metadata={"coarsened_from": graph.name, "original_ops": graph.num_ops})


def expand(coarsening: Coarsening, placement: np.ndarray, order: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
  """(placement [o], op order) of the original graph from a coarse placement and order."""
  placement = np.asarray(placement)[coarsening.group_of]
  ops = [op for group in np.asarray(order).tolist() for op in coarsening.members[group]]
  return placement.astype(np.int64), np.asarray(ops, np.int64)


def compose(first: Coarsening, second: Coarsening) -> Coarsening:
  """Coarsening `first`'s group graph by `second`, as one coarsening of the original."""
  group_of = second.group_of[first.group_of]
  members = [[op for group in groups for op in first.members[group]]
             for groups in second.members]
  return Coarsening(group_of=group_of, members=members)


AUTO_THRESHOLD = 500  # Graphs above this many ops are coarsened by `--coarsen auto`.
AUTO_TARGET = 256


def coarsen_for_search(graph: Graph, spec: str) -> Coarsening | None:
  """What `regal.optimize --coarsen` does: "off"; "auto" (above AUTO_THRESHOLD ops, QuickP
  fusion, then heavy edges down to AUTO_TARGET groups); or a group count K (QuickP fusion,
  then heavy edges down to K). Returns None when the graph stays as it is."""
  if spec in ("", "off", "none"):
    return None
  if spec == "auto":
    if graph.num_ops <= AUTO_THRESHOLD:
      return None
    target = AUTO_TARGET
  else:
    try:
      target = int(spec)
    except ValueError:
      raise errors.ConfigError(f"--coarsen takes off, auto or a group count, got {spec!r}") \
          from None
    if target < 1:
      raise errors.ConfigError(f"--coarsen group count must be at least 1, got {target}")
  fused = quickp_fusion(graph)
  if fused.num_groups <= target:
    return fused
  return compose(fused, heavy_edge_coarsening(coarse_graph(graph, fused), target))
