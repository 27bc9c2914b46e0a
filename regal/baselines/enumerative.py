"""The Enumerative Optimizer (Doppler appendix B, Algorithm 4).

Sharded graphs decompose each original operation (a meta-op) into shard ops and reduce ops.
The optimizer walks the meta-op groups in topological order and, for each group, tries every
permutation of devices over its members (member i gets permutation[i mod D] when the group is
larger than the device set), costs the ops placed so far with the delay model
(`list_scheduling`: transfers cost latency + bytes / bandwidth across devices), and keeps the
cheapest permutation (ties: the first tried) before moving to the next group.

Groups come from the graph's metadata: `meta_op` (one meta-op name per op) and optionally
`meta_op_role` ("shard" / "reduce" per op; shards and reduces of a meta-op are separate
groups). Graphs without that information are grouped by topological level (longest path from
a source), and the result says so in `details["grouping"]`.
"""
from __future__ import annotations

import itertools
import math
import time

import numpy as np

from regal_datasets import analysis
from regal_datasets.analysis import Dependencies
from regal_datasets.graph import Graph
from regal.baselines.common import MethodResult, finish
from regal.scoring import performance
from regal.scoring.delay import reference as delay_reference

MAX_PERMUTATIONS = 5040  # Beyond 7! permutations per group, a seeded sample of this many.


def _groups_from_labels(graph: Graph, labels: list) -> list[list[int]] | None:
  """Groups of ops sharing a label, in a topological order of the group graph, or None if
  the groups depend on each other in a cycle."""
  index: dict = {}
  group_of = np.array([index.setdefault(label, len(index)) for label in labels])
  members = [[] for _ in index]
  for op in graph.topological_order.tolist():
    members[group_of[op]].append(op)
  succ = [set() for _ in index]
  indegree = np.zeros(len(index), np.int64)
  for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    a, b = group_of[src], group_of[dst]
    if a != b and b not in succ[a]:
      succ[a].add(b)
      indegree[b] += 1
  position = np.empty(graph.num_ops, np.int64)
  position[graph.topological_order] = np.arange(graph.num_ops)
  first_position = {g: int(position[m].min()) for g, m in enumerate(members)}
  ready = sorted((g for g in range(len(index)) if indegree[g] == 0), key=first_position.get)
  order = []
  while ready:
    group = ready.pop(0)
    order.append(group)
    for nxt in sorted(succ[group], key=first_position.get):
      indegree[nxt] -= 1
      if indegree[nxt] == 0:
        ready.append(nxt)
    ready.sort(key=first_position.get)
  if len(order) < len(index):
    return None
  return [members[g] for g in order]


def meta_op_groups(graph: Graph) -> tuple[list[list[int]], str]:
  """(groups of ops in topological order, where they came from)."""
  meta = graph.metadata.get("meta_op")
  if meta is not None and len(meta) == graph.num_ops:
    roles = graph.metadata.get("meta_op_role") or [""] * graph.num_ops
    groups = _groups_from_labels(graph, [(str(m), str(r)) for m, r in zip(meta, roles)])
    if groups is not None:
      return groups, "meta_op"
  level = analysis.top_levels(graph, np.ones(graph.num_ops)).astype(np.int64)  # depth
  return _groups_from_labels(graph, level.tolist()), "topological level"


def _candidates(size: int, num_devices: int, rng: np.random.Generator):
  """Device permutations for a group of `size` members (member i: perm[i mod D])."""
  width = min(size, num_devices)
  count = math.perm(num_devices, width)
  if count <= MAX_PERMUTATIONS:
    perms = itertools.permutations(range(num_devices), width)
  else:
    perms = (tuple(rng.permutation(num_devices)[:width]) for _ in range(MAX_PERMUTATIONS))
  for perm in perms:
    yield [perm[i % width] for i in range(size)]


def enumerative_assignment(graph: Graph, devices, seed: int = 0
                           ) -> tuple[np.ndarray, np.ndarray, dict]:
  deps = Dependencies.of(graph)
  groups, grouping = meta_op_groups(graph)
  roles = graph.metadata.get("meta_op_role") if grouping == "meta_op" else None
  # Input shards are data already in place: they go where their first reader goes.
  is_input = [roles is not None and roles[group[0]] == "input" for group in groups]
  rng = np.random.default_rng(seed)
  placement = np.full(graph.num_ops, -1, np.int64)
  end = np.zeros(graph.num_ops)
  device_free = np.zeros(devices.num_devices)
  makespan, tried = 0.0, 0
  for group in (g for g, skip in zip(groups, is_input) if not skip):
    best = None
    for assignment in _candidates(len(group), devices.num_devices, rng):
      tried += 1
      trial_free = device_free.copy()
      touched = []  # Ops this candidate places, undone before the next one.
      for op, device in zip(group, assignment):
        placement[op] = device
        touched.append(op)
        for pred in deps.preds[op]:
          if placement[pred] < 0:  # An unplaced input: it will sit here.
            placement[pred] = device
            touched.append(pred)
        start = max(trial_free[device],
                    delay_reference.input_ready_time(op, device, placement, end, deps, devices))
        end[op] = start + graph.compute_cost[op] / devices.speed[device]
        trial_free[device] = end[op]
      cost = max([makespan] + [end[op] for op in group])
      if best is None or cost < best[0]:
        best = (cost, assignment, trial_free, end[group].copy(), placement.copy())
      placement[touched] = -1
    makespan, assignment, device_free, group_end, placement = best
    end[group] = group_end
  placement[placement < 0] = 0  # Inputs nobody reads.
  order = np.concatenate([np.asarray(g, np.int64) for g in groups]) if groups else np.zeros(0)
  return placement, order.astype(np.int64), {"grouping": grouping, "groups": len(groups),
                                             "candidates_tried": tried,
                                             "planned_makespan": float(makespan)}


def enumerative(problem: performance.Problem, seed: int = 0) -> MethodResult:
  started = time.perf_counter()
  placement, order, details = enumerative_assignment(problem.graph, problem.devices, seed)
  return finish("enumerative", problem, placement, order, started, **details)
