"""REGAL's synchronous model as a compiled host loop: the sync model's scorer on a CPU.

Semantics: exactly those of `regal.scoring.sync.reference.simulate_synchronous` (the
priority-driven total order of ops and transfers, each device running its tasks in that
order, a transfer occupying its sender and its receiver), in float32 with the same operations
in the same order, so it agrees bit for bit with the reference run in float32 and with the
JAX model (`regal.scoring.sync.batched`). Each task is timed as it leaves the order's heap (a
task's time depends only on the tasks before it), so ordering and timing are one pass.

Heap keys (`native_common.heap_key`): larger priority first; ties to ops before transfers,
then the lower id, transfers by (tensor, device): an op's index is its id, a transfer's
`num_ops + tensor * D + device`. The graph arrays are `wc.native.NativeGraph`'s.
"""
from __future__ import annotations

import numba
import numpy as np

from regal.scoring import native_common
from regal.scoring.native_common import heap_key, heap_pop, heap_push, link_time
from regal.scoring.wc.native import NativeGraph


@numba.njit(inline="always")
def _satisfy(op, missing, heap, heap_size, capacity, op_bits):
  missing[op] -= 1
  if missing[op] == 0:
    heap_push(heap, heap_size, capacity, 0, heap_key(op_bits[op], op))


@numba.njit(inline="always")
def _use(tensor, device, uses_left, resident, tensor_size):
  uses_left[tensor, device] -= 1
  if uses_left[tensor, device] == 0:
    resident[device] = resident[device] - tensor_size[tensor]


@numba.njit(inline="always")
def _note_peaks(resident, peak):
  for d in range(resident.shape[0]):
    peak[d] = max(peak[d], resident[d])


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _simulate(compute_cost, extra_memory, tensor_size, tensor_producer, in_degree, outputs_ptr,
              outputs, inputs_ptr, inputs, readers_ptr, readers, control_ptr, control, speed,
              bandwidth, latency, placement, op_bits_all, transfer_bits_all, track_memory,
              makespan_out, peak_out):
  population, num_ops = placement.shape
  num_tensors = tensor_size.shape[0]
  num_devices = speed.shape[0]
  capacity = num_ops + num_tensors * num_devices
  heap = np.empty(capacity, np.int64)
  heap_size = np.zeros(1, np.int64)
  missing = np.empty(num_ops, np.int32)
  needs_transfer = np.empty((num_tensors, num_devices), np.bool_)
  uses_left = np.empty((num_tensors, num_devices), np.int32)
  op_end = np.empty(num_ops, np.float32)
  transfer_end = np.empty((num_tensors, num_devices), np.float32)
  device_free = np.empty(num_devices, np.float32)
  resident = np.empty(num_devices, np.float32)
  peak = np.empty(num_devices, np.float32)
  # The control predecessors of each op (the graph stores successors).
  control_pred_ptr = np.zeros(num_ops + 1, np.int32)
  for src in range(num_ops):
    for k in range(control_ptr[src], control_ptr[src + 1]):
      control_pred_ptr[control[k] + 1] += 1
  for op in range(num_ops):
    control_pred_ptr[op + 1] += control_pred_ptr[op]
  control_pred = np.empty(control_ptr[num_ops], np.int32)
  filled = control_pred_ptr[:num_ops].copy()
  for src in range(num_ops):
    for k in range(control_ptr[src], control_ptr[src + 1]):
      dst = control[k]
      control_pred[filled[dst]] = src
      filled[dst] += 1
  for p in range(population):
    place = placement[p]
    op_bits = op_bits_all[p]
    transfer_bits = transfer_bits_all[p]
    for t in range(num_tensors):
      home = place[tensor_producer[t]]
      for d in range(num_devices):
        needs_transfer[t, d] = False
        uses_left[t, d] = 0
      for e in range(readers_ptr[t], readers_ptr[t + 1]):
        uses_left[t, place[readers[e]]] += 1
        if place[readers[e]] != home:
          needs_transfer[t, place[readers[e]]] = True
      if track_memory:
        for d in range(num_devices):
          if needs_transfer[t, d]:
            uses_left[t, home] += 1
    for d in range(num_devices):
      device_free[d] = np.float32(0)
      resident[d] = np.float32(0)
      peak[d] = np.float32(0)
    heap_size[0] = 0
    for op in range(num_ops):
      missing[op] = in_degree[op]
      if missing[op] == 0:
        heap_push(heap, heap_size, capacity, 0, heap_key(op_bits[op], op))
    makespan = np.float32(0)
    while heap_size[0] > 0:
      index = heap_pop(heap, heap_size, capacity, 0) & 0x7FFFFFFF
      if index < num_ops:
        op = index
        device = place[op]
        start = device_free[device]
        for k in range(inputs_ptr[op], inputs_ptr[op + 1]):
          tensor = inputs[k]
          producer = tensor_producer[tensor]
          arrival = (op_end[producer] if place[producer] == device
                     else transfer_end[tensor, device])
          start = max(start, arrival)
        for k in range(control_pred_ptr[op], control_pred_ptr[op + 1]):
          start = max(start, op_end[control_pred[k]])
        end = start + compute_cost[op] / speed[device]
        op_end[op] = end
        device_free[device] = end
        makespan = max(makespan, end)
        if track_memory:
          allocated = np.float32(0)
          for k in range(outputs_ptr[op], outputs_ptr[op + 1]):
            allocated = allocated + tensor_size[outputs[k]]
          resident[device] = resident[device] + (allocated + extra_memory[op])
          _note_peaks(resident, peak)
          resident[device] = resident[device] - extra_memory[op]
          for k in range(outputs_ptr[op], outputs_ptr[op + 1]):
            if uses_left[outputs[k], device] == 0:
              resident[device] = resident[device] - tensor_size[outputs[k]]
          for k in range(inputs_ptr[op], inputs_ptr[op + 1]):
            _use(inputs[k], device, uses_left, resident, tensor_size)
        # The order: control successors, then each output's readers here, then its transfers.
        for k in range(control_ptr[op], control_ptr[op + 1]):
          _satisfy(control[k], missing, heap, heap_size, capacity, op_bits)
        for k in range(outputs_ptr[op], outputs_ptr[op + 1]):
          tensor = outputs[k]
          for e in range(readers_ptr[tensor], readers_ptr[tensor + 1]):
            if place[readers[e]] == device:
              _satisfy(readers[e], missing, heap, heap_size, capacity, op_bits)
          for d in range(num_devices):
            if needs_transfer[tensor, d]:
              heap_push(heap, heap_size, capacity, 0,
                        heap_key(transfer_bits[tensor * num_devices + d],
                                 num_ops + tensor * num_devices + d))
      else:
        slot = index - num_ops
        tensor = slot // num_devices
        dst = slot - tensor * num_devices
        producer = tensor_producer[tensor]
        src = place[producer]
        start = max(max(device_free[src], device_free[dst]), op_end[producer])
        end = start + link_time(latency, bandwidth, tensor_size[tensor], src, dst)
        transfer_end[tensor, dst] = end
        device_free[src] = end
        device_free[dst] = end
        if track_memory:
          resident[dst] = resident[dst] + tensor_size[tensor]
          _note_peaks(resident, peak)
          _use(tensor, src, uses_left, resident, tensor_size)
        for e in range(readers_ptr[tensor], readers_ptr[tensor + 1]):
          if place[readers[e]] == dst:
            _satisfy(readers[e], missing, heap, heap_size, capacity, op_bits)
    makespan_out[p] = makespan
    for d in range(num_devices):
      peak_out[p, d] = peak[d] if track_memory else np.nan


def simulate(graph: NativeGraph, placement: np.ndarray, op_priority: np.ndarray,
             transfer_priority: np.ndarray, threads: int | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
  """(makespan [P], peak memory [P, D]) of a population: placement [P, O], priorities [P, O]
  and [P, T, D]. Peaks are NaN for a graph built without memory. The population is split
  over `threads` (default: one per CPU core)."""
  num_ops, num_tensors, num_devices = graph.num_ops, graph.num_tensors, graph.num_devices
  if num_ops + num_tensors * num_devices >= 2 ** 31:
    raise ValueError("too many tasks for the sync scorer's 31-bit heap indices")
  placement = native_common.placement_argument(placement, num_ops, num_devices)
  # Priorities travel as their float32 bit patterns (what the heap keys are made of).
  op_priority = native_common.argument(op_priority, np.float32).view(np.int32)
  transfer_priority = native_common.argument(transfer_priority, np.float32).reshape(
      placement.shape[0], num_tensors * num_devices).view(np.int32)
  population = placement.shape[0]
  makespan = np.empty(population, np.float32)
  peak = np.empty((population, num_devices), np.float32)

  def run(rows: slice) -> None:
    _simulate(*graph.arrays, placement[rows], op_priority[rows], transfer_priority[rows],
              graph.memory, makespan[rows], peak[rows])

  native_common.run_split(run, population, threads)
  return makespan, peak
