"""The ordered delay model as a compiled host loop: the delay model's scorer on a CPU.

Semantics: exactly those of `regal.scoring.delay.reference.simulate_delay` with op priorities (the
priority-driven topological order, then each op as early as its device and inputs allow), in
float32 with the same operations in the same order, so it agrees bit for bit with the
reference run in float32 and with `regal.scoring.delay.batched` (the JAX version, for accelerators).
The order is kept in a binary heap of (priority, id) keys (`wc.native`'s), so one chromosome
costs O((o + K) log o) instead of the JAX scan's O(o^2).
"""
from __future__ import annotations

import dataclasses
import heapq

import numba
import numpy as np

from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring import native_common
from regal.scoring.delay.batched import build_delay_graph
from regal.scoring.native_common import heap_key, heap_pop, heap_push, link_time


@dataclasses.dataclass(frozen=True)
class NativeDelayGraph:
  """Distinct dependencies as CSR arrays (float32 times, as the other delay models)."""
  cost: np.ndarray  # [O] float32
  in_degree: np.ndarray  # [O] int32 distinct predecessors
  preds_ptr: np.ndarray  # [O + 1]
  preds: np.ndarray  # [K] predecessor ids
  pred_bytes: np.ndarray  # [K] float32 largest tensor read from it; -1: control only
  succs_ptr: np.ndarray  # [O + 1]
  succs: np.ndarray
  speed: np.ndarray  # [D] float32
  bandwidth: np.ndarray  # [D, D] float32 (diagonal 1)
  latency: np.ndarray  # [D, D] float32

  @property
  def num_ops(self) -> int:
    return self.cost.shape[0]

  @property
  def num_devices(self) -> int:
    return self.speed.shape[0]


def build_native_delay_graph(graph: Graph, devices: DeviceSpec) -> NativeDelayGraph:
  padded = build_delay_graph(graph, devices, np.float32)
  ptr = lambda counts: np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)  # noqa: E731
  succ_valid = padded.succ_index < graph.num_ops
  return NativeDelayGraph(
      cost=padded.cost, in_degree=padded.in_degree, preds_ptr=ptr(padded.pred_mask.sum(1)),
      preds=padded.pred_index[padded.pred_mask].astype(np.int32),
      pred_bytes=np.ascontiguousarray(padded.pred_bytes[padded.pred_mask], np.float32),
      succs_ptr=ptr(succ_valid.sum(1)), succs=padded.succ_index[succ_valid].astype(np.int32),
      speed=padded.speed, bandwidth=np.ascontiguousarray(padded.bandwidth),
      latency=np.ascontiguousarray(padded.latency))


@numba.njit(inline="always")
def reset_ready(in_degree, bits, heap, heap_size, missing, free):
  """A fresh list-scheduling pass: every device free at 0, every op waiting for its
  predecessors, the sources in the ready heap (by priority `bits`, ties to the lower id)."""
  num_ops = in_degree.shape[0]
  heap_size[0] = 0
  for d in range(free.shape[0]):
    free[d] = np.float32(0)
  for v in range(num_ops):
    missing[v] = in_degree[v]
    if missing[v] == 0:
      heap_push(heap, heap_size, num_ops, 0, heap_key(bits[v], v))


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _simulate(cost, in_degree, preds_ptr, preds, pred_bytes, succs_ptr, succs, speed, bandwidth,
              latency, placement, priority_bits, makespan_out, end_out):
  population, num_ops = placement.shape
  num_devices = speed.shape[0]
  heap = np.empty(num_ops, np.int64)
  heap_size = np.zeros(1, np.int64)
  missing = np.empty(num_ops, np.int32)
  end = np.empty(num_ops, np.float32)
  free = np.empty(num_devices, np.float32)
  record = end_out.shape[0] > 0
  for p in range(population):
    place = placement[p]
    bits = priority_bits[p]
    reset_ready(in_degree, bits, heap, heap_size, missing, free)
    makespan = np.float32(0)
    while heap_size[0] > 0:
      op = np.int32(heap_pop(heap, heap_size, num_ops, 0) & 0x7FFFFFFF)
      device = place[op]
      ready = np.float32(0)
      for k in range(preds_ptr[op], preds_ptr[op + 1]):
        src = preds[k]
        arrival = end[src]
        if place[src] != device and pred_bytes[k] >= 0:
          arrival = arrival + link_time(latency, bandwidth, pred_bytes[k], place[src], device)
        ready = max(ready, arrival)
      duration = cost[op] / speed[device]
      start = max(free[device], ready) if duration > 0 else ready
      end[op] = start + duration
      if duration > 0:
        free[device] = end[op]
      makespan = max(makespan, end[op])
      for k in range(succs_ptr[op], succs_ptr[op + 1]):
        succ = succs[k]
        missing[succ] -= 1
        if missing[succ] == 0:
          heap_push(heap, heap_size, num_ops, 0, heap_key(bits[succ], succ))
    makespan_out[p] = makespan
    if record:
      for v in range(num_ops):
        end_out[p, v] = end[v]


def simulate(graph: NativeDelayGraph, placement: np.ndarray, op_priority: np.ndarray,
             threads: int | None = None, record_times: bool = False):
  """Makespans [P] (float32) of placements and priorities [P, O]; with `record_times` also
  the op ends [P, O]. The population is split over `threads` (default: every core)."""
  placement = native_common.placement_argument(placement, graph.num_ops, graph.num_devices)
  priority_bits = native_common.argument(op_priority, np.float32).view(np.int32)
  if priority_bits.shape != placement.shape:
    raise ValueError(f"op priorities must be [P, {graph.num_ops}] like the placements")
  population = placement.shape[0]
  makespan = np.empty(population, np.float32)
  end = np.full((population, graph.num_ops) if record_times else (0, 0), np.nan, np.float32)

  def run(rows: slice) -> None:
    _simulate(graph.cost, graph.in_degree, graph.preds_ptr, graph.preds, graph.pred_bytes,
              graph.succs_ptr, graph.succs, graph.speed, graph.bandwidth, graph.latency,
              placement[rows], priority_bits[rows], makespan[rows],
              end[rows] if record_times else end)

  native_common.run_split(run, population, threads)
  return (makespan, end) if record_times else makespan


def priority_topological_order(graph: Graph, op_priority: np.ndarray) -> np.ndarray:
  """`delay.reference.priority_topological_order` compiled, the same order for the same float64
  priorities (ties to the lower id): the learned prior's features order five heuristic seeds per
  call with it (its cost in Python: experiments/results/issue82/README.md)."""
  num_ops = graph.num_ops
  edges = np.unique(np.asarray(graph.edge_src, np.int64) * num_ops
                    + np.asarray(graph.edge_dst, np.int64))  # Distinct, by source.
  src, dst = edges // max(num_ops, 1), edges % max(num_ops, 1)
  succs_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=num_ops))])
  in_degree = np.bincount(dst, minlength=num_ops).astype(np.int64)
  return _priority_order(succs_ptr.astype(np.int64), dst, in_degree,
                         np.asarray(op_priority, np.float64))


@numba.njit(cache=True)
def _priority_order(succs_ptr, succs, in_degree, priority):
  num_ops = in_degree.shape[0]
  missing = in_degree.copy()
  heap = [(0.0, np.int64(0)) for _ in range(0)]
  for v in range(num_ops):
    if missing[v] == 0:
      heap.append((-priority[v], np.int64(v)))
  heapq.heapify(heap)
  order = np.empty(num_ops, np.int64)
  taken = 0
  while len(heap) > 0:
    _, op = heapq.heappop(heap)
    order[taken] = op
    taken += 1
    for k in range(succs_ptr[op], succs_ptr[op + 1]):
      succ = succs[k]
      missing[succ] -= 1
      if missing[succ] == 0:
        heapq.heappush(heap, (-priority[succ], np.int64(succ)))
  return order[:taken]
