"""The readable delay model (the test oracle) and the orders and arrival times the list
schedulers share with it."""
from __future__ import annotations

import heapq

import numpy as np

from regal_datasets import analysis
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring.reference_common import compute_time
from regal.scoring.schedule import Schedule


def priority_topological_order(graph: Graph, op_priority: np.ndarray) -> list[int]:
  """Ops in the priority-driven topological order: repeatedly the ready op (every predecessor
  already taken) of largest priority, ties to the lower id."""
  missing = np.zeros(graph.num_ops, np.int64)
  successors: list[set[int]] = [set() for _ in range(graph.num_ops)]
  for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    if dst not in successors[src]:
      successors[src].add(dst)
      missing[dst] += 1
  heap = [(-float(op_priority[op]), op) for op in range(graph.num_ops) if missing[op] == 0]
  heapq.heapify(heap)
  order = []
  while heap:
    _, op = heapq.heappop(heap)
    order.append(op)
    for succ in successors[op]:
      missing[succ] -= 1
      if missing[succ] == 0:
        heapq.heappush(heap, (-float(op_priority[succ]), succ))
  return order


def input_ready_time(op: int, device: int, placement: np.ndarray, end: np.ndarray,
                     deps: analysis.Dependencies, devices: DeviceSpec, dtype=np.float64):
  """When every input of `op` is on `device` under the delay model (its predecessors are
  placed and timed): the latest predecessor's end, plus, from another device, the transfer
  of the largest tensor it sends (`analysis.transfer_time`; a control edge: its end); 0
  without predecessors. The list schedulers place ops with it."""
  ready = dtype(0)
  for src, size in zip(deps.preds[op], deps.pred_bytes[op]):
    ready = max(ready, dtype(end[src] + analysis.transfer_time(devices, size, int(placement[src]),
                                                               device, dtype)))
  return ready


def simulate_delay(graph: Graph, devices: DeviceSpec, placement: np.ndarray,
                   op_priority: np.ndarray | None = None, dtype=np.float64) -> Schedule:
  """**Delay model** (`regal.scoring.delay.batched`, `regal.scoring.delay.native`): ops taken in the
  priority-driven topological order of `op_priority` (`priority_topological_order`; without
  priorities, the graph's topological order), each on its device as early as possible, after
  the device's previous op in that order (zero-time ops occupy no device time) and after its
  inputs arrive: a predecessor on another device delivers at its end + latency + bytes /
  bandwidth of the largest tensor read from it (a control edge at its end). Transfers never
  contend. No memory is tracked (peak NaN)."""
  placement = np.asarray(placement, np.int64)
  deps = analysis.Dependencies.of(graph)  # The largest tensor read from each predecessor.
  order = (graph.topological_order.tolist() if op_priority is None
           else priority_topological_order(graph, np.asarray(op_priority)))
  start = np.zeros(graph.num_ops, dtype)
  end = np.zeros(graph.num_ops, dtype)
  free = np.zeros(devices.num_devices, dtype)
  for op in order:
    device = int(placement[op])
    ready = input_ready_time(op, device, placement, end, deps, devices, dtype)
    duration = compute_time(devices, graph.compute_cost[op], device, dtype)
    start[op] = max(free[device], ready) if duration > 0 else ready
    end[op] = dtype(start[op] + duration)
    if duration > 0:
      free[device] = end[op]
  nan = np.full((graph.num_tensors, devices.num_devices), np.nan)
  return Schedule(makespan=end.max(initial=0.0), peak_memory=np.full(devices.num_devices, np.nan),
                  op_start=start, op_end=end, transfer_start=nan, transfer_end=nan.copy())
