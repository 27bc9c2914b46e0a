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

from datasets.analysis import Dependencies
from datasets.graph import Graph
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
