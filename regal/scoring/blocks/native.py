"""Single-sample latency (`regal.scoring.blocks`) compiled for search, and a descent over class
moves that keeps every block contiguous.

A block's duration is its accelerator's pipeline load (`native_pipeline._loads`: what it
receives, computes and sends); the blocks and CPU ops then finish in topological order of
what waits for what (Kahn's algorithm over units: block a is unit a, CPU op v is unit A + v).
If some unit never becomes ready, units wait on each other in a cycle and the latency is inf:
the split is not contiguous, and the descent never takes such a move.
"""
from __future__ import annotations

import numba
import numpy as np

from regal.scoring.throughput import native as native_pipeline
from regal.scoring.throughput.native import PipelineArrays, to_devices, to_slots


@numba.njit(cache=True)
def _unit_graph(slot, succ_ptr, succ, accelerators):
  """The units (block a is unit a, CPU op v is unit A + v): each op's unit, how many edges
  from other units each unit waits for, and each unit's ops (CSR: start_of [units + 1],
  members, in op order)."""
  num_ops = slot.shape[0]
  units = accelerators + num_ops
  unit = np.empty(num_ops, np.int64)
  for op in range(num_ops):
    unit[op] = accelerators + op if slot[op] == accelerators else slot[op]
  waiting = np.zeros(units, np.int64)
  for op in range(num_ops):
    for k in range(succ_ptr[op], succ_ptr[op + 1]):
      if unit[succ[k]] != unit[op]:
        waiting[unit[succ[k]]] += 1
  count = np.zeros(units + 1, np.int64)
  for op in range(num_ops):
    count[unit[op] + 1] += 1
  start_of = np.cumsum(count)
  fill = start_of[:-1].copy()
  members = np.empty(num_ops, np.int64)
  for op in range(num_ops):
    members[fill[unit[op]]] = op
    fill[unit[op]] += 1
  return unit, waiting, start_of, members


@numba.njit(cache=True)
def _latency(slot, succ_ptr, succ, accelerator_latency, cpu_latency, output_cost,
             accelerators):
  """(latency, busy time): inf when units wait in a cycle; busy time is the blocks' durations
  plus the CPU ops' latencies (the descent's second key)."""
  duration = native_pipeline._loads(slot, succ_ptr, succ, accelerator_latency, cpu_latency,
                                    output_cost, accelerators)
  unit, waiting, start_of, members = _unit_graph(slot, succ_ptr, succ, accelerators)
  units = waiting.shape[0]
  ready_at = np.zeros(units)
  queue = np.empty(units, np.int64)
  head, tail = 0, 0
  needed = 0
  for u in range(units):
    if start_of[u + 1] > start_of[u]:
      needed += 1
      if waiting[u] == 0:
        queue[tail] = u
        tail += 1
  latency, busy = 0.0, 0.0
  while head < tail:
    u = queue[head]
    head += 1
    length = duration[u] if u < accelerators else cpu_latency[u - accelerators]
    finish = ready_at[u] + length
    busy += length
    latency = max(latency, finish)
    for m in range(start_of[u], start_of[u + 1]):
      op = members[m]
      for k in range(succ_ptr[op], succ_ptr[op + 1]):
        v = unit[succ[k]]
        if v == u:
          continue
        ready_at[v] = max(ready_at[v], finish)
        waiting[v] -= 1
        if waiting[v] == 0:
          queue[tail] = v
          tail += 1
  if head < needed:
    return np.inf, np.inf
  return latency, busy


@numba.njit(cache=True)
def _better(top, second, best_top, best_second):
  tolerance = 1e-12 * max(abs(best_top), 1.0)
  if top < best_top - tolerance:
    return True
  return abs(top - best_top) <= tolerance and \
      second < best_second - 1e-12 * max(abs(best_second), 1.0)


@numba.njit(cache=True)
def _descend(slot, max_steps, succ_ptr, succ, class_ptr, class_ops, accelerator_latency,
             cpu_latency, output_cost, class_memory, class_cpu_only, accelerators, has_cpu,
             cap):
  """Best-move descent in place from a contiguous split: (steps, evaluations)."""
  top, second = _latency(slot, succ_ptr, succ, accelerator_latency, cpu_latency, output_cost,
                         accelerators)
  held = native_pipeline._held(slot, class_ptr, class_ops, class_memory, accelerators)
  evaluations, steps = 0, 0
  num_classes = class_memory.shape[0]
  while steps < max_steps:
    best_class, best_target = -1, -1
    best_top, best_second = top, second
    for c in range(num_classes):
      home = slot[class_ops[class_ptr[c]]]
      for target in range(accelerators + 1):
        if target == home or not native_pipeline._fits(c, target, held, has_cpu, cap,
                                                       class_memory, class_cpu_only,
                                                       accelerators):
          continue
        native_pipeline._set_class(slot, c, target, class_ptr, class_ops)
        trial_top, trial_second = _latency(slot, succ_ptr, succ, accelerator_latency,
                                           cpu_latency, output_cost, accelerators)
        native_pipeline._set_class(slot, c, home, class_ptr, class_ops)
        evaluations += 1
        if _better(trial_top, trial_second, best_top, best_second):
          best_class, best_target = c, target
          best_top, best_second = trial_top, trial_second
    if best_class < 0:
      break
    native_pipeline._move_class(slot, held, best_class, best_target, class_ptr, class_ops,
                                class_memory)
    top, second = best_top, best_second
    steps += 1
  return steps, evaluations


@numba.njit(cache=True)
def _perturb(slot, moves, seed, succ_ptr, succ, class_ptr, class_ops, accelerator_latency,
             cpu_latency, output_cost, class_memory, class_cpu_only, accelerators, has_cpu,
             cap):
  """Puts `moves` random classes on random devices where they fit and keep every block
  contiguous, in place."""
  np.random.seed(seed)
  held = native_pipeline._held(slot, class_ptr, class_ops, class_memory, accelerators)
  num_classes = class_memory.shape[0]
  for _ in range(moves):
    c = np.random.randint(num_classes)
    target = np.random.randint(accelerators + 1)
    home = slot[class_ops[class_ptr[c]]]
    if target == home or not native_pipeline._fits(c, target, held, has_cpu, cap,
                                                   class_memory, class_cpu_only, accelerators):
      continue
    native_pipeline._set_class(slot, c, target, class_ptr, class_ops)
    top, _ = _latency(slot, succ_ptr, succ, accelerator_latency, cpu_latency, output_cost,
                      accelerators)
    native_pipeline._set_class(slot, c, home, class_ptr, class_ops)
    if not np.isinf(top):
      native_pipeline._move_class(slot, held, c, target, class_ptr, class_ops, class_memory)


def latency(arrays: PipelineArrays, device: np.ndarray) -> float:
  return float(_latency(to_slots(arrays, device), arrays.succ_ptr, arrays.succ,
                        arrays.accelerator_latency, arrays.cpu_latency, arrays.output_cost,
                        arrays.accelerators)[0])


def key(arrays: PipelineArrays, device: np.ndarray) -> tuple[float, float]:
  """(latency, busy time): the search's lexicographic score."""
  top, second = _latency(to_slots(arrays, device), arrays.succ_ptr, arrays.succ,
                         arrays.accelerator_latency, arrays.cpu_latency, arrays.output_cost,
                         arrays.accelerators)
  return float(top), float(second)


def descend(arrays: PipelineArrays, device: np.ndarray, max_steps: int = 1_000_000
            ) -> tuple[np.ndarray, int, int]:
  """Best-move descent from a feasible, contiguous split: (split, steps, evaluations)."""
  slot = to_slots(arrays, device)
  steps, evaluations = _descend(
      slot, max_steps, arrays.succ_ptr, arrays.succ, arrays.class_ptr, arrays.class_ops,
      arrays.accelerator_latency, arrays.cpu_latency, arrays.output_cost, arrays.class_memory,
      arrays.class_cpu_only, arrays.accelerators, arrays.has_cpu, arrays.cap)
  return to_devices(arrays, slot), int(steps), int(evaluations)


def perturb(arrays: PipelineArrays, device: np.ndarray, moves: int, seed: int) -> np.ndarray:
  slot = to_slots(arrays, device)
  _perturb(slot, moves, seed, arrays.succ_ptr, arrays.succ, arrays.class_ptr, arrays.class_ops,
           arrays.accelerator_latency, arrays.cpu_latency, arrays.output_cost,
           arrays.class_memory, arrays.class_cpu_only, arrays.accelerators, arrays.has_cpu,
           arrays.cap)
  return to_devices(arrays, slot)


@numba.njit(cache=True)
def _stuck(slot, succ_ptr, succ, accelerators):
  """Per op: its unit never becomes ready in Kahn's algorithm over units (it waits in a cycle
  of blocks, or behind one)."""
  unit, waiting, start_of, members = _unit_graph(slot, succ_ptr, succ, accelerators)
  units = waiting.shape[0]
  done = np.zeros(units, np.bool_)
  queue = np.empty(units, np.int64)
  head, tail = 0, 0
  for u in range(units):
    if start_of[u + 1] > start_of[u] and waiting[u] == 0:
      queue[tail] = u
      tail += 1
  while head < tail:
    u = queue[head]
    head += 1
    done[u] = True
    for m in range(start_of[u], start_of[u + 1]):
      op = members[m]
      for k in range(succ_ptr[op], succ_ptr[op + 1]):
        v = unit[succ[k]]
        if v != u:
          waiting[v] -= 1
          if waiting[v] == 0:
            queue[tail] = v
            tail += 1
  stuck = np.empty(slot.shape[0], np.bool_)
  for op in range(slot.shape[0]):
    stuck[op] = not done[unit[op]]
  return stuck


@numba.njit(cache=True)
def _through_outside(block, slot, ptr, adjacent, num_ops):
  """Ops reached from `block`'s ops by paths that first leave the block (over `adjacent`:
  readers forward, feeders backward)."""
  reached = np.zeros(num_ops, np.bool_)
  stack = np.empty(num_ops, np.int64)
  top = 0
  for op in range(num_ops):
    if slot[op] != block:
      continue
    for k in range(ptr[op], ptr[op + 1]):
      v = adjacent[k]
      if slot[v] != block and not reached[v]:
        reached[v] = True
        stack[top] = v
        top += 1
  while top:
    top -= 1
    op = stack[top]
    for k in range(ptr[op], ptr[op + 1]):
      v = adjacent[k]
      if not reached[v]:
        reached[v] = True
        stack[top] = v
        top += 1
  return reached


@numba.njit(cache=True)
def _repair(slot, succ_ptr, succ, pred_ptr, pred, class_of, class_ptr, class_ops,
            accelerator_latency, accelerators, has_cpu):
  """Makes a split contiguous in place by sending classes to the CPU side (where ops never
  wait in a cycle). A block that a path leaves and re-enters has a head (its ops such paths
  start from) and a tail (the ops they re-enter); without the one or the other it is
  contiguous, so each such block sends the part that computes less. Blocks that are each
  contiguous can still wait on each other; then the stuck block whose entries (ops fed by
  another stuck unit) compute least sends those. False when it cannot (no CPU)."""
  num_ops = slot.shape[0]
  while True:
    stuck = _stuck(slot, succ_ptr, succ, accelerators)
    if not stuck.any():
      return True
    if not has_cpu:
      return False
    evict = np.zeros(num_ops, np.bool_)
    for block in range(accelerators):
      tail = _through_outside(block, slot, succ_ptr, succ, num_ops)
      head = _through_outside(block, slot, pred_ptr, pred, num_ops)
      tail_compute, head_compute, found = 0.0, 0.0, False
      for op in range(num_ops):
        if slot[op] == block:
          if tail[op]:
            tail_compute += accelerator_latency[op]
            found = True
          if head[op]:
            head_compute += accelerator_latency[op]
      if found:
        part = tail if tail_compute <= head_compute else head
        for op in range(num_ops):
          if slot[op] == block and part[op]:
            evict[op] = True
    if not evict.any():
      entry_compute = np.zeros(accelerators)
      has_entry = np.zeros(accelerators, np.bool_)
      for op in range(num_ops):
        if not stuck[op]:
          continue
        for k in range(succ_ptr[op], succ_ptr[op + 1]):
          reader = succ[k]
          if stuck[reader] and slot[reader] != slot[op] and slot[reader] < accelerators and \
              not evict[reader]:
            evict[reader] = True
            entry_compute[slot[reader]] += accelerator_latency[reader]
            has_entry[slot[reader]] = True
      chosen = -1
      for a in range(accelerators):
        if has_entry[a] and (chosen < 0 or entry_compute[a] < entry_compute[chosen]):
          chosen = a
      if chosen < 0:  # A cycle of units holds a block fed by another: cannot happen.
        return False
      for op in range(num_ops):
        evict[op] = evict[op] and slot[op] == chosen
    for op in range(num_ops):
      if evict[op]:
        native_pipeline._set_class(slot, class_of[op], accelerators, class_ptr, class_ops)


def _feeders(arrays: PipelineArrays) -> tuple[np.ndarray, np.ndarray]:
  """Each op's feeders (CSR), the readers' lists turned round."""
  counts = np.diff(arrays.succ_ptr)
  src = np.repeat(np.arange(len(counts)), counts)
  order = np.argsort(arrays.succ, kind="stable")
  ptr = np.zeros(len(counts) + 1, np.int64)
  ptr[1:] = np.cumsum(np.bincount(arrays.succ, minlength=len(counts)))
  return ptr, src[order].astype(np.int64)


def repair(arrays: PipelineArrays, device: np.ndarray) -> np.ndarray | None:
  """A contiguous split from any split (`_repair`), or None without a CPU side."""
  slot = to_slots(arrays, device)
  pred_ptr, pred = _feeders(arrays)
  if not _repair(slot, arrays.succ_ptr, arrays.succ, pred_ptr, pred, arrays.class_of,
                 arrays.class_ptr, arrays.class_ops, arrays.accelerator_latency,
                 arrays.accelerators, arrays.has_cpu):
    return None
  return to_devices(arrays, slot)


def perturb_and_repair(arrays: PipelineArrays, device: np.ndarray, moves: int, seed: int
                       ) -> np.ndarray:
  """`moves` random classes on random devices where they fit, contiguous or not, then
  repaired (the split unchanged if it cannot be)."""
  repaired = repair(arrays, native_pipeline.perturb(arrays, device, moves, seed))
  return device if repaired is None else repaired
