"""The readable synchronous model (the test oracle; memory and dtype:
`regal.scoring.reference_common`).

**Synchronous model** (REGAL section 3.1, appendix A.4). The placement implies transfer tasks,
one per (tensor, other device with a consumer of it). A total order of ops and transfers comes
from a priority-driven topological sort: repeatedly take the highest-priority task whose
dependencies are already in the order (an op's priority is its node priority, a transfer's its
transfer priority; ties: ops before transfers, then the lower id, transfers by (tensor, device)).
Each device runs its tasks in that order, one at a time. A transfer occupies both its sender
and its receiver: it starts once both have finished their earlier tasks and the tensor exists.
"""
from __future__ import annotations

import heapq

import numpy as np

from regal_datasets import analysis
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring.reference_common import (Adjacency, Memory, compute_time, op_finished,
                                            transfers_needed)
from regal.scoring.schedule import Schedule, validate_placement


def synchronous_order(graph: Graph, placement: np.ndarray, op_priority: np.ndarray,
                      transfer_priority: np.ndarray, num_devices: int) -> list[tuple]:
  """The total order of tasks: ("op", op) and ("transfer", tensor, dst) (see module doc)."""
  adjacency = Adjacency(graph)
  needs_transfer = transfers_needed(graph, placement, num_devices)
  missing = np.bincount(graph.edge_dst, minlength=graph.num_ops)
  heap = []  # Entries (-priority, kind 0 = op / 1 = transfer, id, dst).
  for op in np.flatnonzero(missing == 0):
    heapq.heappush(heap, (-op_priority[op], 0, int(op), 0))
  order = []

  def satisfy(op: int) -> None:
    missing[op] -= 1
    if missing[op] == 0:
      heapq.heappush(heap, (-op_priority[op], 0, int(op), 0))

  while heap:
    _, kind, index, dst = heapq.heappop(heap)
    if kind == 0:
      op = index
      order.append(("op", op))
      op_finished(op, placement[op], adjacency, placement, needs_transfer, satisfy,
                   lambda tensor, dst: heapq.heappush(
                       heap, (-transfer_priority[tensor, dst], 1, tensor, dst)))
    else:
      tensor = index
      order.append(("transfer", tensor, dst))
      for consumer in adjacency.readers[tensor]:
        if placement[consumer] == dst:
          satisfy(consumer)
  return order


def simulate_synchronous(graph: Graph, devices: DeviceSpec, placement: np.ndarray,
                         op_priority: np.ndarray, transfer_priority: np.ndarray,
                         dtype=np.float64) -> Schedule:
  """REGAL's synchronous-transfer model (see the module docstring)."""
  num_devices = devices.num_devices
  placement = validate_placement(placement, graph.num_ops, num_devices)
  needs_transfer = transfers_needed(graph, placement, num_devices)
  adjacency = Adjacency(graph)
  memory = Memory(graph, adjacency, placement, needs_transfer, num_devices, dtype)
  order = synchronous_order(graph, placement, op_priority, transfer_priority, num_devices)

  device_free = [dtype(0)] * num_devices
  op_start = np.full(graph.num_ops, np.nan)
  op_end = np.full(graph.num_ops, np.nan)
  transfer_start = np.full((graph.num_tensors, num_devices), np.nan)
  transfer_end = np.full((graph.num_tensors, num_devices), np.nan)

  def arrival(tensor: int, device: int):
    producer = graph.tensor_producer[tensor]
    return op_end[producer] if placement[producer] == device else transfer_end[tensor, device]

  for task in order:
    if task[0] == "op":
      op = task[1]
      device = placement[op]
      start = device_free[device]
      for tensor in adjacency.inputs[op]:
        start = max(start, dtype(arrival(tensor, device)))
      for pred in adjacency.control_pred[op]:
        start = max(start, dtype(op_end[pred]))
      end = dtype(start + compute_time(devices, graph.compute_cost[op], device, dtype))
      op_start[op], op_end[op] = start, end
      device_free[device] = end
      memory.start_op(op)
      memory.note_peaks()
      memory.end_op(op)
    else:
      _, tensor, dst = task
      src = placement[graph.tensor_producer[tensor]]
      start = max(device_free[src], device_free[dst], dtype(op_end[graph.tensor_producer[tensor]]))
      end = dtype(start + analysis.transfer_time(devices, graph.tensor_size[tensor], src, dst,
                                                 dtype))
      transfer_start[tensor, dst], transfer_end[tensor, dst] = start, end
      device_free[src] = device_free[dst] = end
      memory.allocate(dst, graph.tensor_size[tensor])
      memory.note_peaks()
      memory.use(tensor, src)
  return Schedule(makespan=dtype(op_end.max()), peak_memory=np.array(memory.peak, dtype),
                  op_start=op_start, op_end=op_end, transfer_start=transfer_start,
                  transfer_end=transfer_end)
