"""Running a placed, scheduled graph on `jax.devices()`, timed.

A host-side event loop keeps, per device, a heap of the ops whose inputs are there, and
dispatches the highest-priority one (first in the schedule) to its device; a tensor read on
another device moves with `jax.device_put` as soon as it is produced, once per device. Two
disciplines of "there":

* `async` (default): an input is there once the op producing it (or the transfer) has been
  dispatched. JAX's asynchronous dispatch queues the whole graph at once and each device runs
  its ops as their inputs complete, devices overlapping; the host adds no latency.
* `strict`: an input is there once it is computed (`is_ready`), and a device holds one op at a
  time: the work-conserving model's discipline exactly (a device never waits for a
  lower-priority op), at the price of a host round trip per op.

Sources (zero-cost input ops) are put on their devices before the clock starts, as a model
has them present at time 0. Every kernel runs once per device before timing (compilation), then
the graph runs `repeats` times; the measurement keeps each repetition's wall time, the device
each op's outputs ended on, and the program's results.
"""
from __future__ import annotations

import dataclasses
import heapq
import time
from typing import Sequence

import jax
import numpy as np

from regal_datasets import errors
from regal_datasets.graph import Graph
from regal.execute.program import Program, check, op_inputs, op_tensors
from regal.scoring.schedule import validate_placement

MODES = ("async", "strict")
_POLL_SECONDS = 20e-6


@dataclasses.dataclass(frozen=True)
class Measurement:
  seconds: np.ndarray  # [repeats] wall time of each timed run.
  op_devices: np.ndarray  # [num_ops] index of the device each op's outputs were on.
  outputs: dict[int, np.ndarray]  # The program's result tensors (last run), on the host.
  mode: str

  @property
  def median(self) -> float:
    return float(np.median(self.seconds))

  @property
  def spread(self) -> tuple[float, float]:
    """(25th, 75th) percentile of the repetitions."""
    low, high = np.percentile(self.seconds, [25, 75])
    return float(low), float(high)

  def to_json_dict(self) -> dict:
    return {"median_seconds": self.median, "p25_seconds": self.spread[0],
            "p75_seconds": self.spread[1], "repeats": len(self.seconds),
            "seconds": self.seconds.tolist(), "mode": self.mode}


def available_devices(num_devices: int | None = None) -> list:
  devices = jax.devices()
  if num_devices is not None and num_devices > len(devices):
    raise errors.DeviceSpecError(
        f"{num_devices} devices requested but JAX sees {len(devices)} "
        f"({devices[0].platform}); on a CPU set "
        f"XLA_FLAGS=--xla_force_host_platform_device_count={num_devices} before JAX starts")
  return devices if num_devices is None else devices[:num_devices]


def order_ranks(order: np.ndarray | None, num_ops: int) -> np.ndarray:
  """rank[op] = position in the schedule (0 runs first); no order: by op id."""
  if order is None:
    return np.arange(num_ops)
  order = np.asarray(order)
  if order.shape != (num_ops,) or not np.array_equal(np.sort(order), np.arange(num_ops)):
    raise errors.ConfigError(f"schedule must list each of the {num_ops} ops exactly once")
  ranks = np.empty(num_ops, np.int64)
  ranks[order] = np.arange(num_ops)
  return ranks


class Executor:
  """A graph and its program on a list of devices; `run(placement, order)` measures."""

  def __init__(self, graph: Graph, program: Program, devices: Sequence | None = None,
               mode: str = "async"):
    if mode not in MODES:
      raise errors.ConfigError(f"unknown execution mode {mode!r}; known: {', '.join(MODES)}")
    check(graph, program)
    self.graph, self.program, self.mode = graph, program, mode
    self.devices = list(devices) if devices is not None else available_devices()
    self.tensors = op_tensors(graph)
    self.inputs = op_inputs(graph)
    self.consumers: list[list[int]] = [[] for _ in range(graph.num_tensors)]
    for op, tensors in enumerate(self.inputs):
      for tensor in tensors:
        self.consumers[tensor].append(op)
    self.control_successors: list[list[int]] = [[] for _ in range(graph.num_ops)]
    for src, dst in zip(graph.control_edge_src, graph.control_edge_dst):
      self.control_successors[int(src)].append(int(dst))
    self.waits_for = np.array([len(i) for i in self.inputs], np.int64) + np.bincount(
        graph.control_edge_dst, minlength=graph.num_ops)

  def validate(self, placement, order=None) -> tuple[np.ndarray, np.ndarray]:
    """Placement and ranks, or a one-line error before anything runs."""
    placement = validate_placement(placement, self.graph.num_ops, len(self.devices))
    return placement, order_ranks(order, self.graph.num_ops)

  def run(self, placement, order=None, repeats: int = 5, warmup: int = 1) -> Measurement:
    placement, ranks = self.validate(placement, order)
    if repeats < 1 or warmup < 0:
      raise errors.ConfigError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
    for _ in range(warmup):
      self._once(placement, ranks)
    seconds = []
    for _ in range(repeats):
      elapsed, outputs = self._once(placement, ranks)
      seconds.append(elapsed)
    op_devices = np.array([self._device_index(outs[0]) for outs in outputs], np.int64)
    values = self._by_tensor(outputs)
    results = {t: np.asarray(values[t]) for t in self.program.outputs}
    return Measurement(np.array(seconds), op_devices, results, self.mode)

  def tensor_values(self, placement, order=None) -> dict[int, jax.Array]:
    """Every tensor's value after one (untimed) run, on its producer's device."""
    placement, ranks = self.validate(placement, order)
    _, outputs = self._once(placement, ranks)
    return self._by_tensor(outputs)

  def _by_tensor(self, outputs) -> dict[int, jax.Array]:
    """Per-op output lists as {tensor: array}."""
    return {t: outputs[op][k] for op, tensors in enumerate(self.tensors)
            for k, t in enumerate(tensors)}

  def _device_index(self, array) -> int:
    (device,) = array.devices()
    return self.devices.index(device)

  def _once(self, placement: np.ndarray, ranks: np.ndarray):
    graph, kernels, devices = self.graph, self.program.kernels, self.devices
    strict = self.mode == "strict"
    available: dict[tuple[int, int], jax.Array] = {}
    outputs: list = [None] * graph.num_ops
    waiting = self.waits_for.copy()
    ready: list[list[tuple[int, int]]] = [[] for _ in devices]
    sources = [op for op, kernel in enumerate(kernels) if kernel.is_source]
    waiting[sources] = -1  # Done before the start: never ready again (below zero for good).
    for op in sources:
      outputs[op] = [jax.device_put(v, devices[placement[op]]) for v in kernels[op].value]
    jax.block_until_ready(outputs)
    in_flight: list[tuple[int, list] | None] = [None] * len(devices)
    moving: list[tuple[int, int, jax.Array]] = []

    def arrived(tensor: int, device: int) -> None:
      for consumer in self.consumers[tensor]:
        if placement[consumer] == device:
          waiting[consumer] -= 1
          if not waiting[consumer]:
            heapq.heappush(ready[device], (ranks[consumer], consumer))

    def finished(op: int) -> None:
      device = placement[op]
      for tensor, array in zip(self.tensors[op], outputs[op]):
        available[(tensor, device)] = array
        arrived(tensor, device)
        targets = sorted({int(placement[c]) for c in self.consumers[tensor]} - {device},
                         key=lambda d: min(ranks[c] for c in self.consumers[tensor]
                                           if placement[c] == d))
        for target in targets:
          moved = jax.device_put(array, devices[target])
          if strict:
            moving.append((tensor, target, moved))
          else:
            available[(tensor, target)] = moved
            arrived(tensor, target)
      for successor in self.control_successors[op]:
        waiting[successor] -= 1
        if not waiting[successor]:
          heapq.heappush(ready[placement[successor]], (ranks[successor], successor))

    start = time.perf_counter()
    # Ops that wait for nothing but are not sources (an input op with a compute cost, as in
    # the Doppler files) are ready at the start; arrivals only ever make their consumers ready.
    for op in np.flatnonzero(waiting == 0):
      heapq.heappush(ready[placement[op]], (ranks[op], int(op)))
    for op in sorted(sources, key=lambda o: ranks[o]):
      finished(op)
    remaining = graph.num_ops - len(sources)
    while remaining:
      progressed = False
      for device, heap in enumerate(ready):
        while heap and in_flight[device] is None:
          _, op = heapq.heappop(heap)
          kernel = kernels[op]
          with jax.default_device(devices[device]):
            results = kernel.fn(*[available[(t, device)] for t in kernel.inputs])
          # A kernel without inputs returns uncommitted arrays; committing them keeps its
          # consumers' compiled variants the same whatever the placement.
          outputs[op] = [r if r.committed else jax.device_put(r, devices[device])
                         for r in results]
          progressed = True
          if strict:
            in_flight[device] = (op, outputs[op])
          else:
            remaining -= 1
            finished(op)
      if not strict:
        if not progressed:
          raise RuntimeError("executor stalled: the graph's dependencies were not all met")
        continue
      for device, running in enumerate(in_flight):
        if running is not None and all(a.is_ready() for a in running[1]):
          in_flight[device] = None
          remaining -= 1
          finished(running[0])
          progressed = True
      for entry in list(moving):
        if entry[2].is_ready():
          moving.remove(entry)
          available[(entry[0], entry[1])] = entry[2]
          arrived(entry[0], entry[1])
          progressed = True
      if not progressed:
        time.sleep(_POLL_SECONDS)
    jax.block_until_ready(outputs)
    return time.perf_counter() - start, outputs


def execute(graph: Graph, program: Program, placement, order=None, devices=None,
            mode: str = "async", repeats: int = 5, warmup: int = 1) -> Measurement:
  """One placement and schedule, measured (see `Executor`)."""
  return Executor(graph, program, devices, mode).run(placement, order, repeats, warmup)
