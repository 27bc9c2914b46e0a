"""A PipeDream-style contiguous partitioner for pipeline max-load: the co-location units in
one topological order, cut into consecutive runs, one per accelerator (and at most one on the
CPU side), by dynamic programming over cut points (PipeDream's optimizer, Narayanan et al.,
SOSP 2019, partitions a layer chain this way).

Where the unit order is a chain (a layer graph of BERT) this is the optimal contiguous split;
on a graph with branches it sees only the splits that cut the one order it was given, a
subset of the contiguous splits `pipeline_dp` enumerates, so it is a heuristic there. It takes
O(n^2 (k + E)) time for n units, k accelerators and E edges, against the ideals' count of the
exact DP, so it is the start the search uses on any graph.

    best[k][j][c] = min over i < j of max(best[k - 1][i][c], load(run i..j))   (accelerator)
                    or max(best[k][i][0], CPU time of run i..j)  with c = 1     (CPU side)

A run's load is `regal.scoring.throughput.reference`'s accelerator load of its ops (compute, outputs
sent out once, outside outputs received once); a run over the memory cap is infeasible.
"""
from __future__ import annotations

import dataclasses
import functools
import time

import numba
import numpy as np

from regal_datasets.formats.profiled import CPU, Workload
from regal.baselines import pipeline_dp
from regal.scoring.throughput import reference as pipeline


@dataclasses.dataclass(frozen=True)
class LinearSplit:
  device: np.ndarray  # [o] accelerator of each op, or CPU
  max_load: float  # inf: no split of the order fits the memory caps
  units: int
  seconds: float


@numba.njit(cache=True)
def _run_loads(position, src, dst, output_cost, unit_compute, num_units):
  """load[i, j]: the accelerator load of the run of units i..j-1 (upper triangle)."""
  load = np.full((num_units + 1, num_units + 1), np.inf)
  num_ops = position.shape[0]
  sent = np.full(num_ops, -1, np.int64)
  received = np.full(num_ops, -1, np.int64)
  stamp = 0
  for i in range(num_units):
    compute = 0.0
    for j in range(i + 1, num_units + 1):
      compute += unit_compute[j - 1]
      stamp += 1
      total = compute
      for e in range(src.shape[0]):
        u, v = src[e], dst[e]
        inside_u = i <= position[u] < j
        inside_v = i <= position[v] < j
        if inside_u and not inside_v and sent[u] != stamp:
          sent[u] = stamp
          total += output_cost[u]
        elif inside_v and not inside_u and received[u] != stamp:
          received[u] = stamp
          total += output_cost[u]
      load[i, j] = total
  return load


@numba.njit(cache=True)
def _cut(run_load, run_memory, run_cpu, fixed_cpu, accelerators, has_cpu, cap):
  """best[k, j, c] and the cut it came from (choice: i, and 1 when the run went to the CPU)."""
  n = run_load.shape[0] - 1
  best = np.full((accelerators + 1, n + 1, 2), np.inf)
  came_from = np.full((accelerators + 1, n + 1, 2), -1, np.int64)
  on_cpu = np.zeros((accelerators + 1, n + 1, 2), np.bool_)
  best[0, 0, 0] = 0.0
  for k in range(accelerators + 1):
    for j in range(1, n + 1):
      for c in range(2):
        if k > 0:  # The run i..j on accelerator k.
          for i in range(j):
            if run_memory[i, j] > cap:
              continue
            value = max(best[k - 1, i, c], run_load[i, j])
            if value < best[k, j, c]:
              best[k, j, c] = value
              came_from[k, j, c] = i
              on_cpu[k, j, c] = False
        if c == 1 and has_cpu:  # The run i..j on the CPU side.
          for i in range(j):
            value = max(best[k, i, 0], fixed_cpu + run_cpu[i, j])
            if value < best[k, j, c]:
              best[k, j, c] = value
              came_from[k, j, c] = i
              on_cpu[k, j, c] = True
  return best, came_from, on_cpu


@numba.njit(cache=True)
def _cut_for_latency(run_load, run_memory, run_cpu, accelerators, has_cpu, cap):
  """total[k, j]: the least sum of run times over cuts of the first j units into runs on k
  distinct accelerators (a run's load) and any number of CPU runs (its CPU time), and the cut
  it came from."""
  n = run_load.shape[0] - 1
  total = np.full((accelerators + 1, n + 1), np.inf)
  came_from = np.full((accelerators + 1, n + 1), -1, np.int64)
  on_cpu = np.zeros((accelerators + 1, n + 1), np.bool_)
  total[0, 0] = 0.0
  for k in range(accelerators + 1):
    for j in range(1, n + 1):
      for i in range(j):
        if k > 0 and run_memory[i, j] <= cap:
          value = total[k - 1, i] + run_load[i, j]
          if value < total[k, j]:
            total[k, j], came_from[k, j], on_cpu[k, j] = value, i, False
        if has_cpu:
          value = total[k, i] + run_cpu[i, j]
          if value < total[k, j]:
            total[k, j], came_from[k, j], on_cpu[k, j] = value, i, True
  return total, came_from, on_cpu


def _place_runs(device: np.ndarray, order: list[np.ndarray],
                runs: list[tuple[int, int, bool]]) -> None:
  """Puts the runs (i, j, on the CPU), read back from the last, on accelerators 0, 1, ... in
  order (CPU runs stay on the CPU side), in place."""
  accelerator = 0
  for i, j, cpu_run in reversed(runs):
    if not cpu_run:
      for members in order[i:j]:
        device[members] = accelerator
      accelerator += 1


@functools.lru_cache(maxsize=4)  # The latency search draws an order every other round.
def _unit_readers(workload: Workload) -> tuple[list[list[int]], list[int]]:
  """Each unit's readers and how many units each waits for (from the units' bitmasks)."""
  units = pipeline_dp.units_of(workload)
  count = len(units.members)
  readers: list[list[int]] = [[] for _ in range(count)]
  waiting = [0] * count
  for unit, mask in enumerate(units.pred_mask):
    for pred in range(count):
      if mask >> pred & 1:
        readers[pred].append(unit)
        waiting[unit] += 1
  return readers, waiting


def random_unit_order(workload: Workload, seed: int) -> list[np.ndarray]:
  """The units in a random topological order (Kahn's algorithm, ready units taken by random
  keys): another order to cut, so other contiguous splits."""
  import heapq
  units = pipeline_dp.units_of(workload)
  count = len(units.members)
  readers, waiting_before = _unit_readers(workload)
  waiting = list(waiting_before)
  key = np.random.default_rng(seed).random(count)
  ready = [(key[u], u) for u in range(count) if waiting[u] == 0]
  heapq.heapify(ready)
  order = []
  while ready:
    _, unit = heapq.heappop(ready)
    order.append(units.members[unit])
    for reader in readers[unit]:
      waiting[reader] -= 1
      if waiting[reader] == 0:
        heapq.heappush(ready, (key[reader], reader))
  return order


def unit_order(workload: Workload) -> list[np.ndarray]:
  """The co-location units (classes an accelerator runs, merged where the forward order has a
  cycle) in `pipeline_dp`'s topological order: each unit's ops."""
  return pipeline_dp.units_of(workload).members


def _runs_of_order(workload: Workload, order: list[np.ndarray]):
  """(position [o], run_load, run_memory, run_cpu [n + 1, n + 1], fixed CPU time) of `order`."""
  n = len(order)
  position = np.full(workload.num_ops, -1, np.int64)
  for u, members in enumerate(order):
    position[members] = u
  graph = workload.graph
  src = graph.tensor_producer[graph.data_edge_tensor].astype(np.int64)
  dst = graph.data_edge_consumer.astype(np.int64)
  compute = np.array([workload.accelerator_latency[m].sum() for m in order], np.float64)
  prefix = lambda values: np.concatenate([[0.0], np.cumsum(values)])  # noqa: E731
  memory = prefix([workload.memory[m].sum() for m in order])
  cpu = prefix([workload.cpu_latency[m].sum() for m in order])
  run_load = _run_loads(position, src, dst, workload.output_cost.astype(np.float64), compute,
                        n) if n else np.zeros((1, 1))
  return (position, run_load, memory[None, :] - memory[:, None], cpu[None, :] - cpu[:, None],
          float(workload.cpu_latency[position < 0].sum()))


def for_latency(workload: Workload, order: list[np.ndarray] | None = None) -> LinearSplit:
  """A split for single-sample latency (`regal.scoring.blocks`): the cut of `order` into
  consecutive runs, each on its own accelerator or on the CPU side, with the least sum of run
  times (an accelerator run's load, a CPU run's CPU time). Runs of one order are contiguous
  blocks, unless a co-location class holds both ends of a path through another run (a
  forward op and its backward op around the ops between them): then the blocks wait on each
  other and `max_load` here (`blocks.latency`) is inf. Otherwise the sum is the latency were
  the runs to run one after another, an upper bound on the split's latency, which `max_load`
  reports."""
  from regal.scoring.blocks import reference as blocks
  started = time.perf_counter()
  order = unit_order(workload) if order is None else order
  position, run_load, run_memory, run_cpu, _ = _runs_of_order(workload, order)
  device = np.full(workload.num_ops, CPU, np.int64)
  n = len(order)
  total, came_from, on_cpu = _cut_for_latency(run_load, run_memory, run_cpu,
                                              workload.max_accelerators,
                                              workload.max_cpus > 0,
                                              float(workload.accelerator_memory))
  k = int(np.argmin(total[:, n]))
  if not np.isfinite(total[k, n]):
    return LinearSplit(device, np.inf, n, time.perf_counter() - started)
  runs, j = [], n
  while j > 0:
    i, cpu_run = int(came_from[k, j]), bool(on_cpu[k, j])
    runs.append((i, j, cpu_run))
    k -= not cpu_run
    j = i
  _place_runs(device, order, runs)
  return LinearSplit(device=device, max_load=blocks.latency(workload, device), units=n,
                     seconds=time.perf_counter() - started)


def partition(workload: Workload, order: list[np.ndarray] | None = None) -> LinearSplit:
  """The best split of `order` (units, each an array of ops; default `unit_order`) into
  consecutive runs; the ops no unit holds (a CPU-only op's class) go to the CPU side."""
  started = time.perf_counter()
  order = unit_order(workload) if order is None else order
  n = len(order)
  position, run_load, run_memory, run_cpu, fixed_cpu = _runs_of_order(workload, order)
  device = np.full(workload.num_ops, CPU, np.int64)
  if n == 0:
    return LinearSplit(device, fixed_cpu, 0, time.perf_counter() - started)
  best, came_from, on_cpu = _cut(run_load, run_memory, run_cpu, fixed_cpu,
                                 workload.max_accelerators, workload.max_cpus > 0,
                                 float(workload.accelerator_memory))
  k = workload.max_accelerators
  finals = [max(best[:, n, c].min(), fixed_cpu) for c in (0, 1)]
  c = int(np.argmin(finals))
  if not np.isfinite(finals[c]):
    return LinearSplit(device, np.inf, n, time.perf_counter() - started)
  k = int(np.argmin(best[:, n, c]))
  runs, j = [], n
  while j > 0:
    i, cpu_run = int(came_from[k, j, c]), bool(on_cpu[k, j, c])
    runs.append((i, j, cpu_run))
    if cpu_run:
      c = 0
    else:
      k -= 1
    j = i
  _place_runs(device, order, runs)
  return LinearSplit(device=device, max_load=pipeline.max_load(workload, device), units=n,
                     seconds=time.perf_counter() - started)
