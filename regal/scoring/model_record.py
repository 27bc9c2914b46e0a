"""What a performance model is: a schedule model's record (`Model`) and a profiled workload's
split model's (`SplitModel`); `regal.scoring.models` holds them by name.

Every place that scores, checks or describes a model reads its `Model` record: the readable
reference (the test oracle and the score a result reports), the compiled host scorer and the
batched JAX version where they exist, and what the model reads and tracks. A new model is its
own package (its record in `__init__.py`) plus its name in `models.py`; nothing else branches
on a model's name.

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

import numpy as np

from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring.schedule import Schedule

HostSimulate = Callable[[np.ndarray, np.ndarray, np.ndarray],
                        tuple[np.ndarray, np.ndarray | None]]


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
  # Transfers wait for a port another holds where the devices share them (`DeviceSpec.ports`:
  # a GPU's NVLink, its network card); a model without it gives every pair its own channel,
  # and is refused such devices.
  ports: bool = False
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
  """A model of a profiled workload's split (`regal_datasets.formats.profiled.Workload`: each op on
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


