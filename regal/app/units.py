"""Figures in the units people read: times in s / ms / us when a graph's costs are times,
memory in GB / MB / kB.

A model reports times in its own units (`Model.time_unit`: the doppler model in Doppler's, its
clock / 1e10; the others in the graph's cost units). A graph imported from JAX or built as a
sharded workload has costs in a known time (`seconds_per_cost_unit`: FLOPs over
`flops_per_byte`, so one cost unit is the time its link takes per byte, 100 GB/s nominal);
then the other models' times read in seconds, scaled to the unit that suits the run. Every
figure a summary prints goes through `TimeUnit` and `MemoryUnit`, and the result's JSON carries
them beside the raw values (`optimize_lib`'s `display`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from regal_datasets.graph import Graph
from regal_datasets.jax_import import NOMINAL_LINK_BYTES_PER_SECOND
from regal.scoring import models

SECONDS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))
BYTES = (("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


def seconds_per_cost_unit(graph: Graph) -> float | None:
  """Seconds per unit of the graph's costs when they are times (FLOPs over `flops_per_byte`,
  at the link rate the graph names or the nominal one); None when they are abstract."""
  metadata = graph.metadata or {}
  if "flops_per_byte" not in metadata:
    return None
  return 1.0 / float(metadata.get("link_bytes_per_second", NOMINAL_LINK_BYTES_PER_SECOND))


@dataclasses.dataclass(frozen=True)
class TimeUnit:
  """Model times -> shown times: `model`'s own conversion (Doppler's), else times `scale`;
  `name` the unit; `note` where a time unit of an abstract cost comes from."""
  model: str
  scale: float
  name: str
  note: str = ""

  def __call__(self, times):
    spec = models.get(self.model)
    if spec.units is not None or spec.time_scale != 1.0:
      return spec.in_units(times)
    return np.asarray(times, float) * self.scale if self.scale != 1.0 else times

  def to_json(self) -> dict[str, Any]:
    return {"scale": self.scale, "name": self.name, "note": self.note}


def time_unit(model: str, graph: Graph, typical: float) -> TimeUnit:
  """How `model`'s times on `graph` read: seconds (s, ms, us or ns, whichever shows `typical`,
  e.g. the single-device makespan, as 1 or more) where the costs are times, else the model's
  own unit."""
  spec = models.get(model)
  seconds = seconds_per_cost_unit(graph)
  if seconds is None or spec.units is not None or spec.time_scale != 1.0:
    return TimeUnit(model, spec.time_scale, spec.time_unit)
  typical_seconds = abs(float(typical)) * seconds
  name, size = next(((n, s) for n, s in SECONDS if typical_seconds >= s), SECONDS[-1])
  rate = 1.0 / seconds
  flops = float(graph.metadata["flops_per_byte"]) * rate
  note = (f"on the nominal device the graph was built for: {flops / 1e12:.3g} TFLOP/s at "
          f"speed 1, links of {rate / 1e9:.3g} GB/s at bandwidth 1")
  roofline = graph.metadata.get("roofline")
  if roofline:
    note = (f"the roofline of {roofline['device']} ({roofline['peak_tflops']:.4g} TFLOP/s, "
            f"{roofline['memory_tb_per_s']:.4g} TB/s) at speed 1, links of {rate / 1e9:.3g} "
            f"GB/s at bandwidth 1")
  return TimeUnit(model, seconds / size, name, note)


@dataclasses.dataclass(frozen=True)
class MemoryUnit:
  """Bytes -> shown memory: bytes times `scale`, in `name`."""
  scale: float
  name: str

  def __call__(self, values):
    return [None if v is None else float(v) * self.scale for v in values]

  def to_json(self) -> dict[str, Any]:
    return {"scale": self.scale, "name": self.name}


def memory_unit(largest: float) -> MemoryUnit:
  """GB, MB or kB, whichever shows `largest` bytes as 1 or more; bytes below 1 kB."""
  largest = abs(float(largest)) if largest is not None and math.isfinite(largest) else 0.0
  for name, size in BYTES:
    if largest >= size:
      return MemoryUnit(1.0 / size, name)
  return MemoryUnit(1.0, "bytes")


def objective_text(objective: str, time: TimeUnit, memory: MemoryUnit) -> Callable[[float], str]:
  """An objective (the model's value) as people read it, with its unit: a time in `time`'s
  unit, or, minimizing memory, bytes in `memory`'s (what the search's live line shows)."""
  if objective == "memory":
    return lambda value: f"{memory([value])[0]:.6g} {memory.name}"
  return lambda value: f"{float(time(value)):.6g} {time.name}"
