"""GP + DFS, REGAL's stand-in for XLA's placement: partition the graph, then run depth first.

1. A balanced k-way partition (k = device count) of the undirected op graph minimizing the
   bytes on cut edges, by METIS (pymetis): vertex weight = compute cost, edge weight = the
   largest tensor carried between the two ops. Part i goes to device i.
2. A depth-first schedule: when an op is scheduled, its newly ready successors go on top of
   the ready stack, so a chain runs to its end before a sibling starts (XLA's default
   post-order flavour); among ops ready together the lower id runs first.
"""
from __future__ import annotations

import time

import numpy as np

from regal_datasets.analysis import Dependencies
from regal_datasets.graph import Graph
from regal.baselines.common import MethodResult, finish
from regal.scoring import performance

_METIS_SCALE = 1_000_000  # METIS wants integer weights: costs scaled to this many units.


def balanced_partition(graph: Graph, num_parts: int, deps: Dependencies | None = None
                       ) -> np.ndarray:
  """[o] part of each op: balanced by compute cost, few bytes across parts."""
  if num_parts == 1 or graph.num_ops <= 1:
    return np.zeros(graph.num_ops, np.int64)
  if graph.num_ops <= num_parts:  # METIS refuses this; one op per part is the balance.
    return np.arange(graph.num_ops, dtype=np.int64)
  import pymetis  # Imported here: only this method needs METIS.
  deps = deps or Dependencies.of(graph)
  weights: dict[tuple[int, int], float] = {}
  for dst, (preds, sizes) in enumerate(zip(deps.preds, deps.pred_bytes)):
    for src, size in zip(preds, sizes):
      key = (min(src, dst), max(src, dst))
      weights[key] = max(weights.get(key, 0.0), max(size, 0.0))
  adjacency = [[] for _ in range(graph.num_ops)]
  edge_weight = [[] for _ in range(graph.num_ops)]
  top = max(weights.values(), default=0.0) or 1.0
  for (a, b), size in sorted(weights.items()):
    scaled = 1 + int(round(size / top * _METIS_SCALE))  # >= 1: METIS ignores zero weights.
    adjacency[a].append(b)
    edge_weight[a].append(scaled)
    adjacency[b].append(a)
    edge_weight[b].append(scaled)
  cost_top = float(graph.compute_cost.max(initial=0.0)) or 1.0
  vertex_weight = [1 + int(round(c / cost_top * _METIS_SCALE)) for c in graph.compute_cost]
  xadj = np.cumsum([0] + [len(a) for a in adjacency])
  adjncy = [n for row in adjacency for n in row]
  eweights = [w for row in edge_weight for w in row]
  _, parts = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy),
                                vweights=vertex_weight, eweights=eweights)
  return np.asarray(parts, np.int64)


def cut_bytes(graph: Graph, part: np.ndarray) -> float:
  """Bytes on the data edges whose ops are in different parts."""
  part = np.asarray(part)
  data = ~np.asarray(graph.edge_is_control, bool)
  src, dst = np.asarray(graph.edge_src)[data], np.asarray(graph.edge_dst)[data]
  return float(np.asarray(graph.edge_bytes, np.float64)[data][part[src] != part[dst]].sum())


def stage_balanced_split(graph: Graph, num_parts: int, rng: np.random.Generator,
                         restarts: int = 50) -> np.ndarray:
  """[o] part of each op: every stage (a meta-op, else a topological level:
  `enumerative.meta_op_groups`) spread evenly over the parts by its ops that compute, so every
  part works at every stage as data parallelism would (METIS balances the whole graph instead
  and puts whole stages on one part, which serializes them), with few bytes across parts. The
  lowest cut of `restarts` random even spreads, each improved until no swap of two of a
  stage's computing ops between parts and no move of an op that computes nothing (an input)
  lowers the cut (`cut_bytes`)."""
  from regal.baselines import enumerative  # The stages; imported here (enumerative is big).
  if num_parts <= 1 or graph.num_ops == 0:
    return np.zeros(graph.num_ops, np.int64)
  stages, _ = enumerative.meta_op_groups(graph)
  computing = np.asarray(graph.compute_cost) > 0
  stages = [[op for op in stage if computing[op]] for stage in stages]
  stages = [stage for stage in stages if len(stage) > 1]
  free = np.flatnonzero(~computing).tolist()
  data = ~np.asarray(graph.edge_is_control, bool)
  neighbours: list[list[tuple[int, float]]] = [[] for _ in range(graph.num_ops)]
  for a, b, size in zip(np.asarray(graph.edge_src)[data].tolist(),
                        np.asarray(graph.edge_dst)[data].tolist(),
                        np.asarray(graph.edge_bytes, np.float64)[data].tolist()):
    neighbours[a].append((b, size))
    neighbours[b].append((a, size))

  def bytes_to_parts(part: np.ndarray, op: int) -> np.ndarray:
    to_part = np.zeros(num_parts)
    for other, size in neighbours[op]:
      to_part[part[other]] += size
    return to_part

  tolerance = 1e-9 * float(np.asarray(graph.edge_bytes, np.float64)[data].sum())  # No cycling.
  best, best_cut = None, np.inf
  for _ in range(restarts):
    part = rng.integers(num_parts, size=graph.num_ops)
    for stage in stages:
      part[np.asarray(stage)[rng.permutation(len(stage))]] = np.arange(len(stage)) % num_parts
    improved = True
    while improved:
      improved = False
      for op in free:
        to_part = bytes_to_parts(part, op)
        if to_part.max() > to_part[part[op]] + tolerance:
          part[op] = int(np.argmax(to_part))
          improved = True
      for stage in stages:
        for i, a in enumerate(stage):
          for b in stage[i + 1:]:
            pa, pb = part[a], part[b]
            if pa == pb:
              continue
            between = sum(size for other, size in neighbours[a] if other == b)
            to_a, to_b = bytes_to_parts(part, a), bytes_to_parts(part, b)
            if to_a[pb] - to_a[pa] + to_b[pa] - to_b[pb] - 2 * between > tolerance:
              part[a], part[b] = pb, pa
              improved = True
    cut = cut_bytes(graph, part)
    if cut < best_cut:
      best, best_cut = part.copy(), cut
  return best


def depth_first_order(graph: Graph, deps: Dependencies | None = None) -> np.ndarray:
  """A topological order that follows each newly ready successor before older ready ops."""
  deps = deps or Dependencies.of(graph)
  missing = np.array([len(p) for p in deps.preds])
  stack = [op for op in range(graph.num_ops) if missing[op] == 0][::-1]
  order = []
  while stack:
    op = stack.pop()
    order.append(op)
    newly_ready = []
    for succ in deps.succs[op]:
      missing[succ] -= 1
      if missing[succ] == 0:
        newly_ready.append(succ)
    stack.extend(newly_ready[::-1])  # The lowest id ends on top.
  return np.asarray(order, np.int64)


def gp_dfs(problem: performance.Problem) -> MethodResult:
  started = time.perf_counter()
  deps = Dependencies.of(problem.graph)
  placement = balanced_partition(problem.graph, problem.devices.num_devices, deps)
  order = depth_first_order(problem.graph, deps)
  return finish("gp_dfs", problem, placement, order, started)
