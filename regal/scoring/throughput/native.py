"""Pipeline max-load (`regal.scoring.throughput.reference`) on the host, compiled, for local search:
every move of one co-location class to another device scored by what it changes.

Devices are slots here: accelerators 0..A-1 and the CPU side A. An op's part of the loads
depends on its own slot and its readers' slots only (its latency where it runs; its output cost
once on its accelerator when some reader is elsewhere, and once on each other accelerator that
reads it). So moving a class changes the parts of its own ops and of the ops that feed them,
and nothing else: a move is scored by taking those parts out of the loads and putting them
back with the class moved. Scores are lexicographic: the max-load, then the sum of squared
loads (so that moves on a plateau of equal max-loads still count when they relieve the other
busy devices).

`max_load` here equals `pipeline.max_load` (tests check it); the descent's loads are
recomputed in full after each move taken, so no rounding accumulates.
"""
from __future__ import annotations

import dataclasses
import functools

import numba
import numpy as np

from regal_datasets.formats.profiled import CPU, Workload

_RELATIVE = 1e-12  # A score must beat another by more than this (relative) to count.


@dataclasses.dataclass(frozen=True)
class PipelineArrays:
  """A workload as flat arrays (CSR lists; slot A is the CPU side)."""
  accelerators: int
  has_cpu: bool
  cap: float
  succ_ptr: np.ndarray
  succ: np.ndarray  # distinct readers of each op
  class_ptr: np.ndarray
  class_ops: np.ndarray  # each class's ops
  touched_ptr: np.ndarray
  touched: np.ndarray  # each class's ops and the ops feeding them (each once)
  accelerator_latency: np.ndarray
  cpu_latency: np.ndarray
  output_cost: np.ndarray
  class_memory: np.ndarray
  class_cpu_only: np.ndarray  # bool: the class has an op only a CPU runs
  class_of: np.ndarray


def _csr(lists) -> tuple[np.ndarray, np.ndarray]:
  ptr = np.zeros(len(lists) + 1, np.int64)
  ptr[1:] = np.cumsum([len(x) for x in lists])
  flat = np.concatenate([np.asarray(x, np.int64) for x in lists]) if lists else np.zeros(0)
  return ptr, flat.astype(np.int64)


@functools.lru_cache(maxsize=4)  # Workloads hash by identity: one build per workload.
def arrays_of(workload: Workload) -> PipelineArrays:
  graph = workload.graph
  num_ops = workload.num_ops
  src = graph.tensor_producer[graph.data_edge_tensor]
  dst = graph.data_edge_consumer
  readers = [set() for _ in range(num_ops)]
  feeders = [set() for _ in range(num_ops)]
  for u, v in zip(src.tolist(), dst.tolist()):
    readers[u].add(v)
    feeders[v].add(u)
  classes = workload.group_members()
  touched = []
  for members in classes:
    ops = set(members.tolist())
    for m in members.tolist():
      ops |= feeders[m]
    touched.append(sorted(ops))
  succ_ptr, succ = _csr([sorted(r) for r in readers])
  class_ptr, class_ops = _csr(classes)
  touched_ptr, touched_flat = _csr(touched)
  return PipelineArrays(
      accelerators=workload.max_accelerators, has_cpu=workload.max_cpus > 0,
      cap=float(workload.accelerator_memory), succ_ptr=succ_ptr, succ=succ,
      class_ptr=class_ptr, class_ops=class_ops, touched_ptr=touched_ptr, touched=touched_flat,
      accelerator_latency=workload.accelerator_latency.astype(np.float64),
      cpu_latency=workload.cpu_latency.astype(np.float64),
      output_cost=workload.output_cost.astype(np.float64),
      class_memory=np.array([workload.memory[m].sum() for m in classes], np.float64),
      class_cpu_only=np.array([not workload.on_accelerator[m].all() for m in classes], bool),
      class_of=workload.colocation.astype(np.int64))


def to_slots(arrays: PipelineArrays, device: np.ndarray) -> np.ndarray:
  device = np.asarray(device, np.int64)
  return np.where(device == CPU, arrays.accelerators, device).astype(np.int64)


def to_devices(arrays: PipelineArrays, slot: np.ndarray) -> np.ndarray:
  return np.where(slot == arrays.accelerators, CPU, slot).astype(np.int64)


@numba.njit(cache=True)
def _add_part(op, slot, sign, load, mark, stamp, succ_ptr, succ, accelerator_latency,
              cpu_latency, output_cost, accelerators):
  """Adds (sign +1) or removes (-1) op's part of the loads; `mark[stamp]` dedups readers."""
  home = slot[op]
  if home == accelerators:
    load[home] += sign * cpu_latency[op]
  else:
    load[home] += sign * accelerator_latency[op]
  leaves = False
  for k in range(succ_ptr[op], succ_ptr[op + 1]):
    there = slot[succ[k]]
    if there != home and mark[there] != stamp:
      mark[there] = stamp
      leaves = True
      if there != accelerators:
        load[there] += sign * output_cost[op]
  if leaves and home != accelerators:
    load[home] += sign * output_cost[op]


@numba.njit(cache=True)
def _loads(slot, succ_ptr, succ, accelerator_latency, cpu_latency, output_cost, accelerators):
  load = np.zeros(accelerators + 1)
  mark = np.full(accelerators + 1, -1, np.int64)
  for op in range(slot.shape[0]):
    _add_part(op, slot, 1.0, load, mark, op, succ_ptr, succ, accelerator_latency, cpu_latency,
              output_cost, accelerators)
  return load


@numba.njit(cache=True)
def _score(load):
  top = 0.0
  squares = 0.0
  for x in load:
    top = max(top, x)
    squares += x * x
  return top, squares


@numba.njit(cache=True)
def _better(top, squares, best_top, best_squares):
  tolerance = _RELATIVE * max(abs(best_top), 1.0)
  if top < best_top - tolerance:
    return True
  return abs(top - best_top) <= tolerance and \
      squares < best_squares - _RELATIVE * max(abs(best_squares), 1.0)


@numba.njit(cache=True)
def _held(slot, class_ptr, class_ops, class_memory, accelerators):
  held = np.zeros(accelerators + 1)
  for c in range(class_memory.shape[0]):
    held[slot[class_ops[class_ptr[c]]]] += class_memory[c]
  return held


@numba.njit(cache=True)
def _set_class(slot, c, target, class_ptr, class_ops):
  for k in range(class_ptr[c], class_ptr[c + 1]):
    slot[class_ops[k]] = target


@numba.njit(cache=True)
def _move_class(slot, held, c, target, class_ptr, class_ops, class_memory):
  """Puts class c on `target` for good: its ops' slots and the bytes each device holds."""
  held[slot[class_ops[class_ptr[c]]]] -= class_memory[c]
  held[target] += class_memory[c]
  _set_class(slot, c, target, class_ptr, class_ops)


@numba.njit(cache=True)
def _fits(c, target, held, has_cpu, cap, class_memory, class_cpu_only, accelerators):
  if target == accelerators:
    return has_cpu
  return not class_cpu_only[c] and held[target] + class_memory[c] <= cap


@numba.njit(cache=True)
def _descend(slot, max_steps, succ_ptr, succ, class_ptr, class_ops, touched_ptr, touched,
             accelerator_latency, cpu_latency, output_cost, class_memory, class_cpu_only,
             accelerators, has_cpu, cap):
  """Best-move descent in place: returns (steps, evaluations)."""
  load = _loads(slot, succ_ptr, succ, accelerator_latency, cpu_latency, output_cost,
                accelerators)
  held = _held(slot, class_ptr, class_ops, class_memory, accelerators)
  top, squares = _score(load)
  trial = np.empty_like(load)
  mark = np.full(accelerators + 1, -1, np.int64)
  stamp = 0
  evaluations = 0
  steps = 0
  num_classes = class_memory.shape[0]
  while steps < max_steps:
    best_class, best_target = -1, -1
    best_top, best_squares = top, squares
    for c in range(num_classes):
      home = slot[class_ops[class_ptr[c]]]
      for target in range(accelerators + 1):
        if target == home or not _fits(c, target, held, has_cpu, cap, class_memory,
                                       class_cpu_only, accelerators):
          continue
        trial[:] = load
        for k in range(touched_ptr[c], touched_ptr[c + 1]):
          stamp += 1
          _add_part(touched[k], slot, -1.0, trial, mark, stamp, succ_ptr, succ,
                    accelerator_latency, cpu_latency, output_cost, accelerators)
        _set_class(slot, c, target, class_ptr, class_ops)
        for k in range(touched_ptr[c], touched_ptr[c + 1]):
          stamp += 1
          _add_part(touched[k], slot, 1.0, trial, mark, stamp, succ_ptr, succ,
                    accelerator_latency, cpu_latency, output_cost, accelerators)
        _set_class(slot, c, home, class_ptr, class_ops)
        evaluations += 1
        trial_top, trial_squares = _score(trial)
        if _better(trial_top, trial_squares, best_top, best_squares):
          best_class, best_target = c, target
          best_top, best_squares = trial_top, trial_squares
    if best_class < 0:
      break
    _move_class(slot, held, best_class, best_target, class_ptr, class_ops, class_memory)
    load = _loads(slot, succ_ptr, succ, accelerator_latency, cpu_latency, output_cost,
                  accelerators)
    top, squares = _score(load)
    steps += 1
  return steps, evaluations


def loads(arrays: PipelineArrays, device: np.ndarray) -> np.ndarray:
  """[A + 1]: each accelerator's load, then the CPU side's."""
  return _loads(to_slots(arrays, device), arrays.succ_ptr, arrays.succ,
                arrays.accelerator_latency, arrays.cpu_latency, arrays.output_cost,
                arrays.accelerators)


def max_load(arrays: PipelineArrays, device: np.ndarray) -> float:
  return float(loads(arrays, device).max())


def descend(arrays: PipelineArrays, device: np.ndarray, max_steps: int = 1_000_000
            ) -> tuple[np.ndarray, int, int]:
  """Best-move descent from a feasible split: (split, steps, evaluations)."""
  slot = to_slots(arrays, device)
  steps, evaluations = _descend(
      slot, max_steps, arrays.succ_ptr, arrays.succ, arrays.class_ptr, arrays.class_ops,
      arrays.touched_ptr, arrays.touched, arrays.accelerator_latency, arrays.cpu_latency,
      arrays.output_cost, arrays.class_memory, arrays.class_cpu_only, arrays.accelerators,
      arrays.has_cpu, arrays.cap)
  return to_devices(arrays, slot), int(steps), int(evaluations)


@numba.njit(cache=True)
def _perturb(slot, moves, seed, class_ptr, class_ops, class_memory, class_cpu_only,
             accelerators, has_cpu, cap):
  """Puts `moves` random classes on random devices where they fit, in place."""
  np.random.seed(seed)
  held = _held(slot, class_ptr, class_ops, class_memory, accelerators)
  num_classes = class_memory.shape[0]
  for _ in range(moves):
    c = np.random.randint(num_classes)
    target = np.random.randint(accelerators + 1)
    home = slot[class_ops[class_ptr[c]]]
    if target == home or not _fits(c, target, held, has_cpu, cap, class_memory,
                                   class_cpu_only, accelerators):
      continue
    _move_class(slot, held, c, target, class_ptr, class_ops, class_memory)


def perturb(arrays: PipelineArrays, device: np.ndarray, moves: int, seed: int) -> np.ndarray:
  slot = to_slots(arrays, device)
  _perturb(slot, moves, seed, arrays.class_ptr, arrays.class_ops, arrays.class_memory,
           arrays.class_cpu_only, arrays.accelerators, arrays.has_cpu, arrays.cap)
  return to_devices(arrays, slot)


def key(arrays: PipelineArrays, device: np.ndarray) -> tuple[float, float]:
  """(max-load, sum of squared loads): the search's lexicographic score."""
  load = loads(arrays, device)
  return float(load.max()), float((load ** 2).sum())


@numba.njit(cache=True)
def _perturb_boundary(slot, moves, seed, succ_ptr, succ, class_ptr, class_ops, class_memory,
                      class_cpu_only, class_of, accelerators, has_cpu, cap):
  """Moves `moves` times a class across a cut edge: a random edge whose ends are on different
  devices, one end's class put on the other end's device where it fits, in place."""
  np.random.seed(seed)
  held = _held(slot, class_ptr, class_ops, class_memory, accelerators)
  num_ops = slot.shape[0]
  edges = succ.shape[0]
  if edges == 0:
    return
  for _ in range(moves):
    for _attempt in range(64):
      k = np.random.randint(edges)
      # The edge's source: the op whose reader list holds position k.
      lo, hi = 0, num_ops
      while hi - lo > 1:
        mid = (lo + hi) // 2
        if succ_ptr[mid] <= k:
          lo = mid
        else:
          hi = mid
      u, v = lo, succ[k]
      if slot[u] == slot[v]:
        continue
      if np.random.randint(2) == 0:
        u, v = v, u
      c, target = class_of[u], slot[v]
      if not _fits(c, target, held, has_cpu, cap, class_memory, class_cpu_only, accelerators):
        continue
      _move_class(slot, held, c, target, class_ptr, class_ops, class_memory)
      break


def perturb_boundary(arrays: PipelineArrays, device: np.ndarray, moves: int, seed: int
                     ) -> np.ndarray:
  slot = to_slots(arrays, device)
  _perturb_boundary(slot, moves, seed, arrays.succ_ptr, arrays.succ, arrays.class_ptr,
                    arrays.class_ops, arrays.class_memory, arrays.class_cpu_only,
                    arrays.class_of, arrays.accelerators, arrays.has_cpu, arrays.cap)
  return to_devices(arrays, slot)
