"""What the readable reference models share (the test oracles of `wc`, `sync` and
`delay`: each package's `reference.py`).

Each takes a graph, a device set, a placement and priorities, and returns a `Schedule`.
Arithmetic happens in `dtype` (float64 by default; float32 to mirror the JAX models bit for
bit, since a different rounding can turn a tie into a non-tie and change the schedule).

Memory model (wc and sync): when an op starts, its output tensors and its extra memory are
allocated on its device; its extra memory is freed when it ends. A tensor received by a transfer
is allocated on the receiving device when the transfer starts. A tensor leaves a device when the
last use there has finished: a consumer op's end, or on the producer's device also an outgoing
transfer's end; a tensor with no use on its producer's device leaves when its producer ends. The
peak is taken right after allocations; releases at an instant come before allocations at that
instant.
"""
from __future__ import annotations

import numpy as np

from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph


class Adjacency:
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


class Memory:
  """Per-device resident bytes and their peak, with per-(tensor, device) use counting."""

  def __init__(self, graph: Graph, adjacency: Adjacency, placement: np.ndarray,
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


def transfers_needed(graph: Graph, placement: np.ndarray, num_devices: int) -> np.ndarray:
  """[t, D] whether tensor t must be sent to device j (a consumer there, producer elsewhere)."""
  needed = np.zeros((graph.num_tensors, num_devices), bool)
  needed[graph.data_edge_tensor, placement[graph.data_edge_consumer]] = True
  needed[np.arange(graph.num_tensors), placement[graph.tensor_producer]] = False
  return needed


def op_finished(op: int, device: int, adjacency: Adjacency, placement: np.ndarray,
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


def compute_time(devices: DeviceSpec, cost, device: int, dtype):
  return dtype(dtype(cost) / dtype(devices.speed[device]))
