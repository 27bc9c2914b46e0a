"""A training step's time and memory per device on a mesh (issue 83).

A `Mesh` is how engineers parallelise a step: `data` x `tensor` x `pipeline` ranks (tensor
innermost, so a tensor-parallel group shares a node; pipeline outermost), a ZeRO stage (1:
optimizer state and FP32 masters sharded over the data ranks, as Megatron's distributed
optimizer; 2: gradients too; 3: the BF16 working weights too, gathered layer by layer: FSDP)
and a number of micro-batches (1F1B on a pipeline, gradient accumulation without one), and
how many blocks recompute their forward in the backward pass (priced on a `profile.mixed`).

`estimate(profile, mesh, fabric)` prices it from a `profile.StepProfile`:
* compute: each op's seconds over the data ranks and micro-batches where it grows with the
  batch, over the tensor ranks where tensor parallelism splits it; updates over the data ranks
  under ZeRO;
* a pipeline of p stages (blocks shared out evenly, or as `Mesh.stages` says, layer by
  layer: `balanced_stages` gives the first and last stages, which hold the embedding and the
  head and loss, fewer blocks) takes (m + p - 1) micro-batch slots of its slowest stage
  (1F1B), each stage sending its block input forward and its gradient back per micro-batch;
* collectives at NCCL's costs on the fabric (`collectives`): the tensor-parallel all-reduces
  on the critical path; the gradients' all-reduce (ZeRO 0) or reduce-scatter and the weights'
  all-gather (ZeRO 1-3, FSDP's per micro-batch, forward and backward) overlapped with the
  backward pass as DDP, Megatron and FSDP do, only what outlasts it counted;
* memory on the fullest stage: FP32 masters, Adam's two moments, FP32 gradients, the BF16
  working copy, sharded as the ZeRO stage says; the activations the backward pass reads for
  every micro-batch in flight (1F1B: p - s on stage s); the backward pass's working set at
  its peak. A mesh whose devices overflow is infeasible, and says what overflowed.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from regal.parallelism import collectives
from regal.parallelism.profile import StepProfile
from regal.parallelism import hardware
from regal_datasets import errors

ZERO_STAGES = (0, 1, 2, 3)


@dataclasses.dataclass(frozen=True)
class Mesh:
  data: int = 1
  tensor: int = 1
  pipeline: int = 1
  zero: int = 0
  micro_batches: int = 1
  recomputed: int = 0  # Blocks whose forward the backward recomputes (activation checkpoints).
  stages: tuple[int, ...] = ()  # Blocks per pipeline stage, in order; (): shared out evenly.

  @property
  def devices(self) -> int:
    return self.data * self.tensor * self.pipeline

  def describe(self) -> str:
    parts = [f"DP{self.data}", f"TP{self.tensor}", f"PP{self.pipeline}"]
    text = " x ".join(p for p in parts if not p.endswith("P1")) or "one device"
    if self.zero:
      text += " FSDP" if self.zero == 3 else f" ZeRO-{self.zero}"
    if self.micro_batches > 1:
      text += f", {self.micro_batches} micro-batches"
    if self.stages:
      text += f" (blocks {'/'.join(str(b) for b in self.stages)})"
    if self.recomputed:
      text += f", {self.recomputed} blocks recomputed"
    return text

  def to_json(self) -> dict:
    return {**dataclasses.asdict(self), "name": self.describe()}


@dataclasses.dataclass(frozen=True)
class Estimate:
  """A mesh's step: seconds and their parts; bytes per device on the fullest stage."""
  mesh: Mesh
  step_seconds: float
  time: dict  # Seconds: compute, pipeline bubble, tensor all-reduce, data sync, optimizer.
  memory: dict  # Bytes per device by what they hold.
  capacity: float
  feasible: bool
  overflow: str  # What does not fit, where; "" when it fits.

  @property
  def memory_bytes(self) -> float:
    return float(sum(self.memory.values()))

  def to_json(self) -> dict:
    return {"mesh": self.mesh.to_json(), "step_ms": self.step_seconds * 1e3,
            "time_ms": {k: v * 1e3 for k, v in self.time.items()},
            "memory_gb": {k: v / 1e9 for k, v in self.memory.items()},
            "memory_per_device_gb": self.memory_bytes / 1e9,
            "capacity_gb": self.capacity / 1e9, "feasible": self.feasible,
            "overflow": self.overflow}


def check(profile: StepProfile, mesh: Mesh, devices: int) -> str:
  """Why `mesh` cannot run this step on `devices` devices, or ""."""
  if mesh.devices != devices:
    return f"{mesh.describe()} uses {mesh.devices} devices, not {devices}"
  if mesh.zero not in ZERO_STAGES:
    return f"ZeRO stage {mesh.zero} does not exist"
  if mesh.pipeline > max(profile.blocks, 1):
    return f"{mesh.pipeline} pipeline stages for {profile.blocks} blocks"
  if mesh.stages and (len(mesh.stages) != mesh.pipeline or min(mesh.stages) < 1
                      or sum(mesh.stages) != profile.blocks):
    return (f"stages {'/'.join(map(str, mesh.stages))} do not share {profile.blocks} blocks "
            f"among {mesh.pipeline} stages")
  if mesh.recomputed != profile.recomputed:
    return (f"{mesh.describe()} recomputes {mesh.recomputed} blocks; the profile "
            f"{profile.recomputed} (`profile.mixed` makes one)")
  if profile.batch % (mesh.data * mesh.micro_batches):
    return (f"batch {profile.batch} does not split into {mesh.data} data ranks x "
            f"{mesh.micro_batches} micro-batches")
  return ""


def even_stages(blocks: int, pipeline: int) -> tuple[int, ...]:
  """Blocks per stage shared out evenly, the first stages taking the remainder."""
  return tuple(blocks // pipeline + (s < blocks % pipeline) for s in range(pipeline))


def stage_of(profile: StepProfile, pipeline: int, stages: tuple[int, ...] = ()) -> np.ndarray:
  """[ops] each op's pipeline stage: blocks shared out in order (`stages` of them each, or
  evenly, the first stages taking the remainder); the outer ops before the blocks on the first
  stage, after them on the last."""
  blocks = profile.blocks
  sizes = list(stages or even_stages(blocks, pipeline))
  block_stage = np.repeat(np.arange(pipeline), sizes)
  outer = profile.unit == blocks
  stage = np.where(outer, 0, block_stage[np.minimum(profile.unit, max(blocks - 1, 0))]
                   if blocks else 0)
  return np.where(outer & profile.after_blocks, pipeline - 1, stage)


def estimate(profile: StepProfile, mesh: Mesh,
             fabric: collectives.Fabric | None = None) -> Estimate:
  """The step time and memory per device of `mesh` (module doc)."""
  problem = check(profile, mesh, mesh.devices)
  if problem:
    raise errors.ConfigError(problem)
  fabric = fabric or collectives.FABRICS[profile.kind]
  d, t, p, m = mesh.data, mesh.tensor, mesh.pipeline, mesh.micro_batches
  stage = stage_of(profile, p, mesh.stages)
  seconds = profile.seconds / np.where(profile.split, t, 1)
  per_micro = profile.scales & np.isin(profile.phase, ("forward", "backward"))
  optimizer = profile.phase == "optimizer"
  once = ~per_micro & ~optimizer  # Weight and gradient casts: once a step.
  # Under ZeRO each rank casts only its shard of the updated masters to BF16 (then gathers).
  sharded_casts = once & (profile.phase == "forward") & (mesh.zero > 0)
  slot = np.zeros(p)  # One micro-batch's forward + backward on each stage.
  backward = np.zeros(p)
  tensor_sync = np.zeros(p)
  fixed = np.zeros(p)
  update = np.zeros(p)
  rows = profile.all_reduce_bytes > 0
  for s in range(p):
    on = stage == s
    slot[s] = seconds[on & per_micro].sum() / (d * m)
    backward[s] = seconds[on & per_micro & (profile.phase == "backward")].sum() / (d * m)
    tensor_sync[s] = sum(collectives.on_fabric("all_reduce", size / (d * m), fabric, t)
                         for size in profile.all_reduce_bytes[on & rows])
    fixed[s] = seconds[on & once & ~sharded_casts].sum() + seconds[on & sharded_casts].sum() / d
    update[s] = seconds[on & optimizer].sum() / (d if mesh.zero else 1)
  send = 0.0
  if p > 1:  # A block input forward and its gradient back, per micro-batch, between stages.
    send = 2 * collectives.on_fabric("send", profile.boundary_bytes / (d * m), fabric, 2,
                                     stride=t * d)
  slots = (m + p - 1) if p > 1 else m
  per_slot = slot + tensor_sync + send
  pipeline_seconds = slots * float(per_slot.max())

  # Bytes per device, per stage (FP32 masters as the graph holds them).
  masters = np.zeros(p)
  for s in range(p):
    units = np.unique(profile.unit[stage == s])
    for u in units:
      whole, split = profile.parameter_bytes[u], profile.parameter_split_bytes[u]
      masters[s] += split / t + (whole - split)
  data_sync = np.zeros(p)
  for s in range(p):
    grads = masters[s]  # FP32 gradients, as many bytes as the masters.
    if mesh.zero == 0:
      sync = collectives.on_fabric("all_reduce", grads, fabric, d, stride=t)
    else:
      sync = (collectives.on_fabric("reduce_scatter", grads, fabric, d, stride=t)
              + collectives.on_fabric("all_gather", masters[s] / 2, fabric, d, stride=t))
    if mesh.zero == 3:  # Weights gathered for each micro-batch's forward and backward.
      sync += 2 * m * collectives.on_fabric("all_gather", masters[s] / 2, fabric, d, stride=t)
      window = m * slot[s]
    else:
      window = backward[s]
    data_sync[s] = max(0.0, sync - window)
  step = pipeline_seconds + float((fixed + update + data_sync).max())

  memory_stage = []
  activations = np.zeros(p)
  for s in range(p):
    on = stage == s
    split_share = np.where(profile.split, t, 1)
    saved = float((profile.saved_bytes[on] / split_share[on]).sum()) / (d * m)
    in_flight = min(m, p - s) if p > 1 else 1
    backward_on = on & (profile.phase == "backward")
    working = float((profile.working_bytes[backward_on]
                     + profile.working_split_bytes[backward_on] / t).max(initial=0.0)) / (d * m)
    activations[s] = saved * in_flight
    sharded = d if mesh.zero else 1
    # FSDP gathers one unit's weights at a time: the rest of that unit beside every shard.
    largest_unit = max((profile.parameter_split_bytes[u] / t + profile.parameter_bytes[u]
                        - profile.parameter_split_bytes[u]
                        for u in np.unique(profile.unit[on])), default=0.0)
    memory_stage.append({
        "parameters_fp32": masters[s] / sharded,
        "optimizer_state": 2 * masters[s] / sharded,
        "gradients_fp32": masters[s] / (d if mesh.zero >= 2 else 1),
        "parameters_bf16": (masters[s] / 2 / d + largest_unit / 2 * (1 - 1 / d)
                            if mesh.zero == 3 else masters[s] / 2),
        "activations": activations[s],
        "working": working,
    })
  fullest = max(range(p), key=lambda s: sum(memory_stage[s].values()))
  memory = memory_stage[fullest]
  capacity = hardware.KINDS[profile.kind].memory_bytes
  total = sum(memory.values())
  overflow = ""
  if total > capacity:
    parts = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in memory.items() if v >= 0.05e9)
    overflow = (f"{mesh.describe()} needs {total / 1e9:.1f} GB on each device of stage "
                f"{fullest} ({parts} GB) of {capacity / 1e9:.0f} GB")
  slowest = int(np.argmax(per_slot))
  time = {"compute": m * float(slot[slowest]),
          "pipeline_bubble": pipeline_seconds - m * float(per_slot[slowest]),
          "tensor_all_reduce": m * float(tensor_sync[slowest]),
          "pipeline_sends": m * send,
          "data_sync_exposed": float(data_sync.max()),
          "optimizer_and_casts": float((fixed + update).max())}
  return Estimate(mesh, step, time, memory, capacity, not overflow, overflow)


def balanced_stages(profile: StepProfile, pipeline: int, tensor: int = 1) -> tuple[int, ...]:
  """Blocks per stage, in order, that make the slowest stage's micro-batch (its blocks'
  forward and backward, with the embedding on the first stage and the head and loss on the
  last; split ops over `tensor` ranks) as short as a contiguous split allows."""
  blocks = profile.blocks
  if not 1 <= pipeline <= max(blocks, 1):
    raise errors.ConfigError(f"{pipeline} pipeline stages for {blocks} blocks")
  per_micro = profile.scales & np.isin(profile.phase, ("forward", "backward"))
  seconds = np.where(per_micro, profile.seconds / np.where(profile.split, tensor, 1), 0.0)
  block = np.bincount(np.minimum(profile.unit, blocks), weights=seconds,
                      minlength=blocks + 1)[:blocks]
  outer = (profile.unit == blocks) & per_micro
  return balanced_split(block, float(seconds[outer & ~profile.after_blocks].sum()),
                        float(seconds[outer & profile.after_blocks].sum()), pipeline)


def balanced_split(block: np.ndarray, first: float, last: float, pipeline: int
                   ) -> tuple[int, ...]:
  """The contiguous split of blocks (seconds `block` [B]) into `pipeline` non-empty stages,
  the first also paying `first` and the last `last`, whose slowest stage is fastest: a dynamic
  programme; among equals, the split whose earlier stages hold more blocks."""
  blocks = len(block)
  if pipeline == 1:
    return (blocks,)
  prefix = np.concatenate([[0.0], np.cumsum(block)])

  def cost(s: int, start: int, end: int) -> float:
    return (prefix[end] - prefix[start] + (first if s == 0 else 0.0)
            + (last if s == pipeline - 1 else 0.0))

  # slowest[s][b]: the slowest of stages 0..s holding blocks 0..b-1, at its least; `cut`: the
  # first block of stage s in that split.
  slowest = np.full((pipeline, blocks + 1), np.inf)
  cut = np.zeros((pipeline, blocks + 1), int)
  for b in range(1, blocks + 1):
    slowest[0, b] = cost(0, 0, b)
  for s in range(1, pipeline):
    for b in range(s + 1, blocks + 1):
      for start in range(b - 1, s - 1, -1):  # Later cuts first: ties keep early stages full.
        value = max(slowest[s - 1, start], cost(s, start, b))
        if value < slowest[s, b]:
          slowest[s, b], cut[s, b] = value, start
  sizes, b = [], blocks
  for s in range(pipeline - 1, 0, -1):
    sizes.append(b - int(cut[s, b]))
    b = int(cut[s, b])
  return tuple([b] + sizes[::-1])
