"""Static, padded arrays the JAX performance models walk: per-op and per-tensor work lists.

When an op or a transfer finishes, the simulators must touch every edge it affects. Instead of a
padded adjacency of the largest degree (wasteful on hub ops such as a graph's source), each
event owns a contiguous range of one flat *work list*, processed a few entries per loop step.

Work entries (kind, tensor, op, n_always, n_local):
  USE      (tensor t, n_local)  an op finished that read t n times: n fewer uses of t there;
  REQ      (op u, n_always, n_local)  an op finished or a tensor arrived on some device: u has
           n_always requirements met (control edges) plus n_local if u runs on that device
           (data edges);
  SENDER   (tensor t)           a transfer of t arrived: one fewer use of t on the sender.
An op's range lists a USE entry per distinct input tensor and a REQ entry per distinct
successor. A tensor's range, walked when a transfer of it arrives, lists one SENDER entry,
then a REQ entry per distinct reader. An op's outputs (whose transfers it queues
when it finishes) are a row of `op_outputs`, handled in the step that finishes the op.

Without memory (`memory=False`, for objectives that need only the makespan) the lists hold
no USE or SENDER entries: they exist only to release memory, and dropping them shortens every
walk.

Shapes are bucketed (regal_datasets.padding.bucket_size), so graphs of similar size share one
compilation. Padding ops never become ready (they wait on an edge that never comes).
"""
from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal_datasets.padding import bucket_size

USE, REQ, SENDER = 0, 1, 2
WC_CHUNK = 8  # Work entries per loop step of the JAX event models: fewer steps beat narrower.


@struct.dataclass
class SimGraph:
  """A graph and its devices as padded arrays (a pytree; shapes are the static part)."""
  op_mask: np.ndarray  # [O] bool
  compute_cost: np.ndarray  # [O]
  extra_memory: np.ndarray  # [O]
  alloc_bytes: np.ndarray  # [O] outputs + extra memory, allocated when an op starts
  in_edges: np.ndarray  # [O] int32 requirements before an op is ready (padding: 1)
  op_work: np.ndarray  # [O, 2] int32 (begin, end) of each op's work-list range
  op_outputs: np.ndarray  # [O, M] int32 each op's output tensors, -1 padded
  tensor_producer: np.ndarray  # [T] int32 (padding: 0)
  tensor_size: np.ndarray  # [T]
  tensor_work: np.ndarray  # [T, 2] int32 range of DATA entries for a tensor's readers
  work: np.ndarray  # [L, 5] int32 work entries (kind, tensor, op, n_always, n_local)
  data_edge_mask: np.ndarray  # [E] bool
  data_edge_tensor: np.ndarray  # [E] int32
  data_edge_consumer: np.ndarray  # [E] int32
  control_edge_mask: np.ndarray  # [C] bool
  control_edge_src: np.ndarray  # [C] int32
  control_edge_dst: np.ndarray  # [C] int32
  speed: np.ndarray  # [D]
  bandwidth: np.ndarray  # [D, D] (diagonal: 1, unused)
  latency: np.ndarray  # [D, D]
  ports: np.ndarray  # [D, D] int32 `DeviceSpec.ports` (-1: a channel of its own)
  tracks_memory: bool = struct.field(pytree_node=False, default=True)  # USE/SENDER entries
  port_classes: int = struct.field(pytree_node=False, default=0)  # 0: no pair shares a port

  @property
  def num_devices(self) -> int:
    return self.speed.shape[-1]


def _padded(values, size: int, dtype, fill=0) -> np.ndarray:
  out = np.full(size, fill, dtype)
  out[:len(values)] = values
  return out


def build_sim_graph(graph: Graph, devices: DeviceSpec, dtype=np.float32,
                    shape: tuple[int, int, int, int, int] | None = None,
                    memory: bool = True, max_outputs: int = 1) -> SimGraph:
  """Padded simulation arrays for `graph` on `devices`.

  `shape` = (ops, tensors, work entries, data edges, control edges); default: buckets.
  `memory=False` leaves out the work entries that only track memory (see the module doc).
  `max_outputs` pads the per-op output table to at least that many columns (with `shape`,
  it lets graphs of different sizes share one compiled model).
  """
  num_ops, num_tensors = graph.num_ops, graph.num_tensors
  outputs = [[] for _ in range(num_ops)]
  for tensor, producer in enumerate(graph.tensor_producer):
    outputs[producer].append(tensor)
  inputs = [[] for _ in range(num_ops)]
  readers = [[] for _ in range(num_tensors)]
  for tensor, consumer in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()):
    inputs[consumer].append(tensor)
    readers[tensor].append(consumer)
  control_succ = [[] for _ in range(num_ops)]
  for src, dst in zip(graph.control_edge_src.tolist(), graph.control_edge_dst.tolist()):
    control_succ[src].append(dst)

  # Entries are merged so a list names each tensor (USE) or op (REQ) once, with counts: a
  # chunk then never holds two entries for one key, and needs no de-duplication.
  kinds, tensors, ops, always, local = [], [], [], [], []

  def add(kind: int, tensor: int, op: int, n_always: int, n_local: int) -> None:
    kinds.append(kind), tensors.append(tensor), ops.append(op)
    always.append(n_always), local.append(n_local)

  op_begin, op_end = [], []
  for op in range(num_ops):
    op_begin.append(len(kinds))
    if memory:
      for tensor, count in collections.Counter(inputs[op]).items():
        add(USE, tensor, op, 0, count)
    needs: dict[int, list[int]] = {}
    for succ in control_succ[op]:
      needs.setdefault(succ, [0, 0])[0] += 1
    for tensor in outputs[op]:
      for reader in readers[tensor]:
        needs.setdefault(reader, [0, 0])[1] += 1
    for succ, (n_always, n_local) in needs.items():
      add(REQ, 0, succ, n_always, n_local)
    op_end.append(len(kinds))
  tensor_begin, tensor_end = [], []
  for tensor in range(num_tensors):
    tensor_begin.append(len(kinds))
    if memory:
      add(SENDER, tensor, 0, 0, 1)
    for reader, count in collections.Counter(readers[tensor]).items():
      add(REQ, tensor, reader, 0, count)
    tensor_end.append(len(kinds))

  if shape is None:
    shape = (bucket_size(num_ops), bucket_size(max(num_tensors, 1)), bucket_size(len(kinds)),
             bucket_size(max(graph.num_data_edges, 1)),
             bucket_size(max(graph.num_control_edges, 1)))
  ops_size, tensors_size, work_size, data_size, control_size = shape
  if (num_ops > ops_size or num_tensors > tensors_size or len(kinds) > work_size
      or graph.num_data_edges > data_size or graph.num_control_edges > control_size):
    raise ValueError(f"graph {graph.name!r} does not fit the simulation shape {shape}")
  end_of_work = len(kinds)
  op_outputs = np.full((ops_size, max([max_outputs] + [len(o) for o in outputs])), -1,
                       np.int32)
  for op, tensors_of_op in enumerate(outputs):
    op_outputs[op, :len(tensors_of_op)] = tensors_of_op
  output_bytes = np.bincount(graph.tensor_producer, graph.tensor_size, minlength=num_ops)
  bandwidth = np.array(devices.bandwidth, np.float64)
  np.fill_diagonal(bandwidth, 1.0)
  return SimGraph(
      op_mask=_padded(np.ones(num_ops, bool), ops_size, bool),
      compute_cost=_padded(graph.compute_cost, ops_size, dtype),
      extra_memory=_padded(graph.extra_memory, ops_size, dtype),
      alloc_bytes=_padded(output_bytes + graph.extra_memory, ops_size, dtype),
      in_edges=_padded(np.bincount(graph.edge_dst, minlength=num_ops), ops_size, np.int32, 1),
      op_work=np.stack([_padded(op_begin, ops_size, np.int32, end_of_work),
                        _padded(op_end, ops_size, np.int32, end_of_work)], axis=1),
      op_outputs=op_outputs,
      tensor_producer=_padded(graph.tensor_producer, tensors_size, np.int32),
      tensor_size=_padded(graph.tensor_size, tensors_size, dtype),
      tensor_work=np.stack([_padded(tensor_begin, tensors_size, np.int32, end_of_work),
                            _padded(tensor_end, tensors_size, np.int32, end_of_work)], axis=1),
      work=np.stack([_padded(kinds, work_size, np.int32, USE),
                     _padded(tensors, work_size, np.int32),
                     _padded(ops, work_size, np.int32),
                     _padded(always, work_size, np.int32),
                     _padded(local, work_size, np.int32)], axis=1),
      data_edge_mask=_padded(np.ones(graph.num_data_edges, bool), data_size, bool),
      data_edge_tensor=_padded(graph.data_edge_tensor, data_size, np.int32),
      data_edge_consumer=_padded(graph.data_edge_consumer, data_size, np.int32),
      control_edge_mask=_padded(np.ones(graph.num_control_edges, bool), control_size, bool),
      control_edge_src=_padded(graph.control_edge_src, control_size, np.int32),
      control_edge_dst=_padded(graph.control_edge_dst, control_size, np.int32),
      speed=np.asarray(devices.speed, dtype), bandwidth=bandwidth.astype(dtype),
      latency=np.asarray(devices.latency, dtype),
      ports=np.asarray(devices.ports, np.int32), tracks_memory=memory,
      port_classes=int(devices.ports.max()) + 1 if devices.shares_ports else 0)


def pad_to(sim: SimGraph, placement, op_priority, transfer_priority):
  """Decoded arrays [P, o], [P, o], [P, t, D] padded to the sim graph's bucket sizes (padded
  ops and tensors are masked out by the models)."""
  extra_ops = sim.op_mask.shape[0] - placement.shape[-1]
  extra_tensors = sim.tensor_size.shape[0] - transfer_priority.shape[-2]
  return (jnp.pad(placement, ((0, 0), (0, extra_ops))),
          jnp.pad(op_priority, ((0, 0), (0, extra_ops))),
          jnp.pad(transfer_priority, ((0, 0), (0, extra_tensors), (0, 0))))


def event_model_jax(simulate_batch, always_memory: bool):
  """An event model's (wc, sync) `Model.jax` from its batched simulator. `always_memory`: the
  model's JAX version reads the memory arrays even for runtime."""
  def build(graph: Graph, devices: DeviceSpec, dtype, memory: bool):
    sim = jax.tree_util.tree_map(jnp.asarray, build_sim_graph(
        graph, devices, dtype=dtype, memory=memory or always_memory))

    def simulate(sim, placement, op_priority, transfer_priority):
      result = simulate_batch(sim, *pad_to(sim, placement, op_priority, transfer_priority),
                              chunk=WC_CHUNK, record_times=False)
      return result.makespan, result.peak_memory
    return sim, simulate
  return build
