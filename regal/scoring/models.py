"""The performance models, one record each, in one registry: schedule models (`Model`) and the
models of a profiled workload's split (`SplitModel`, at the end).

Every place that scores, checks or describes a model reads its `Model` record: the readable
reference (the test oracle and the score a result reports), the compiled host scorer and the
batched JAX version where they exist, and what the model reads and tracks. A new model is its
own file plus one `register(Model(...))` call; nothing else branches on a model's name.

Signatures every record follows (D devices, o ops, t tensors, P chromosomes):
  reference(graph, devices, placement [o], op_priority [o], transfer_priority [t, D], dtype)
      -> `schedule.Schedule`;
  native(graph, devices, memory) -> a host function (placement [P, o] int32, op_priority
      [P, o], transfer_priority [P, t, D]) -> (makespan [P] float32, peak memory [P, D] or
      None), compiled on the host (numba); `memory` asks for peaks;
  jax(graph, devices, dtype, memory) -> (data, simulate): `data` a pytree of arrays and
      `simulate(data, placement, op_priority, transfer_priority)` -> (makespan [P], peak [P, D]
      or None), pure JAX, batched over the leading axis;
  native_completion(graph, devices, memory) -> as `native`, with each chromosome's mean op
      completion time [P] third: the native search's tie-breaker among equal makespans
      (`regal.scoring.performance.TIE_BREAK`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from datasets import errors
from datasets.devices import DeviceSpec
from datasets.graph import Graph
from regal.scoring import (blocks, delay_model, doppler_sim, native_delay, native_doppler,
                           native_sync, native_wc, pipeline, reference_models, sync_model,
                           wc_model)
from regal.scoring.schedule import Schedule
from regal.scoring.sim_graph import SimGraph, build_sim_graph

HostSimulate = Callable[[np.ndarray, np.ndarray, np.ndarray],
                        tuple[np.ndarray, np.ndarray | None]]
WC_CHUNK = 8  # Work entries per loop step of the JAX event models: fewer steps beat narrower.


@dataclasses.dataclass(frozen=True)
class Model:
  """One performance model (see the module docstring for the functions' signatures)."""
  name: str
  summary: str  # One line for --help and error messages.
  reference: Callable[..., Schedule]
  native: Callable[[Graph, DeviceSpec, bool], HostSimulate] | None = None
  jax: Callable[[Graph, DeviceSpec, Any, bool], tuple[Any, Callable]] | None = None
  native_completion: Callable[[Graph, DeviceSpec, bool], Callable] | None = None
  memory: bool = False  # Tracks peak memory: the memory objectives are open to it.
  reads_op_priority: bool = True  # False: priorities change nothing (moves on them are wasted).
  # False: transfer priorities change nothing, so the search's chromosomes carry none (on 8
  # devices they are half the genes, and drawing them costs as much as scoring on a fast model).
  reads_transfer_priority: bool = True
  native_float32_only: bool = True  # The native scorer computes in float32 whatever the dtype.
  # CP-SAT (`baselines.exact`) models this model's makespan exactly: the solver beside the
  # search and the polish's window re-solves run on it (the delay model).
  exact_solver: bool = False
  time_scale: float = 1.0  # Reported times = model times * time_scale, in `time_unit`.
  time_unit: str = "cost units"
  # Model times (scalars or arrays) -> `time_unit`, when not simply times `time_scale`.
  units: Callable[[Any], Any] | None = None

  def in_units(self, times):
    """Model times (scalars or arrays) in `time_unit`: what summaries, charts and reports
    print."""
    if self.units is not None:
      return self.units(times)
    return times * self.time_scale if self.time_scale != 1.0 else times

  def __post_init__(self):
    if self.native is None and self.jax is None:
      raise ValueError(f"model {self.name!r} needs a native or a JAX scorer")


@dataclasses.dataclass(frozen=True)
class SplitModel:
  """A model of a profiled workload's split (`datasets.formats.profiled.Workload`: each op on
  an accelerator or on the CPU side) rather than of a schedule on a DeviceSpec. A profile's
  per-kind costs (accelerator and CPU latencies, ops only a CPU runs), co-location classes and
  memory cap are the workload's, so these functions take a workload and a split [o]."""
  name: str
  summary: str
  flag: str  # How `regal.optimize` asks for it.
  value: Callable[[Any, np.ndarray], float]  # the readable reference
  violations: Callable[[Any, np.ndarray], list[str]]  # one line each; empty: feasible
  lower_bound: Callable[[Any], float]  # never above a feasible split's value
  kernel: str  # the compiled search's (`regal.baselines.pipeline_local_search.KERNELS`)
  default_evals: int  # moves the search scores by default, at least
  evals_per_class: int = 0  # ... or this many per co-location class, if more
  # The default search also stops after this many perturb-and-descend rounds: on a graph of a
  # few classes a round scores a handful of moves, and 4M moves took 66 s of rounds on 3 ops.
  # The shared workloads take at most 8,977 rounds (BERT-24 training), so none is cut.
  default_rounds: int = 10_000

  def budget(self, workload) -> int:
    """The default search's moves on `workload`: a larger graph gets more of them."""
    return max(self.default_evals, self.evals_per_class * workload.num_groups)


_REGISTRY: dict[str, Model | SplitModel] = {}


def register(model: Model | SplitModel) -> Model | SplitModel:
  """Adds a model under its name (a name may be registered once)."""
  if model.name in _REGISTRY:
    raise ValueError(f"model {model.name!r} is registered already")
  _REGISTRY[model.name] = model
  return model


def get(name: str) -> Model:
  """A schedule model (scoring chromosomes of a graph on a DeviceSpec)."""
  model = _REGISTRY.get(name)
  if isinstance(model, SplitModel):
    raise errors.ConfigError(f"model {name!r} scores a profiled workload's split ({model.flag}"
                             f"), not a schedule")
  if model is None:
    raise errors.ConfigError(f"unknown model {name!r}; known: {', '.join(names())}")
  return model


def get_split(name: str) -> SplitModel:
  model = _REGISTRY.get(name)
  if not isinstance(model, SplitModel):
    raise errors.ConfigError(f"unknown split model {name!r}; known: "
                             f"{', '.join(split_names())}")
  return model


def names() -> tuple[str, ...]:
  """The schedule models."""
  return tuple(name for name, model in _REGISTRY.items() if isinstance(model, Model))


def split_names() -> tuple[str, ...]:
  return tuple(name for name, model in _REGISTRY.items() if isinstance(model, SplitModel))


# ----- the event models (wc, sync): one padded work-list graph for JAX, one host graph ------
def pad_to(sim: SimGraph, placement, op_priority, transfer_priority):
  """Decoded arrays [P, o], [P, o], [P, t, D] padded to the sim graph's bucket sizes (padded
  ops and tensors are masked out by the models)."""
  extra_ops = sim.op_mask.shape[0] - placement.shape[-1]
  extra_tensors = sim.tensor_size.shape[0] - transfer_priority.shape[-2]
  return (jnp.pad(placement, ((0, 0), (0, extra_ops))),
          jnp.pad(op_priority, ((0, 0), (0, extra_ops))),
          jnp.pad(transfer_priority, ((0, 0), (0, extra_tensors), (0, 0))))


def _event_native(simulate: Callable) -> Callable[[Graph, DeviceSpec, bool], HostSimulate]:
  def build(graph: Graph, devices: DeviceSpec, memory: bool) -> HostSimulate:
    host_graph = native_wc.build_native_graph(graph, devices, memory=memory)
    return lambda placement, priority, transfer: simulate(host_graph, placement, priority,
                                                          transfer)
  return build


def _event_jax(simulate_batch: Callable, always_memory: bool):
  """`always_memory`: the model's JAX version reads the memory arrays even for runtime."""
  def build(graph: Graph, devices: DeviceSpec, dtype, memory: bool):
    sim = jax.tree_util.tree_map(jnp.asarray, build_sim_graph(
        graph, devices, dtype=dtype, memory=memory or always_memory))

    def simulate(sim, placement, op_priority, transfer_priority):
      result = simulate_batch(sim, *pad_to(sim, placement, op_priority, transfer_priority),
                              chunk=WC_CHUNK, record_times=False)
      return result.makespan, result.peak_memory
    return sim, simulate
  return build


def _wc_reference(graph, devices, placement, op_priority, transfer_priority, dtype) -> Schedule:
  return reference_models.simulate_wc(graph, devices, placement, op_priority, transfer_priority,
                                      dtype=dtype)


def _sync_reference(graph, devices, placement, op_priority, transfer_priority, dtype
                    ) -> Schedule:
  return reference_models.simulate_synchronous(graph, devices, placement, op_priority,
                                               transfer_priority, dtype=dtype)


# ----- the delay model -------------------------------------------------------------------------
def _delay_reference(graph, devices, placement, op_priority, transfer_priority, dtype
                     ) -> Schedule:
  del transfer_priority  # Every message leaves at once.
  return reference_models.simulate_delay(graph, devices, placement, op_priority, dtype=dtype)


def _delay_native(graph: Graph, devices: DeviceSpec, memory: bool) -> HostSimulate:
  del memory
  host_graph = native_delay.build_native_delay_graph(graph, devices)
  return lambda placement, priority, transfer: (
      native_delay.simulate(host_graph, placement, priority), None)


def _delay_jax(graph: Graph, devices: DeviceSpec, dtype, memory: bool):
  del memory
  data = jax.tree_util.tree_map(jnp.asarray, delay_model.build_delay_graph(graph, devices, dtype))
  return data, lambda data, placement, priority, transfer: (
      delay_model.makespan_batch(data, placement, priority), None)


# ----- the Doppler repository's simulator -------------------------------------------------------
def _doppler_reference(graph, devices, placement, op_priority, transfer_priority, dtype
                       ) -> Schedule:
  del op_priority, transfer_priority, dtype  # It orders by its own event queue, in float64.
  return doppler_sim.simulate_doppler(graph, devices, placement)


def _doppler_native(graph: Graph, devices: DeviceSpec, memory: bool) -> HostSimulate:
  del memory
  host_graph = native_doppler.build_doppler_graph(graph, devices)
  return lambda placement, priority, transfer: (
      native_doppler.simulate(host_graph, placement).astype(np.float32), None)


register(Model(
    "wc", "work-conserving asynchronous model (Doppler paper), with peak memory",
    reference=_wc_reference, native=_event_native(native_wc.simulate),
    jax=_event_jax(wc_model.simulate_batch, always_memory=False),
    native_completion=_event_native(native_wc.simulate_with_completion), memory=True))
register(Model(
    "sync", "REGAL's synchronous-transfer model, with peak memory",
    reference=_sync_reference, native=_event_native(native_sync.simulate),
    jax=_event_jax(sync_model.simulate_batch, always_memory=True), memory=True))
register(Model(
    "doppler", "the Doppler repository's simulator (placement only), runtime",
    reference=_doppler_reference, native=_doppler_native, reads_op_priority=False,
    reads_transfer_priority=False,
    native_float32_only=False, time_scale=1.0 / doppler_sim.DOPPLER_TIME_SCALE,
    time_unit="Doppler units", units=doppler_sim.doppler_units))
register(Model(
    "delay", "the task-scheduling literature's delay model (ops in priority order), runtime",
    reference=_delay_reference, native=_delay_native, jax=_delay_jax,
    reads_transfer_priority=False, exact_solver=True))


# ----- a profiled workload's split (Tarnawski et al.) -----------------------------------------
register(SplitModel(
    "throughput", "pipeline max-load (time per sample)", "--objective throughput",
    pipeline.max_load, pipeline.violations, pipeline.lower_bound, kernel="throughput",
    # 1-6 s on the shared workloads (2-core CPU): moves are scored by change. A 2,142-op graph
    # (BERT-6 training twice, 494 classes) ended at its start with 4M moves (142.40) and
    # reached 140.46-140.54 with 8M (seeds 0-2, 9-11 s); 16K moves a class gives it 7.9M.
    default_evals=4_000_000, evals_per_class=16_000))
register(SplitModel(
    "blocks", "single-sample latency, contiguous blocks", "--model blocks",
    blocks.latency, blocks.violations, blocks.lower_bound, kernel="blocks",
    # 1-4 s on the shared workloads: each move is scored in full.
    default_evals=100_000))
