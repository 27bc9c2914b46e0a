"""The configurations engineers set by hand, and the search over all of them (issue 83).

Each configuration is a family of meshes (`plan.Mesh`) an engineer would try for it, with the
micro-batch counts the batch allows (gradient accumulation, or 1F1B's micro-batches); its
answer is its fastest mesh that fits, or, when none fits, the one that needs least memory,
marked infeasible with what overflowed:

  data_parallel    every device a replica (DDP)
  fsdp             every device a replica, everything sharded (FSDP / ZeRO-3)
  tensor_parallel  Megatron's tensor parallelism within a node, data parallel across nodes
  tensor_data      tensor x data: every tensor width within a node, data parallel over the rest
  pipeline_data    pipeline x data: 1F1B over 2..blocks stages (blocks shared out evenly, or
                   balanced so the stages holding the embedding and the head take no longer),
                   data parallel over the rest

Where a mesh does not fit, a configuration recomputes every block in the backward pass
(activation checkpointing on), given the step rematerialised (`best`'s `recomputing`).
`auto` searches the whole space: every data x tensor x pipeline factorisation, ZeRO 0-3,
every micro-batch count and the fewest recomputed blocks that fit, so its answer is never
slower than a configuration's.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from regal.parallelism import collectives, plan
from regal.parallelism import profile as profile_lib
from regal.parallelism.profile import StepProfile
from regal.parallelism.registries import CONFIGURATIONS


@dataclasses.dataclass(frozen=True)
class Configuration:
  """`meshes`: the family; `fewest_recomputed`: where a mesh does not fit, recompute the
  fewest blocks that make it fit (the search), rather than all of them or none (activation
  checkpointing switched on, as an engineer does)."""
  name: str
  summary: str
  meshes: Callable[[StepProfile, int, collectives.Fabric], Iterable[plan.Mesh]]
  fewest_recomputed: bool = False


def _divisors(n: int) -> list[int]:
  return [k for k in range(1, n + 1) if n % k == 0]


def _with_micro_batches(profile: StepProfile, data: int, tensor: int, pipeline: int,
                        zero: int = 0) -> Iterable[plan.Mesh]:
  if profile.batch % data:
    return
  # A pipeline's blocks shared out evenly, and layer by layer so that its stages take equal
  # time (the first and last hold the embedding and the head).
  splits = [()]
  if pipeline > 1:
    balanced = plan.balanced_stages(profile, pipeline, tensor)
    if balanced != plan.even_stages(profile.blocks, pipeline):
      splits.append(balanced)
  for micro in _divisors(profile.batch // data):
    if pipeline == 1 or micro >= pipeline:  # 1F1B fills its stages.
      for stages in splits:
        yield plan.Mesh(data, tensor, pipeline, zero, micro, stages=stages)


def _data_parallel(profile, devices, fabric):
  yield from _with_micro_batches(profile, devices, 1, 1)


def _fsdp(profile, devices, fabric):
  yield from _with_micro_batches(profile, devices, 1, 1, zero=3)


def _tensor_parallel(profile, devices, fabric):
  tensor = max(t for t in _divisors(devices) if t <= fabric.gpus_per_node)
  yield from _with_micro_batches(profile, devices // tensor, tensor, 1)


def _tensor_data(profile, devices, fabric):
  for tensor in _divisors(devices):
    if 1 < tensor <= fabric.gpus_per_node:
      yield from _with_micro_batches(profile, devices // tensor, tensor, 1)


def _pipeline_data(profile, devices, fabric):
  for pipeline in _divisors(devices):
    if 1 < pipeline <= profile.blocks:
      yield from _with_micro_batches(profile, devices // pipeline, 1, pipeline)


def _everything(profile, devices, fabric):
  for data in _divisors(devices):
    for tensor in _divisors(devices // data):
      pipeline = devices // (data * tensor)
      if pipeline > max(profile.blocks, 1):
        continue
      for zero in plan.ZERO_STAGES:
        if data == 1 and zero:
          continue  # Nothing to shard over.
        yield from _with_micro_batches(profile, data, tensor, pipeline, zero)


for _record in (
    Configuration("data_parallel", "every device a replica (DDP)", _data_parallel),
    Configuration("fsdp", "every device a replica, everything sharded (ZeRO-3)", _fsdp),
    Configuration("tensor_parallel", "Megatron tensor parallelism within a node",
                  _tensor_parallel),
    Configuration("tensor_data", "tensor x data parallelism", _tensor_data),
    Configuration("pipeline_data", "pipeline (1F1B) x data parallelism", _pipeline_data),
    Configuration("auto", "the search: every mesh, ZeRO stage, micro-batch count and number "
                  "of recomputed blocks", _everything, fewest_recomputed=True),
):
  CONFIGURATIONS.register(_record)
BASELINES = ("data_parallel", "fsdp", "tensor_parallel", "tensor_data", "pipeline_data")


def best(profile: StepProfile, devices: int, name: str,
         fabric: collectives.Fabric | None = None,
         recomputing: StepProfile | None = None) -> plan.Estimate | None:
  """A configuration's answer on `devices` devices: its fastest feasible mesh, else the one
  needing least memory (infeasible); None if it has no mesh for this step at all.
  `recomputing`: the same step with every block rematerialised, so that a mesh that does not
  fit may recompute blocks (`Configuration.fewest_recomputed`)."""
  fabric = fabric or collectives.FABRICS[profile.kind]
  configuration = CONFIGURATIONS.get(name)
  profiles: dict[int, StepProfile] = {0: profile}

  def priced(mesh: plan.Mesh, recomputed: int) -> plan.Estimate:
    if recomputed not in profiles:
      profiles[recomputed] = profile_lib.mixed(profile, recomputing, recomputed)
    mesh = dataclasses.replace(mesh, recomputed=recomputed)
    return plan.estimate(profiles[recomputed], mesh, fabric)

  estimates = []
  for mesh in configuration.meshes(profile, devices, fabric):
    if plan.check(profile, mesh, devices):
      continue
    found = priced(mesh, 0)
    if not found.feasible and recomputing is not None and profile.blocks:
      every = priced(mesh, profile.blocks)
      if every.feasible and configuration.fewest_recomputed:
        low, high = 0, profile.blocks  # Memory falls as blocks are recomputed: bisection.
        while high - low > 1:
          middle = (low + high) // 2
          low, high = (middle, high) if not priced(mesh, middle).feasible else (low, middle)
        every = priced(mesh, high)
      estimates.append(every)
    estimates.append(found)
  if not estimates:
    return None
  feasible = [e for e in estimates if e.feasible]
  if feasible:
    return min(feasible, key=lambda e: (e.step_seconds, e.memory_bytes))
  return min(estimates, key=lambda e: (e.memory_bytes, e.step_seconds))
