"""Slow, readable reference implementations of the performance models (the test oracles).

Both models take a graph, a device set, a placement and priorities, and return a `Schedule`.
Arithmetic happens in `dtype` (float64 by default; float32 to mirror the JAX models bit for
bit, since a different rounding can turn a tie into a non-tie and change the schedule).

Memory model (both): when an op starts, its output tensors and its extra memory are allocated on
its device; its extra memory is freed when it ends. A tensor received by a transfer is allocated
on the receiving device when the transfer starts. A tensor leaves a device when the last use
there has finished: a consumer op's end, or on the producer's device also an outgoing transfer's
end; a tensor with no use on its producer's device leaves when its producer ends. The peak is
taken right after allocations; releases at an instant come before allocations at that instant.

**Work-conserving (WC) model** (Doppler, Algorithm 1). An op is ready when every data input is
present on its device and every control predecessor has finished. The simulation proceeds in
rounds at instants `now`:
  1. dispatch: every idle device (in id order) starts its highest-priority ready op (ties: the
     lower op id); every idle channel (ordered device pair, in (src, dst) order) starts its
     highest-priority waiting transfer (ties: the lower tensor id);
  2. `now` advances to the earliest end of a running op or transfer, and every op and transfer
     ending then completes. A completed op makes its outputs present on its device and queues
     one transfer per (tensor, other device with a consumer of it) on that channel; a completed
     transfer makes the tensor present on the receiving device.
  Op time = cost / speed; transfer time = latency + bytes / bandwidth. Because completions come
  before the next dispatch, zero-time work finished at an instant becomes visible to the next
  round at that same instant.

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

from datasets import analysis
from datasets.devices import DeviceSpec
from datasets.graph import Graph
from regal.scoring.schedule import Schedule, validate_placement


class _Adjacency:
  """Python lists of each op's outputs, inputs and control neighbours, each tensor's readers."""

  def __init__(self, graph: Graph):
    self.outputs = [[] for _ in range(graph.num_ops)]
    self.inputs = [[] for _ in range(graph.num_ops)]  # One entry per data in-edge.
    self.readers = [[] for _ in range(graph.num_tensors)]  # One entry per data edge.
    self.control_succ = [[] for _ in range(graph.num_ops)]
    self.control_pred = [[] for _ in range(graph.num_ops)]
    for tensor, producer in enumerate(graph.tensor_producer):
      self.outputs[producer].append(tensor)
    for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
      self.inputs[consumer].append(int(tensor))
      self.readers[tensor].append(int(consumer))
    for src, dst in zip(graph.control_edge_src, graph.control_edge_dst):
      self.control_succ[src].append(int(dst))
      self.control_pred[dst].append(int(src))


class _Memory:
  """Per-device resident bytes and their peak, with per-(tensor, device) use counting."""

  def __init__(self, graph: Graph, adjacency: _Adjacency, placement: np.ndarray,
               needs_transfer: np.ndarray, num_devices: int, dtype):
    self.graph, self.adjacency, self.placement, self.dtype = graph, adjacency, placement, dtype
    self.resident = [dtype(0)] * num_devices
    self.peak = [dtype(0)] * num_devices
    self.uses_left = np.zeros((graph.num_tensors, num_devices), np.int64)
    for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
      self.uses_left[tensor, placement[consumer]] += 1
    for tensor in range(graph.num_tensors):
      home = placement[graph.tensor_producer[tensor]]
      self.uses_left[tensor, home] += needs_transfer[tensor].sum()

  def allocate(self, device: int, num_bytes) -> None:
    self.resident[device] = self.dtype(self.resident[device] + self.dtype(num_bytes))

  def release(self, device: int, num_bytes) -> None:
    self.resident[device] = self.dtype(self.resident[device] - self.dtype(num_bytes))

  def note_peaks(self) -> None:
    self.peak = [max(p, r) for p, r in zip(self.peak, self.resident)]

  def start_op(self, op: int) -> None:
    device = self.placement[op]
    graph = self.graph
    outputs = self.dtype(0)
    for tensor in self.adjacency.outputs[op]:
      outputs = self.dtype(outputs + self.dtype(graph.tensor_size[tensor]))
    self.allocate(device, self.dtype(outputs + self.dtype(graph.extra_memory[op])))

  def end_op(self, op: int) -> None:
    device = self.placement[op]
    graph = self.graph
    self.release(device, graph.extra_memory[op])
    for tensor in self.adjacency.outputs[op]:
      if self.uses_left[tensor, device] == 0:
        self.release(device, graph.tensor_size[tensor])
    for tensor in self.adjacency.inputs[op]:
      self.use(tensor, device)

  def use(self, tensor: int, device: int) -> None:
    self.uses_left[tensor, device] -= 1
    if self.uses_left[tensor, device] == 0:
      self.release(device, self.graph.tensor_size[tensor])


def _needs_transfer(graph: Graph, placement: np.ndarray, num_devices: int) -> np.ndarray:
  """[t, D] whether tensor t must be sent to device j (a consumer there, producer elsewhere)."""
  needed = np.zeros((graph.num_tensors, num_devices), bool)
  needed[graph.data_edge_tensor, placement[graph.data_edge_consumer]] = True
  needed[np.arange(graph.num_tensors), placement[graph.tensor_producer]] = False
  return needed


def _op_finished(op: int, device: int, adjacency: _Adjacency, placement: np.ndarray,
                 needs_transfer: np.ndarray, satisfy, queue_transfer) -> None:
  """An op's end satisfies its control successors and its readers on the same device, and
  makes each of its outputs due on every other device that reads it."""
  for succ in adjacency.control_succ[op]:
    satisfy(succ)
  for tensor in adjacency.outputs[op]:
    for consumer in adjacency.readers[tensor]:
      if placement[consumer] == device:
        satisfy(consumer)
    for dst in np.flatnonzero(needs_transfer[tensor]):
      queue_transfer(int(tensor), int(dst))


def _compute_time(devices: DeviceSpec, cost, device: int, dtype):
  return dtype(dtype(cost) / dtype(devices.speed[device]))


def simulate_wc(graph: Graph, devices: DeviceSpec, placement: np.ndarray,
                op_priority: np.ndarray, transfer_priority: np.ndarray,
                dtype=np.float64) -> Schedule:
  """The work-conserving model, as an explicit event loop (see the module docstring)."""
  num_devices = devices.num_devices
  placement = validate_placement(placement, graph.num_ops, num_devices)
  needs_transfer = _needs_transfer(graph, placement, num_devices)
  adjacency = _Adjacency(graph)
  memory = _Memory(graph, adjacency, placement, needs_transfer, num_devices, dtype)

  # Requirements still missing before an op is ready: one per in-edge (data or control).
  missing = np.bincount(graph.edge_dst, minlength=graph.num_ops)
  ready = [[] for _ in range(num_devices)]  # Heaps of (-priority, op).
  for op in np.flatnonzero(missing == 0):
    heapq.heappush(ready[placement[op]], (-op_priority[op], int(op)))
  waiting = {}  # (src, dst) -> heap of (-priority, tensor).
  device_busy = [None] * num_devices  # (end, op) of the running op.
  channel_busy = {}  # (src, dst) -> (end, tensor).

  op_start = np.full(graph.num_ops, np.nan)
  op_end = np.full(graph.num_ops, np.nan)
  transfer_start = np.full((graph.num_tensors, num_devices), np.nan)
  transfer_end = np.full((graph.num_tensors, num_devices), np.nan)
  now = dtype(0)

  def satisfy(op: int) -> None:
    missing[op] -= 1
    if missing[op] == 0:
      heapq.heappush(ready[placement[op]], (-op_priority[op], int(op)))

  while True:
    for device in range(num_devices):
      if device_busy[device] is None and ready[device]:
        _, op = heapq.heappop(ready[device])
        duration = _compute_time(devices, graph.compute_cost[op], device, dtype)
        end = dtype(now + duration)
        device_busy[device] = (end, op)
        op_start[op] = now
        memory.start_op(op)
    for channel in sorted(waiting):
      if channel not in channel_busy and waiting[channel]:
        _, tensor = heapq.heappop(waiting[channel])
        src, dst = channel
        duration = analysis.transfer_time(devices, graph.tensor_size[tensor], src, dst, dtype)
        end = dtype(now + duration)
        channel_busy[channel] = (end, tensor)
        transfer_start[tensor, dst] = now
        memory.allocate(dst, graph.tensor_size[tensor])
    memory.note_peaks()

    ends = [busy[0] for busy in device_busy if busy is not None]
    ends += [busy[0] for busy in channel_busy.values()]
    if not ends:
      break
    now = min(ends)
    for device in range(num_devices):
      if device_busy[device] is not None and device_busy[device][0] == now:
        _, op = device_busy[device]
        device_busy[device] = None
        op_end[op] = now
        memory.end_op(op)
        _op_finished(op, device, adjacency, placement, needs_transfer, satisfy,
                     lambda tensor, dst, src=device: heapq.heappush(
                         waiting.setdefault((src, dst), []),
                         (-transfer_priority[tensor, dst], tensor)))
    for channel, (end, tensor) in sorted(channel_busy.items()):
      if end == now:
        del channel_busy[channel]
        src, dst = channel
        transfer_end[tensor, dst] = now
        memory.use(tensor, src)
        for consumer in adjacency.readers[tensor]:
          if placement[consumer] == dst:
            satisfy(consumer)

  if np.isnan(op_end).any():
    raise AssertionError("simulation ended with unfinished ops; the graph must be a DAG")
  return Schedule(makespan=dtype(op_end.max()), peak_memory=np.array(memory.peak, dtype),
                  op_start=op_start, op_end=op_end, transfer_start=transfer_start,
                  transfer_end=transfer_end)


def synchronous_order(graph: Graph, placement: np.ndarray, op_priority: np.ndarray,
                      transfer_priority: np.ndarray, num_devices: int) -> list[tuple]:
  """The total order of tasks: ("op", op) and ("transfer", tensor, dst) (see module doc)."""
  adjacency = _Adjacency(graph)
  needs_transfer = _needs_transfer(graph, placement, num_devices)
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
      _op_finished(op, placement[op], adjacency, placement, needs_transfer, satisfy,
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
  needs_transfer = _needs_transfer(graph, placement, num_devices)
  adjacency = _Adjacency(graph)
  memory = _Memory(graph, adjacency, placement, needs_transfer, num_devices, dtype)
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
      end = dtype(start + _compute_time(devices, graph.compute_cost[op], device, dtype))
      op_start[op], op_end[op] = start, end
      device_free[device] = end
      memory.start_op(op)
      memory.note_peaks()
      memory.end_op(op)
    else:
      _, tensor, dst = task
      src = placement[graph.tensor_producer[tensor]]
      start = max(device_free[src], device_free[dst], dtype(op_end[graph.tensor_producer[tensor]]))
      end = dtype(start + analysis.transfer_time(devices, graph.tensor_size[tensor], src, dst, dtype))
      transfer_start[tensor, dst], transfer_end[tensor, dst] = start, end
      device_free[src] = device_free[dst] = end
      memory.allocate(dst, graph.tensor_size[tensor])
      memory.note_peaks()
      memory.use(tensor, src)
  return Schedule(makespan=dtype(op_end.max()), peak_memory=np.array(memory.peak, dtype),
                  op_start=op_start, op_end=op_end, transfer_start=transfer_start,
                  transfer_end=transfer_end)


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
  """**Delay model** (`regal.scoring.delay_model`, `regal.scoring.native_delay`): ops taken in the
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
    duration = _compute_time(devices, graph.compute_cost[op], device, dtype)
    start[op] = max(free[device], ready) if duration > 0 else ready
    end[op] = dtype(start[op] + duration)
    if duration > 0:
      free[device] = end[op]
  nan = np.full((graph.num_tensors, devices.num_devices), np.nan)
  return Schedule(makespan=end.max(initial=0.0), peak_memory=np.full(devices.num_devices, np.nan),
                  op_start=start, op_end=end, transfer_start=nan, transfer_end=nan.copy())
