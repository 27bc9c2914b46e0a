"""The readable work-conserving model (the test oracle; memory and dtype:
`regal.scoring.reference_common`).

**Work-conserving (WC) model** (Doppler, Algorithm 1). An op is ready when every data input is
present on its device and every control predecessor has finished. The simulation proceeds in
rounds at instants `now`:
  1. dispatch: every idle device (in id order) starts its highest-priority ready op (ties: the
     lower op id); every idle channel (ordered device pair, in (src, dst) order) starts its
     highest-priority waiting transfer (ties: the lower tensor id), unless the pair shares
     ports (`DeviceSpec.ports[src, dst] = k >= 0`) and src's sending port k or dst's receiving
     port k carries a transfer already (one started earlier in this order included);
  2. `now` advances to the earliest end of a running op or transfer, and every op and transfer
     ending then completes. A completed op makes its outputs present on its device and queues
     one transfer per (tensor, other device with a consumer of it) on that channel; a completed
     transfer makes the tensor present on the receiving device.
  Op time = cost / speed; transfer time = latency + bytes / bandwidth. Because completions come
  before the next dispatch, zero-time work finished at an instant becomes visible to the next
  round at that same instant.
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


def simulate_wc(graph: Graph, devices: DeviceSpec, placement: np.ndarray,
                op_priority: np.ndarray, transfer_priority: np.ndarray,
                dtype=np.float64) -> Schedule:
  """The work-conserving model, as an explicit event loop (see the module docstring)."""
  num_devices = devices.num_devices
  placement = validate_placement(placement, graph.num_ops, num_devices)
  needs_transfer = transfers_needed(graph, placement, num_devices)
  adjacency = Adjacency(graph)
  memory = Memory(graph, adjacency, placement, needs_transfer, num_devices, dtype)

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

  def port_free(src: int, dst: int) -> bool:
    """Whether src -> dst may start: a channel of its own, or both ends' port k idle."""
    port = devices.ports[src, dst]
    return port < 0 or not any(
        devices.ports[a, b] == port and (a == src or b == dst) for a, b in channel_busy)

  def satisfy(op: int) -> None:
    missing[op] -= 1
    if missing[op] == 0:
      heapq.heappush(ready[placement[op]], (-op_priority[op], int(op)))

  while True:
    for device in range(num_devices):
      if device_busy[device] is None and ready[device]:
        _, op = heapq.heappop(ready[device])
        duration = compute_time(devices, graph.compute_cost[op], device, dtype)
        end = dtype(now + duration)
        device_busy[device] = (end, op)
        op_start[op] = now
        memory.start_op(op)
    for channel in sorted(waiting):
      if channel not in channel_busy and waiting[channel] and port_free(*channel):
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
        op_finished(op, device, adjacency, placement, needs_transfer, satisfy,
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
