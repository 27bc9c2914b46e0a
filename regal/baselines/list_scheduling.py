"""List scheduling under the delay model: critical path (Kwok & Ahmad 1999) and HEFT.

**Delay model** (what list schedulers, the Enumerative Optimizer and CP-SAT plan with; the
Doppler simulator's communication semantics): op v on device d takes cost / speed[d]; a device
runs one op at a time; v may start once every predecessor u has finished and, for a data edge
u -> v across devices, its tensor has arrived: end(u) + latency + bytes / bandwidth (tensors
travel independently and never contend; control edges deliver at end(u)). Every performance
model's schedule is feasible in the delay model, so its optimum bounds them all from below.
An op of zero time occupies no device time (it never waits for its device), as a zero-length
interval in CP-SAT.

The heuristics return a placement and an op order; the performance model then decides the
real timing (`regal.baselines.common.finish`).
"""
from __future__ import annotations

import heapq
import itertools
import time

import numpy as np

from regal_datasets import analysis
from regal_datasets.analysis import Dependencies
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.baselines.common import MethodResult, finish
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.delay import reference as delay_reference


def simulate_in_order(graph: Graph, devices: DeviceSpec, placement: np.ndarray,
                      order: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
  """The delay model (`regal.scoring.delay.reference.simulate_delay`) with each device running its
  ops in `order`, a topological order: (makespan, start [o], end [o])."""
  schedule = delay_reference.simulate_delay(graph, devices, placement,
                                            chromosome_lib.order_priorities(order))
  return float(schedule.makespan), schedule.op_start, schedule.op_end


def critical_path_assignment(graph: Graph, devices: DeviceSpec, doppler_repository: bool = False
                             ) -> tuple[np.ndarray, np.ndarray]:
  """Kwok & Ahmad's critical-path list scheduling, the teacher of Doppler's stage I.

  Repeatedly take the ready op of largest bottom level (ties: the earliest to become ready)
  and put it on the device where it can start earliest (after the last op already there and
  after its inputs arrive; ties: the lower device id). Returns (placement, selection order).

  `doppler_repository=True` reproduces the Doppler repository's code (xinyuyao/Doppler,
  `cp_node_selection` and `env.Env`), whose makespans the papers' tables quote, with its two
  quirks: it picks a random index into the list of tied largest bottom levels but uses it on
  the ready list, so with ties to the first it always takes the earliest-ready op; and an
  op's recorded start on a device is the compute already assigned there, ignoring waits for
  inputs, so later earliest-start estimates run early.
  """
  deps = Dependencies.of(graph)
  level = analysis.mean_bottom_levels(graph, devices, deps)
  missing = np.array([len(p) for p in deps.preds])
  # Ready ops keyed (negated level or, for the repository, nothing; when it became ready).
  ready: list[tuple[float, int, int]] = []
  became_ready = itertools.count()

  def make_ready(op: int) -> None:
    heapq.heappush(ready, (0.0 if doppler_repository else -level[op], next(became_ready), op))

  for op in range(graph.num_ops):
    if missing[op] == 0:
      make_ready(op)
  placement = np.full(graph.num_ops, -1, np.int64)
  end = np.zeros(graph.num_ops)
  device_free = np.zeros(devices.num_devices)
  assigned_compute = np.zeros(devices.num_devices)
  order = []
  while ready:
    op = heapq.heappop(ready)[2]
    starts = [max(device_free[d],
                  delay_reference.input_ready_time(op, d, placement, end, deps, devices))
              for d in range(devices.num_devices)]
    device = int(np.argmin(starts))
    duration = graph.compute_cost[op] / devices.speed[device]
    placement[op] = device
    start = assigned_compute[device] if doppler_repository else starts[device]
    end[op] = start + duration
    assigned_compute[device] += duration
    device_free[device] = end[op]
    order.append(op)
    for succ in deps.succs[op]:
      missing[succ] -= 1
      if missing[succ] == 0:
        make_ready(succ)
  return placement, np.asarray(order, np.int64)


def heft_assignment(graph: Graph, devices: DeviceSpec) -> tuple[np.ndarray, np.ndarray]:
  """HEFT (Topcuoglu et al. 2002): ops by decreasing upward rank, each on the device of
  earliest finish time, allowed into an idle gap between ops already there (insertion).
  Returns (placement, ops ordered by planned start time)."""
  deps = Dependencies.of(graph)
  rank = analysis.mean_bottom_levels(graph, devices, deps)
  topo_position = np.empty(graph.num_ops, np.int64)
  topo_position[graph.topological_order] = np.arange(graph.num_ops)
  # Zero-cost ops can tie with their successors: the topological position keeps it valid.
  by_rank = np.lexsort((topo_position, -rank))
  placement = np.full(graph.num_ops, -1, np.int64)
  start = np.zeros(graph.num_ops)
  end = np.zeros(graph.num_ops)
  # Each device's busy intervals, sorted by (start, end); they never overlap, so the ends
  # are sorted too.
  starts = [np.zeros(0) for _ in range(devices.num_devices)]
  ends = [np.zeros(0) for _ in range(devices.num_devices)]
  for op in by_rank.tolist():
    best = None
    for device in range(devices.num_devices):
      duration = graph.compute_cost[op] / devices.speed[device]
      ready = delay_reference.input_ready_time(op, device, placement, end, deps, devices)
      slot = _earliest_gap(starts[device], ends[device], ready, duration)
      if best is None or slot + duration < best[0]:
        best = (slot + duration, slot, device)
    finish_time, slot, device = best
    placement[op], start[op], end[op] = device, slot, finish_time
    # After every interval that sorts before or equal to (slot, finish_time), as bisect.insort.
    low, high = np.searchsorted(starts[device], slot, "left"), np.searchsorted(
        starts[device], slot, "right")
    position = low + np.searchsorted(ends[device][low:high], finish_time, "right")
    starts[device] = np.insert(starts[device], position, slot)
    ends[device] = np.insert(ends[device], position, finish_time)
  order = np.lexsort((topo_position, start))
  return placement, order


def _earliest_gap(starts: np.ndarray, ends: np.ndarray, ready: float, duration: float) -> float:
  """The earliest time >= ready where `duration` fits between the busy intervals [starts,
  ends] (sorted, not overlapping): the first interval k whose start leaves room after the
  later of ready and interval k - 1's end, else after the last. Intervals ending by `ready`
  leave no gap that the later ones would not, so the search starts past them (bit for bit
  the scan of every interval: `test_heft_gap_search_matches_a_scan_and_a_slow_search`)."""
  first = int(np.searchsorted(ends, ready, "right"))
  if first == len(ends):
    return ready
  candidates = np.maximum(ready, np.concatenate(([ready], ends[first:-1])))
  fits = candidates + duration <= starts[first:]
  k = int(np.argmax(fits))
  return float(candidates[k]) if fits[k] else max(ready, float(ends[-1]))


def critical_path(problem: performance.Problem) -> MethodResult:
  started = time.perf_counter()
  placement, order = critical_path_assignment(problem.graph, problem.devices)
  planned, _, _ = simulate_in_order(problem.graph, problem.devices, placement, order)
  return finish("critical_path", problem, placement, order, started, planned_makespan=planned)


def critical_path_doppler(problem: performance.Problem) -> MethodResult:
  """The Doppler repository's critical-path code, quirks included (the papers' anchors)."""
  started = time.perf_counter()
  placement, order = critical_path_assignment(problem.graph, problem.devices,
                                              doppler_repository=True)
  return finish("critical_path_doppler", problem, placement, order, started)


def heft(problem: performance.Problem) -> MethodResult:
  started = time.perf_counter()
  placement, order = heft_assignment(problem.graph, problem.devices)
  planned, _, _ = simulate_in_order(problem.graph, problem.devices, placement, order)
  return finish("heft", problem, placement, order, started, planned_makespan=planned)
