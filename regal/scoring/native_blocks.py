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

from regal.scoring import native_pipeline
from regal.scoring.native_pipeline import PipelineArrays, to_devices, to_slots


@numba.njit(cache=True)
def _latency(slot, succ_ptr, succ, accelerator_latency, cpu_latency, output_cost,
             accelerators):
  """(latency, busy time): inf when units wait in a cycle; busy time is the blocks' durations
  plus the CPU ops' latencies (the descent's second key)."""
  num_ops = slot.shape[0]
  duration = native_pipeline._loads(slot, succ_ptr, succ, accelerator_latency, cpu_latency,
                                    output_cost, accelerators)
  units = accelerators + num_ops
  unit = np.empty(num_ops, np.int64)
  for op in range(num_ops):
    unit[op] = accelerators + op if slot[op] == accelerators else slot[op]
  waiting = np.zeros(units, np.int64)
  present = np.zeros(units, np.bool_)
  for op in range(num_ops):
    present[unit[op]] = True
    for k in range(succ_ptr[op], succ_ptr[op + 1]):
      if unit[succ[k]] != unit[op]:
        waiting[unit[succ[k]]] += 1
  # Ops of each block, for walking a block's outgoing edges when it finishes.
  count = np.zeros(accelerators + 1, np.int64)
  for op in range(num_ops):
    if slot[op] < accelerators:
      count[slot[op] + 1] += 1
  start_of = np.cumsum(count)
  fill = start_of[:-1].copy()
  members = np.empty(start_of[-1], np.int64)
  for op in range(num_ops):
    if slot[op] < accelerators:
      members[fill[slot[op]]] = op
      fill[slot[op]] += 1
  ready_at = np.zeros(units)
  queue = np.empty(units, np.int64)
  head, tail = 0, 0
  needed = 0
  for u in range(units):
    if present[u]:
      needed += 1
      if waiting[u] == 0:
        queue[tail] = u
        tail += 1
  latency, busy = 0.0, 0.0
  while head < tail:
    u = queue[head]
    head += 1
    if u < accelerators:
      length = duration[u]
      first, last = start_of[u], start_of[u + 1]
    else:
      length = cpu_latency[u - accelerators]
      first, last = 0, 1
    finish = ready_at[u] + length
    busy += length
    latency = max(latency, finish)
    for m in range(first, last):
      op = members[m] if u < accelerators else u - accelerators
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
