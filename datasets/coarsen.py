"""Coarsening huge graphs: merge ops into groups, solve the small graph, map the answer back.

Two ways to form groups, both contracting one edge at a time on the quotient graph:
* `quickp_fusion` (QuickP's Algorithm 1): never fuse an edge u -> v when u has two or more
  successors and v two or more predecessors; fuse straight-line edges (u's only successor is v
  and v's only predecessor is u); fuse the other edges when one end is cheap (its compute
  cost at most alpha, by default the 90th percentile of the non-zero compute costs), up to an
  optional bound on a group's cost. QuickP's theorem: contracting u -> v creates a cycle
  exactly when another path leads from u to v (`has_other_path`); every contraction is
  checked against it, so the result stays a DAG.
* `heavy_edge_coarsening`: contract the edges carrying the most bytes first, while the quotient
  stays acyclic, until at most `target` groups remain (or no edge can be contracted);
  optionally ranked first by how long the critical path through the merged group gets.

`coarsen_to` chains the two for `regal.optimize --coarsen`, bounded so that the coarse graph
keeps the parallelism a placement needs (unbounded, a random 1,000-op graph lost half its
speed-up on 4 devices: a few groups swallowed most of the work or serialized it).

`coarse_graph` builds the group graph (cost = summed member costs; a tensor read only inside
its group becomes working memory; the others travel in messages, `coarse_tensors`; a transfer
inside a group costs nothing). `expand` maps a coarse placement and order back: every op gets
its group's device, and groups are expanded in order, members topologically.
"""
from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from regal_datasets import analysis, errors
from regal_datasets.graph import Graph


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
  """A DAG under edge contractions (union-find over ops, adjacency between group roots).

  Unlike plain `UnionFind`, a group's root is whichever root absorbed the other (the one with
  more neighbours), not its smallest op; `result` numbers groups by their smallest op."""

  def __init__(self, graph: Graph):
    super().__init__(graph.num_ops)
    self.succ = {op: set(graph.successors(op).tolist()) for op in range(graph.num_ops)}
    self.pred = {op: set(graph.predecessors(op).tolist()) for op in range(graph.num_ops)}
    self.cost = {op: float(c) for op, c in enumerate(graph.compute_cost)}
    self.graph = graph
    self.top: dict[int, float] | None = None  # Levels, once `track_levels` is called.
    self.bottom: dict[int, float] | None = None
    self.tail: dict[int, float] | None = None  # bottom - cost: the successors' largest bottom.
    self.critical_path = np.inf

  def contract(self, u: int, v: int, max_cost: float = np.inf) -> bool:
    """Merges the groups of u and v if they are joined by an edge and no other path, and
    their summed cost is at most `max_cost`."""
    a, b = self.find(u), self.find(v)
    if a == b or b not in self.succ[a] or self.cost[a] + self.cost[b] > max_cost:
      return False
    # Another path needs a second way out of a and a second way into b.
    if (len(self.succ[a]) > 1 and len(self.pred[b]) > 1
        and has_other_path(self.succ, a, b, self.top)):
      return False
    # The group with more neighbours absorbs the other, so relinking costs the smaller degree.
    degree = {node: len(self.succ[node]) + len(self.pred[node]) for node in (a, b)}
    keep, gone = (a, b) if degree[a] >= degree[b] else (b, a)
    self.parent[gone] = keep
    self.cost[keep] = self.cost[a] + self.cost[b]
    del self.cost[gone]
    for adjacency, reverse in ((self.succ, self.pred), (self.pred, self.succ)):
      moved = adjacency.pop(gone)
      for node in moved:
        if node != keep:
          reverse[node].discard(gone)
          reverse[node].add(keep)
      adjacency[keep] |= moved
      adjacency[keep].discard(a)
      adjacency[keep].discard(b)
    if self.top is not None:
      self._update_levels(keep, gone)
    return True

  def track_levels(self) -> None:
    """Starts keeping `top` and `bottom` of every group, groups running whole with free
    transfers: when a group can start at the earliest, and the longest path from its start
    to the end of the graph. `critical_path` is then their largest sum."""
    missing = {node: len(preds) for node, preds in self.pred.items()}
    order = [node for node, count in missing.items() if count == 0]
    for node in order:  # Kahn's algorithm; `order` grows while it is read.
      for succ in self.succ[node]:
        missing[succ] -= 1
        if missing[succ] == 0:
          order.append(succ)
    self.top, self.bottom, self.tail = {}, {}, {}
    for node in order:
      self.top[node] = self._top(node)
    for node in reversed(order):
      self._set_bottom(node)
    self.critical_path = max((self.bottom[node] for node in order), default=0.0)

  def _top(self, node: int) -> float:
    return max((self.top[p] + self.cost[p] for p in self.pred[node]), default=0.0)

  def _set_bottom(self, node: int) -> None:
    self.tail[node] = max((self.bottom[s] for s in self.succ[node]), default=0.0)
    self.bottom[node] = self.cost[node] + self.tail[node]

  def path_through_merge(self, a: int, b: int) -> float:
    """The longest path through the group that contracting a -> b would make: it starts when
    a and b's other predecessors have ended, and goes on along the longest path of a's other
    successors and b's. A maximum over all but one term is the maximum itself unless that
    term attains it, so only then are the neighbours (of merged groups: many) read."""
    top, bottom, cost = self.top, self.bottom, self.cost
    if top[a] + cost[a] < top[b]:
      start = top[b]
    else:
      start = top[a]
      for pred in self.pred[b]:
        if pred != a and top[pred] + cost[pred] > start:
          start = top[pred] + cost[pred]
    if bottom[b] < self.tail[a]:
      tail = self.tail[a]
    else:
      tail = 0.0
      for succ in self.succ[a]:
        if succ != b and bottom[succ] > tail:
          tail = bottom[succ]
    return start + cost[a] + cost[b] + max(tail, self.tail[b])

  def _update_levels(self, keep: int, gone: int) -> None:
    """Levels after a contraction. A merged group ends no earlier and reaches the end no
    sooner than its parts, so levels only grow: push the growth down (tops) and up
    (bottoms) until it stops, lowest level first. A group's new level is at least the level
    it was pushed from, so in that order most groups are final when taken and pushed on
    once (depth first, a group is pushed on again for every longer path that reaches it:
    seven times over on a 20,000-op graph)."""
    for levels in (self.top, self.bottom, self.tail):
      del levels[gone]
    self.top[keep] = self._top(keep)
    self._set_bottom(keep)
    top, tail, bottom, cost = self.top, self.tail, self.bottom, self.cost
    heap = [(top[keep], keep)]
    while heap:  # A group's end grew: its successors may start later.
      level, node = heapq.heappop(heap)
      if level < top[node]:
        continue  # Pushed on again since, with its newer level.
      end = level + cost[node]
      for succ in self.succ[node]:
        if end > top[succ]:
          top[succ] = end
          heapq.heappush(heap, (end, succ))
    heap = [(bottom[keep], keep)]
    while heap:  # A group's path to the end grew: so do its predecessors'.
      level, node = heapq.heappop(heap)
      if level < bottom[node]:
        continue
      for pred in self.pred[node]:
        if level > tail[pred]:
          tail[pred] = level
          bottom[pred] = cost[pred] + level
          heapq.heappush(heap, (bottom[pred], pred))
    self.critical_path = max(self.critical_path, top[keep] + bottom[keep])

  def result(self) -> Coarsening:
    index: dict[int, int] = {}  # Groups numbered in the order of their smallest op.
    group_of = np.array([index.setdefault(self.find(op), len(index))
                         for op in range(self.graph.num_ops)], np.int64)
    members = [[] for _ in index]
    for op in self.graph.topological_order.tolist():
      members[group_of[op]].append(op)
    return Coarsening(group_of=group_of, members=members)


def has_other_path(succ: dict[int, set[int]], u: int, v: int,
                   top: dict[int, float] | None = None) -> bool:
  """Whether v is reachable from u other than by the direct edge u -> v. With `top`, the
  exact top levels of a DAG with non-negative costs, the search skips nodes that start after
  v does: no path from them leads back to v (a margin of 1e-9 absorbs rounding)."""
  limit = np.inf if top is None else top[v] + 1e-9 * abs(top[v]) + 1e-12
  stack = [s for s in succ[u] if s != v and (top is None or top[s] <= limit)]
  seen = set(stack)
  while stack:
    node = stack.pop()
    if node == v:
      return True
    for nxt in succ[node]:
      if nxt not in seen and (top is None or top[nxt] <= limit):
        seen.add(nxt)
        stack.append(nxt)
  return False


def default_alpha(graph: Graph) -> float:
  """The 90th percentile of the non-zero compute costs (0 when every cost is 0)."""
  nonzero = graph.compute_cost[graph.compute_cost > 0]
  return float(np.percentile(nonzero, 90)) if len(nonzero) else 0.0


def quickp_fusion(graph: Graph, alpha: float | None = None,
                  max_group_cost: float = np.inf) -> Coarsening:
  """QuickP's operator fusion (see the module docstring), repeated until nothing fuses.

  `max_group_cost` bounds what the cheap-op rule may build: without it a group keeps
  absorbing cheap neighbours and can end up holding most of the work, which no placement of
  the coarse graph can then spread over devices. Straight-line fusion is never bounded (a
  chain runs one op after another wherever it is placed)."""
  alpha = default_alpha(graph) if alpha is None else alpha
  quotient = _Quotient(graph)
  position = np.empty(graph.num_ops, np.int64)
  position[graph.topological_order] = np.arange(graph.num_ops)
  order = np.argsort(position[graph.edge_src], kind="stable")
  edges = list(zip(graph.edge_src[order].tolist(), graph.edge_dst[order].tolist()))
  changed = True
  while changed:
    changed = False
    for u, v in edges:
      a, b = quotient.find(u), quotient.find(v)
      if a == b or b not in quotient.succ[a]:
        continue
      fan_out, fan_in = len(quotient.succ[a]), len(quotient.pred[b])
      if fan_out >= 2 and fan_in >= 2:
        continue
      if fan_out == 1 and fan_in == 1:
        changed |= quotient.contract(a, b)
      elif min(quotient.cost[a], quotient.cost[b]) <= alpha:
        changed |= quotient.contract(a, b, max_group_cost)
  return quotient.result()


RERANK_TOLERANCE = 1.01


def heavy_edge_coarsening(graph: Graph, target: int,
                          max_critical_path: float = np.inf) -> Coarsening:
  """Contract the heaviest edges first until at most `target` groups remain.

  With a finite `max_critical_path`, merges are ranked first by the longest path through the
  merged group (groups running whole, transfers free; levels kept exact as groups merge),
  counted as the larger of that bound and the current critical path, then by bytes: while
  merges fit, the heaviest edges go first; after that, the merge that lengthens the critical
  path least. Ops that can run side by side thus stay apart as long as the target allows.
  Paths only grow as groups merge, so a ranked merge whose path grew since is re-ranked
  before it may go, unless it is still within RERANK_TOLERANCE of the best (lazy greedy)."""
  if target < 1:
    raise errors.ConfigError(f"coarsening target must be at least 1 group, got {target}")
  quotient = _Quotient(graph)
  weight: dict[tuple[int, int], float] = {}
  for src, dst, size in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(),
                            graph.edge_bytes.tolist()):
    weight[(src, dst)] = max(weight.get((src, dst), 0.0), size)
  bounded = np.isfinite(max_critical_path)
  if bounded:
    quotient.track_levels()

  def rank(a: int, b: int) -> float:
    if not bounded:
      return 0.0
    return max(quotient.path_through_merge(a, b), max_critical_path, quotient.critical_path)

  groups = graph.num_ops
  pending = sorted(weight)
  while groups > target and pending:
    # Contracting other edges can remove the second path that blocked an edge: retry those.
    heap = [(rank(quotient.find(u), quotient.find(v)), -weight[(u, v)], u, v)
            for u, v in pending if quotient.find(u) != quotient.find(v)]
    heapq.heapify(heap)
    blocked, merged = [], 0
    while heap and groups > target:
      _, neg_weight, u, v = heapq.heappop(heap)
      a, b = quotient.find(u), quotient.find(v)
      if a == b or b not in quotient.succ[a]:
        continue
      if bounded:
        fresh = rank(a, b)
        # Within 1% of the best ranked is good enough, and saves most re-ranking.
        if heap and fresh > heap[0][0] * RERANK_TOLERANCE:
          heapq.heappush(heap, (fresh, neg_weight, u, v))
          continue
      if quotient.contract(a, b):
        groups -= 1
        merged += 1
      else:
        blocked.append((u, v))
    if not merged:
      break
    pending = blocked
  return quotient.result()


@dataclasses.dataclass(frozen=True)
class CoarseTensors:
  """How a coarsening regroups tensors. A tensor read only inside its producer's group
  (`message_of` -1) becomes part of that group's working memory; the others travel as
  messages, one per (producer group, set of consumer groups), so every device that needs one
  of a message's tensors needs all of them and the bytes sent per link stay the same.

  message_of [t]: the message of every original tensor (-1: kept inside its group);
  producer [m], size [m] (summed bytes), readers [m]: the consumer groups of each message;
  inner_bytes [g]: bytes of each group's kept-inside tensors."""
  message_of: np.ndarray
  producer: np.ndarray
  size: np.ndarray
  readers: list[list[int]]
  inner_bytes: np.ndarray


def coarse_tensors(graph: Graph, coarsening: Coarsening) -> CoarseTensors:
  group_of = coarsening.group_of
  producer_group = group_of[graph.tensor_producer]
  readers: list[set[int]] = [set() for _ in range(graph.num_tensors)]
  for tensor, consumer in zip(graph.data_edge_tensor.tolist(),
                              graph.data_edge_consumer.tolist()):
    if group_of[consumer] != producer_group[tensor]:
      readers[tensor].add(int(group_of[consumer]))
  message_of = np.full(graph.num_tensors, -1, np.int64)
  index: dict[tuple[int, frozenset[int]], int] = {}
  for tensor, groups in enumerate(readers):
    if groups:
      message_of[tensor] = index.setdefault((int(producer_group[tensor]), frozenset(groups)),
                                            len(index))
  crossing = message_of >= 0
  size = np.bincount(message_of[crossing], weights=graph.tensor_size[crossing],
                     minlength=len(index))
  inner_bytes = np.bincount(producer_group[~crossing], weights=graph.tensor_size[~crossing],
                            minlength=coarsening.num_groups)
  return CoarseTensors(message_of=message_of,
                       producer=np.array([group for group, _ in index], np.int64),
                       size=size, readers=[sorted(groups) for _, groups in index],
                       inner_bytes=inner_bytes)


def coarse_graph(graph: Graph, coarsening: Coarsening) -> Graph:
  """The group graph: one op per group (summed cost; working memory = its largest member's
  plus the tensors that never leave it), one tensor per message (`coarse_tensors`), data
  edges only between groups: a transfer inside a group costs nothing."""
  group_of = coarsening.group_of
  count = coarsening.num_groups
  tensors = coarse_tensors(graph, coarsening)
  cost = np.bincount(group_of, weights=graph.compute_cost, minlength=count)
  extra = np.zeros(count)
  np.maximum.at(extra, group_of, graph.extra_memory)
  edges = [(message, reader) for message, groups in enumerate(tensors.readers)
           for reader in groups]
  control = {(group_of[a], group_of[b]): None for a, b in zip(graph.control_edge_src.tolist(),
                                                              graph.control_edge_dst.tolist())
             if group_of[a] != group_of[b]}
  control_pairs = np.array(list(control), np.int64).reshape(-1, 2)
  names = [f"group{g}:{graph.op_names[members[0]]}" + (f"+{len(members) - 1}"
                                                       if len(members) > 1 else "")
           for g, members in enumerate(coarsening.members)]
  types = [graph.op_types[members[0]] if len(members) == 1 else "group"
           for members in coarsening.members]
  return Graph(op_names=names, op_types=types, compute_cost=cost,
               extra_memory=extra + tensors.inner_bytes,
               tensor_producer=tensors.producer, tensor_size=tensors.size,
               data_edge_tensor=[m for m, _ in edges], data_edge_consumer=[g for _, g in edges],
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


def coarsen_to(graph: Graph, target: int, num_devices: int = 1) -> Coarsening:
  """QuickP fusion, then heavy edges down to at most `target` groups, keeping what a
  placement on `num_devices` needs: the cheap-op rule builds no group above 1/target of the
  work, and the coarse critical path stays within the larger of the fused graph's and
  1/(2 num_devices) of the work (bounds loosen only where nothing else merges)."""
  total_cost = float(graph.compute_cost.sum())
  fused = quickp_fusion(graph, max_group_cost=total_cost / target)
  if fused.num_groups <= target:
    return fused
  fused_graph = coarse_graph(graph, fused)
  budget = max(float(analysis.longest_compute_path(fused_graph)), total_cost / (2 * num_devices))
  return compose(fused, heavy_edge_coarsening(fused_graph, target, max_critical_path=budget))


def coarsen_for_search(graph: Graph, spec: str, num_devices: int = 1) -> Coarsening | None:
  """What `regal.optimize --coarsen` does: "off"; "auto" (graphs above AUTO_THRESHOLD ops,
  down to AUTO_TARGET groups); or a group count K; both by `coarsen_to`. Returns None when the
  graph stays as it is."""
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
  return coarsen_to(graph, target, num_devices)
