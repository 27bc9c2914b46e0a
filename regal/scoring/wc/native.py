"""The WC model as compiled event loops on the host: the fast scorer on a CPU.

Semantics: exactly those of `regal.scoring.wc.reference.simulate_wc` (same event order, same
float32 arithmetic in the same order, so results agree bit for bit with the reference run in
float32 and with `regal.scoring.wc.batched`).

Why a second implementation: on a CPU, XLA runs `regal.scoring.wc.batched`'s lockstep loop as dozens
of small kernels per event, and its gathers cost ~3 ns per element; with ~400 events per chromosome
at 200 ops that bounds it near 5,000 evaluations/s per core. One chromosome's event loop compiled by
numba (binary heaps of ranks for the ready ops and waiting transfers, scratch buffers reused across
the batch) runs ~10x faster. The search calls it from its host loop (`brkga.run_on_host`, through
`performance.BucketScorer`), and `make_fitness_fn` through `jax.pure_callback`; on an accelerator
the JAX model stays the scorer (scoring on the host would copy every generation there).

Parallelism comes from the caller: the kernel releases the GIL, and `over_local_devices`
gives each host device (one per core) its share of the population.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numba
import numpy as np

from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring import native_common
from regal.scoring.native_common import heap_key, heap_pop, heap_push, link_time


@dataclasses.dataclass(frozen=True)
class NativeGraph:
  """A graph and its devices as the flat float32 / int32 arrays the kernel reads."""
  compute_cost: np.ndarray  # [O] float32
  extra_memory: np.ndarray  # [O]
  tensor_size: np.ndarray  # [T]
  tensor_producer: np.ndarray  # [T] int32
  in_degree: np.ndarray  # [O] requirements (data + control in-edges) before an op is ready
  outputs_ptr: np.ndarray  # [O + 1] CSR: each op's output tensors, by tensor id
  outputs: np.ndarray
  inputs_ptr: np.ndarray  # [O + 1] CSR: one tensor per data in-edge, in edge order
  inputs: np.ndarray
  readers_ptr: np.ndarray  # [T + 1] CSR: one consumer per data edge, in edge order
  readers: np.ndarray
  control_ptr: np.ndarray  # [O + 1] CSR: control successors, in edge order
  control: np.ndarray
  speed: np.ndarray  # [D] float32
  bandwidth: np.ndarray  # [D, D]
  latency: np.ndarray  # [D, D]
  memory: bool = True  # Track memory (peaks); without it the peaks are NaN, and it is faster.
  ports: np.ndarray | None = None  # [D, D] int32 `DeviceSpec.ports` (the WC kernel reads it).

  @property
  def arrays(self) -> tuple[np.ndarray, ...]:
    """The graph arrays, in the order the compiled kernels (`wc.native`, `sync.native`) take
    them first."""
    return (self.compute_cost, self.extra_memory, self.tensor_size, self.tensor_producer,
            self.in_degree, self.outputs_ptr, self.outputs, self.inputs_ptr, self.inputs,
            self.readers_ptr, self.readers, self.control_ptr, self.control, self.speed,
            self.bandwidth, self.latency)

  @property
  def num_ops(self) -> int:
    return self.compute_cost.shape[0]

  @property
  def num_tensors(self) -> int:
    return self.tensor_size.shape[0]

  @property
  def num_devices(self) -> int:
    return self.speed.shape[0]


def _csr(rows: np.ndarray, cols: np.ndarray, num_rows: int) -> tuple[np.ndarray, np.ndarray]:
  order = np.argsort(rows, kind="stable")  # Keeps each row's entries in their given order.
  ptr = np.zeros(num_rows + 1, np.int32)
  np.cumsum(np.bincount(rows, minlength=num_rows), out=ptr[1:])
  return ptr, np.asarray(cols, np.int32)[order]


def build_native_graph(graph: Graph, devices: DeviceSpec, memory: bool = True) -> NativeGraph:
  f32 = lambda x: np.ascontiguousarray(x, np.float32)  # noqa: E731
  num_ops, num_tensors = graph.num_ops, graph.num_tensors
  outputs_ptr, outputs = _csr(graph.tensor_producer, np.arange(num_tensors), num_ops)
  inputs_ptr, inputs = _csr(graph.data_edge_consumer, graph.data_edge_tensor, num_ops)
  readers_ptr, readers = _csr(graph.data_edge_tensor, graph.data_edge_consumer, num_tensors)
  control_ptr, control = _csr(graph.control_edge_src, graph.control_edge_dst, num_ops)
  return NativeGraph(
      compute_cost=f32(graph.compute_cost), extra_memory=f32(graph.extra_memory),
      tensor_size=f32(graph.tensor_size),
      tensor_producer=np.ascontiguousarray(graph.tensor_producer, np.int32),
      in_degree=np.bincount(graph.edge_dst, minlength=num_ops).astype(np.int32),
      outputs_ptr=outputs_ptr, outputs=outputs, inputs_ptr=inputs_ptr, inputs=inputs,
      readers_ptr=readers_ptr, readers=readers, control_ptr=control_ptr, control=control,
      speed=f32(devices.speed), bandwidth=f32(devices.bandwidth), latency=f32(devices.latency),
      memory=memory, ports=np.ascontiguousarray(devices.ports, np.int32))


@numba.njit(inline="always")
def _arrive(tensor, device, readers_ptr, readers, place, missing, ready, ready_size, op_bits):
  """Tensor present on `device`: its readers there have one requirement fewer."""
  for e in range(readers_ptr[tensor], readers_ptr[tensor + 1]):
    reader = readers[e]
    if place[reader] == device:
      missing[reader] -= 1
      if missing[reader] == 0:
        heap_push(ready, ready_size, missing.shape[0], device, heap_key(op_bits[reader], reader))


@numba.njit(inline="always")
def _sort_ids(ids, count):
  """Insertion sort of ids[:count] (a few channels: they end or start together)."""
  for i in range(1, count):
    value = ids[i]
    j = i
    while j > 0 and ids[j - 1] > value:
      ids[j] = ids[j - 1]
      j -= 1
    ids[j] = value


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _simulate(compute_cost, extra_memory, tensor_size, tensor_producer, in_degree, outputs_ptr,
              outputs, inputs_ptr, inputs, readers_ptr, readers, control_ptr, control, speed,
              bandwidth, latency, ports, placement, op_priority, transfer_priority,
              track_memory, makespan_out, peak_out, completion_out):
  """Simulates every chromosome of the batch (rows of placement / priorities) in turn; each
  one's mean op completion time goes to `completion_out` (summed in float64, in event order)."""
  population, num_ops = placement.shape
  num_tensors = tensor_size.shape[0]
  num_devices = speed.shape[0]
  zero = np.float32(0.0)
  # Scratch reused by every chromosome of the batch.
  index_mask = np.int64(0x7FFFFFFF)
  missing = np.empty(num_ops, np.int32)
  ready = np.empty(num_devices * num_ops, np.int64)
  ready_size = np.empty(num_devices, np.int32)
  waiting = np.empty(num_devices * num_devices * num_tensors, np.int64)
  waiting_size = np.empty(num_devices * num_devices, np.int32)
  needs_transfer = np.empty((num_tensors, num_devices), np.bool_)
  uses_left = np.empty((num_tensors, num_devices), np.int32)
  device_op = np.empty(num_devices, np.int32)
  device_end = np.empty(num_devices, np.float32)
  channel_tensor = np.empty(num_devices * num_devices, np.int32)
  channel_end = np.empty(num_devices * num_devices, np.float32)
  # Channels worth looking at, so an event costs O(D + active channels), not O(D^2): those
  # idle with transfers waiting (`pending`, dispatched at the next step) and the busy ones.
  # Each list is sorted by channel id where its order matters (memory adds up in float32 in
  # (src, dst) order).
  num_channels = num_devices * num_devices
  pending = np.empty(num_channels, np.int32)
  is_pending = np.empty(num_channels, np.bool_)
  busy_channels = np.empty(num_channels, np.int32)
  ending = np.empty(num_channels, np.int32)
  resident = np.empty(num_devices, np.float32)
  peak = np.empty(num_devices, np.float32)
  # Ports held by a running transfer, per device and port class (`DeviceSpec.ports`).
  classes = max(ports.max() + 1, 1)
  sending = np.empty(num_devices * classes, np.bool_)
  receiving = np.empty(num_devices * classes, np.bool_)

  for p in range(population):
    place = placement[p]
    op_bits = op_priority[p].view(np.int32)
    transfer_bits = transfer_priority[p].view(np.int32)

    needs_transfer[:] = False
    uses_left[:] = 0
    for t in range(num_tensors):
      for e in range(readers_ptr[t], readers_ptr[t + 1]):
        d = place[readers[e]]
        needs_transfer[t, d] = True
        uses_left[t, d] += 1
      home = place[tensor_producer[t]]
      needs_transfer[t, home] = False
      sends = 0
      for d in range(num_devices):
        if needs_transfer[t, d]:
          sends += 1
      uses_left[t, home] += sends

    ready_size[:] = 0
    waiting_size[:] = 0
    for op in range(num_ops):
      missing[op] = in_degree[op]
      if in_degree[op] == 0:
        heap_push(ready, ready_size, num_ops, place[op], heap_key(op_bits[op], op))
    device_op[:] = -1
    channel_tensor[:] = -1
    is_pending[:] = False
    sending[:] = False
    receiving[:] = False
    pending_count = 0
    busy_count = 0
    resident[:] = zero
    peak[:] = zero
    now = zero
    makespan = -np.inf
    completion_sum = 0.0

    while True:
      # Dispatch: idle devices in id order, then idle channels in (src, dst) order.
      for d in range(num_devices):
        if device_op[d] < 0 and ready_size[d] > 0:
          op = heap_pop(ready, ready_size, num_ops, d) & index_mask
          duration = compute_cost[op] / speed[d]
          device_op[d] = op
          device_end[d] = now + duration
          if track_memory:
            allocated = zero
            for i in range(outputs_ptr[op], outputs_ptr[op + 1]):
              allocated = allocated + tensor_size[outputs[i]]
            resident[d] = resident[d] + (allocated + extra_memory[op])
      _sort_ids(pending, pending_count)
      blocked = 0
      for k in range(pending_count):
        c = pending[k]
        src, dst = c // num_devices, c % num_devices
        port = ports[src, dst]
        if port >= 0:
          if sending[src * classes + port] or receiving[dst * classes + port]:
            pending[blocked] = c  # Still waiting, still in (src, dst) order.
            blocked += 1
            continue
          sending[src * classes + port] = True
          receiving[dst * classes + port] = True
        is_pending[c] = False
        t = heap_pop(waiting, waiting_size, num_tensors, c) & index_mask
        duration = link_time(latency, bandwidth, tensor_size[t], src, dst)
        channel_tensor[c] = t
        channel_end[c] = now + duration
        busy_channels[busy_count] = c
        busy_count += 1
        if track_memory:
          resident[dst] = resident[dst] + tensor_size[t]
      pending_count = blocked
      if track_memory:
        for d in range(num_devices):
          if resident[d] > peak[d]:
            peak[d] = resident[d]

      # Advance to the earliest end; complete every op, then every transfer, ending then.
      busy = False
      for d in range(num_devices):
        if device_op[d] >= 0 and (not busy or device_end[d] < now):
          now = device_end[d]
          busy = True
      for k in range(busy_count):
        c = busy_channels[k]
        if not busy or channel_end[c] < now:
          now = channel_end[c]
          busy = True
      if not busy:
        break
      for d in range(num_devices):
        if device_op[d] < 0 or device_end[d] != now:
          continue
        op = device_op[d]
        device_op[d] = -1
        completion_sum += now
        if now > makespan:
          makespan = now
        if track_memory:
          resident[d] = resident[d] - extra_memory[op]
          for i in range(outputs_ptr[op], outputs_ptr[op + 1]):
            t = outputs[i]
            if uses_left[t, d] == 0:
              resident[d] = resident[d] - tensor_size[t]
          for i in range(inputs_ptr[op], inputs_ptr[op + 1]):
            t = inputs[i]
            uses_left[t, d] -= 1
            if uses_left[t, d] == 0:
              resident[d] = resident[d] - tensor_size[t]
        for i in range(control_ptr[op], control_ptr[op + 1]):
          succ = control[i]
          missing[succ] -= 1
          if missing[succ] == 0:
            heap_push(ready, ready_size, num_ops, place[succ], heap_key(op_bits[succ], succ))
        for i in range(outputs_ptr[op], outputs_ptr[op + 1]):
          t = outputs[i]
          _arrive(t, d, readers_ptr, readers, place, missing, ready, ready_size, op_bits)
          for dst in range(num_devices):
            if needs_transfer[t, dst]:
              c = d * num_devices + dst
              heap_push(waiting, waiting_size, num_tensors, c,
                        heap_key(transfer_bits[t, dst], t))
              if channel_tensor[c] < 0 and not is_pending[c]:
                is_pending[c] = True
                pending[pending_count] = c
                pending_count += 1
      ending_count = 0
      kept = 0
      for k in range(busy_count):
        c = busy_channels[k]
        if channel_end[c] == now:
          ending[ending_count] = c
          ending_count += 1
        else:
          busy_channels[kept] = c
          kept += 1
      busy_count = kept
      _sort_ids(ending, ending_count)
      for k in range(ending_count):
        c = ending[k]
        src, dst = c // num_devices, c % num_devices
        t = channel_tensor[c]
        channel_tensor[c] = -1
        port = ports[src, dst]
        if port >= 0:
          sending[src * classes + port] = False
          receiving[dst * classes + port] = False
        if track_memory:
          uses_left[t, src] -= 1
          if uses_left[t, src] == 0:
            resident[src] = resident[src] - tensor_size[t]
        _arrive(t, dst, readers_ptr, readers, place, missing, ready, ready_size, op_bits)
        if waiting_size[c] > 0:
          is_pending[c] = True
          pending[pending_count] = c
          pending_count += 1

    makespan_out[p] = makespan
    completion_out[p] = completion_sum / max(num_ops, 1)
    for d in range(num_devices):
      peak_out[p, d] = peak[d] if track_memory else np.nan


def simulate(graph: NativeGraph, placement: np.ndarray, op_priority: np.ndarray,
             transfer_priority: np.ndarray, threads: int | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
  """(makespan [P], peak memory [P, D]) of a population: placement [P, O], priorities [P, O]
  and [P, T, D]. Peaks are NaN for a graph built without memory. The population is split
  over `threads` (default: one per CPU core)."""
  return simulate_with_completion(graph, placement, op_priority, transfer_priority, threads)[:2]


def simulate_with_completion(graph: NativeGraph, placement: np.ndarray, op_priority: np.ndarray,
                             transfer_priority: np.ndarray, threads: int | None = None
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """`simulate`'s (makespan [P], peak memory [P, D]) and each chromosome's mean op completion
  time [P] (float64): the search's tie-breaker among equal makespans
  (`regal.scoring.performance.TIE_BREAK`)."""
  population = placement.shape[0]
  num_ops, num_devices = graph.num_ops, graph.num_devices
  placement = native_common.placement_argument(placement, num_ops, num_devices)
  op_priority = native_common.argument(op_priority, np.float32)
  transfer_priority = native_common.argument(transfer_priority, np.float32)
  makespan = np.empty(population, np.float32)
  peak = np.empty((population, num_devices), np.float32)
  completion = np.empty(population, np.float64)

  def run(rows: slice) -> None:
    _simulate(*graph.arrays, graph.ports, placement[rows], op_priority[rows],
              transfer_priority[rows], graph.memory, makespan[rows], peak[rows],
              completion[rows])

  native_common.run_split(run, population, threads)
  return makespan, peak, completion


def event_model_native(simulate_population: Callable):
  """An event model's (wc, sync) `Model.native` (or `native_completion`) from its compiled
  simulator over `NativeGraph`."""
  def build(graph: Graph, devices: DeviceSpec, memory: bool):
    host_graph = build_native_graph(graph, devices, memory=memory)
    return lambda placement, priority, transfer: simulate_population(host_graph, placement,
                                                                     priority, transfer)
  return build
