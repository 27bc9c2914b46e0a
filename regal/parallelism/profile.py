"""What a training-step graph costs, op by op, before it is split (issue 83).

`profile(graph, kind)` reads a graph made by `regal_datasets.train_step` (the zoo's `--step
train`) and returns a `StepProfile`: per op its phase, its unit (a repeated block, or the
model's outer ops), its seconds on one device of `kind`, whether it grows with the batch, and
what Megatron-style tensor parallelism does to it. Everything `plan.estimate` needs to price a
mesh is here, so a mesh is priced without touching the graph again.

Held between the passes: the forward tensors the backward reads, where they reach memory (a
matmul's, reduction's or fused kernel's result, or an elementwise result another kernel
reads); an elementwise tensor inside a kernel, and any cast or broadcast, the backward
recomputes from those (`saved_bytes`). The backward's working set: its batch-sized tensors
live after each op, made and not yet read for the last time (`working_bytes`).

Seconds: kernels as XLA fuses them, each at its roofline plus a launch, as the per-op path
costs them (`roofline.fusion_groups`, `roofline.fused_seconds`), fused here inside a unit.

Tensor parallelism (Megatron-LM, Shoeybi et al. 2019), derived from the data flow rather than
from layer names: walking the ops in order, a tensor is `replicated`, `split` (each rank
holds a part) or `partial` (each rank holds a summand). An op that reads a parameter matrix
(a matmul on a weight, an embedding lookup) starts a split region when its other input is
replicated (column-parallel) and ends one when it is split (row-parallel: the output is
partial); a sum with a partial term stays partial; any other reader of a partial first
all-reduces it (the collective is charged there, once per tensor); an op reading a split
tensor is split and runs 1 / t of its work on each of t ranks. In the backward pass the same
rule gives Megatron's two all-reduces per block and the input gradients' partial sums.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from regal.parallelism import roofline
from regal_datasets import errors, train_step
from regal_datasets.graph import Graph

BLOCK_PATTERN = r"(Block|Layer)_\d+$"  # Flax names the k-th `XBlock` child `XBlock_k`.
_VIEWS = {"convert_element_type", "broadcast_in_dim", "reshape", "transpose", "squeeze",
          "expand_dims"}
REPLICATED, SPLIT, PARTIAL = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class StepProfile:
  """Per-op arrays of one training step on one device (full batch, no split); `units` names
  each unit index (blocks in order, then "outer")."""
  graph_name: str
  kind: str
  batch: int
  units: tuple[str, ...]
  unit: np.ndarray  # [ops] int: index into `units`.
  phase: np.ndarray  # [ops] str: `train_step.PHASES`.
  seconds: np.ndarray  # [ops] roofline seconds, fused, launch overhead included.
  scales: np.ndarray  # [ops] bool: its work grows with the batch.
  split: np.ndarray  # [ops] bool: tensor parallelism divides its work.
  all_reduce_bytes: np.ndarray  # [ops] bytes a tensor-parallel group all-reduces before it.
  saved_bytes: np.ndarray  # [ops] its outputs the backward pass reads (held in between).
  working_bytes: np.ndarray  # [ops] backward tensors live after it, on unsplit ops...
  working_split_bytes: np.ndarray  # [ops] ... and on split ones (a rank holds 1 / t).
  parameter_bytes: np.ndarray  # [units] FP32 masters each unit holds.
  parameter_split_bytes: np.ndarray  # [units] of which tensor parallelism splits.
  boundary_bytes: float  # A block's input: what a pipeline stage sends per step.
  after_blocks: np.ndarray  # [ops] bool: an outer op fed by the blocks (the head, the loss).
  training: dict
  recomputed: int = 0  # Blocks whose forward the backward recomputes (`mixed`).

  @property
  def blocks(self) -> int:
    return len(self.units) - 1


_PER_OP = ("unit", "phase", "seconds", "scales", "split", "all_reduce_bytes", "saved_bytes",
           "working_bytes", "working_split_bytes", "after_blocks")


def mixed(plain: StepProfile, recomputing: StepProfile, blocks: int) -> StepProfile:
  """A step whose first `blocks` blocks are recomputed in the backward pass (their ops from
  `recomputing`, the same model traced with every block rematerialised) and the others held
  (from `plain`): identical blocks priced once each way, any count chosen without a trace."""
  if plain.units != recomputing.units or plain.batch != recomputing.batch:
    raise errors.ConfigError(f"{recomputing.graph_name} is not {plain.graph_name} "
                             f"rematerialised: their blocks or batch differ")
  if not 0 <= blocks <= plain.blocks:
    raise errors.ConfigError(f"{blocks} blocks recomputed of {plain.blocks}")
  if blocks == 0:
    return plain
  take_recomputed = recomputing.unit < blocks
  take_plain = plain.unit >= blocks
  arrays = {name: np.concatenate([getattr(recomputing, name)[take_recomputed],
                                  getattr(plain, name)[take_plain]]) for name in _PER_OP}
  return dataclasses.replace(plain, recomputed=blocks, **arrays)


def _block_of(scope: str, pattern: re.Pattern) -> str | None:
  for part in scope.split("/"):
    if pattern.search(part):
      return re.sub(r"^Checkpoint", "", part)  # nn.remat renames `XBlock` `CheckpointXBlock`.
  return None


def _input_block(name: str, pattern: re.Pattern) -> str | None:
  for part in re.findall(r"\['([^']+)'\]", name):
    if pattern.search(part):
      return re.sub(r"^Checkpoint", "", part)
  return None


def profile(graph: Graph, kind: str, block_pattern: str = BLOCK_PATTERN,
            costs: tuple[float, float, float] | None = None) -> StepProfile:
  """The `StepProfile` of a training-step graph on devices of `kind` (`costs`: its kernels'
  (matmul share, memory share, launch seconds) instead of `roofline.KERNEL_COSTS`')."""
  if "training" not in graph.metadata or "op_scopes" not in graph.metadata:
    raise errors.ConfigError(
        f"graph {graph.name!r} is not a training step (make one with regal_datasets.zoo "
        f"--step train, or regal_datasets.train_step)")
  if kind not in roofline.KERNEL_COSTS:
    raise errors.ConfigError(f"no kernel costs for kind {kind!r}; known: "
                             f"{', '.join(roofline.KERNEL_COSTS)}")
  pattern = re.compile(block_pattern)
  meta = graph.metadata
  num_ops = graph.num_ops
  phase = np.array(train_step.phases(graph))
  operands = meta["operands"]
  shapes = [tuple(s) for s in meta["tensor_shapes"]]
  sources = phase == "input"
  size = graph.tensor_size
  producer = graph.tensor_producer

  # Units: blocks in the order they first run, then the outer ops (embedding, head, loss).
  names: list[str] = []
  op_block: list[str | None] = []
  for op, scope in enumerate(meta["op_scopes"]):
    block = (_input_block(graph.op_names[op], pattern) if sources[op]
             else _block_of(scope, pattern))
    if block is not None and block not in names:
      names.append(block)
    op_block.append(block)
  units = tuple(names) + ("outer",)
  index = {name: k for k, name in enumerate(units)}
  unit = np.array([index[b] if b is not None else len(names) for b in op_block])
  readers = roofline.tensor_readers(graph)
  # What grows with the batch: ops touching a tensor whose leading axis is the batch (or the
  # batch times the sequence, flattened), unless the tensor derives from the parameters and
  # optimizer state alone (a weight whose first axis happens to match).
  outputs_of: list[list[int]] = [[] for _ in range(num_ops)]
  for t in range(graph.num_tensors):
    outputs_of[producer[t]].append(t)
  data = set(meta["data_inputs"])
  batch = int(shapes[next(t for t in range(graph.num_tensors) if producer[t] in data)][0])
  tokens = {batch} | {batch * shapes[t][1] for t in range(graph.num_tensors)
                      if producer[t] in data and len(shapes[t]) >= 2}
  # Parameter-shaped tensors (a weight, its gradient, its update) never carry the batch, even
  # where the batch equals a weight's first axis (not where the batch times the sequence
  # does: a flattened activation may be shaped like a position table).
  weight_shapes = {shapes[t] for t in range(graph.num_tensors)
                   if sources[producer[t]] and producer[t] not in data}
  state_only = np.zeros(graph.num_tensors, bool)  # Derived from parameters / state alone.
  for op in range(num_ops):
    ins = [t for t in operands[op] if t is not None]
    derived = (sources[op] and op not in data) or (bool(ins) and all(state_only[t]
                                                                     for t in ins))
    for t in outputs_of[op]:
      state_only[t] = derived or (bool(shapes[t]) and shapes[t] in weight_shapes
                                  and shapes[t][0] == batch)
  carries = np.array([bool(shapes[t]) and shapes[t][0] in tokens and not state_only[t]
                      for t in range(graph.num_tensors)])
  scales = np.array([not sources[op] and any(carries[t] for t in operands[op] + outputs_of[op]
                                             if t is not None) for op in range(num_ops)])
  # Per-parameter work outside the blocks' scopes (the step casts every weight to BF16 and
  # every gradient back, then updates it) belongs to the block whose parameter it is.
  outer = len(names)
  for op in range(num_ops):
    if unit[op] == outer and not sources[op] and not scales[op]:
      owners = {int(unit[producer[t]]) for t in operands[op]
                if t is not None and len(shapes[t]) > 0}
      if len(owners) == 1:
        unit[op] = owners.pop()
  group = roofline.fusion_groups(graph, phase, unit, readers)
  seconds = roofline.fused_seconds(graph, kind, phase, group, readers, costs)

  # Parameters: the FP32 masters (argument 0) and their views (casts, reshapes).
  is_param_input = np.array([sources[op] and graph.op_names[op].startswith("input[0]")
                             for op in range(num_ops)])
  param_view = np.zeros(graph.num_tensors, bool)
  param_of = np.full(graph.num_tensors, -1)
  for t in range(graph.num_tensors):
    op = producer[t]
    if is_param_input[op]:
      param_view[t], param_of[t] = True, t
    elif roofline.primitive_class(graph.op_types[op]) == "movement" and phase[op] != "optimizer":
      ins = [x for x in operands[op] if x is not None]
      if len(ins) == 1 and param_view[ins[0]]:
        param_view[t], param_of[t] = True, param_of[ins[0]]

  state = np.zeros(graph.num_tensors, np.int8)
  split = np.zeros(num_ops, bool)
  all_reduce = np.zeros(num_ops)
  split_params: set[int] = set()
  reduced: set[int] = set()
  for op in range(num_ops):
    if sources[op]:
      continue
    ins = [t for t in dict.fromkeys(operands[op]) if t is not None]
    weights = [t for t in ins if param_view[t] and len(shapes[t]) >= 2]
    activations = [t for t in ins if not param_view[t]]
    op_type = graph.op_types[op]
    if weights and op_type in ("dot_general", "gather"):
      for t in activations:
        if state[t] == PARTIAL and t not in reduced:
          all_reduce[op] += size[t]
          reduced.add(t)
      into_split = any(state[t] == SPLIT for t in activations)
      out = PARTIAL if (into_split or op_type == "gather") else SPLIT
      split[op] = True
      split_params.update(int(param_of[t]) for t in weights)
    elif (op_type in ("add", "add_any") and any(state[t] == PARTIAL for t in ins)
          and not any(state[t] == SPLIT for t in ins)):
      # A replicated addend joins as its t-th part on each rank: partial sums add up locally
      # and are all-reduced once, where something other than a sum reads them.
      out, split[op] = PARTIAL, True
    else:
      for t in ins:
        if state[t] == PARTIAL and t not in reduced:
          all_reduce[op] += size[t]
          reduced.add(t)
      split[op] = any(state[t] == SPLIT for t in ins)
      out = SPLIT if split[op] else REPLICATED
    for t in outputs_of[op]:
      state[t] = out
  # Held for the backward pass: the forward tensors it reads, where they reach memory (a
  # matmul's or reduction's result, or one another kernel reads); what an elementwise op made
  # inside a kernel, the backward's fusion recomputes from the held tensors it derives from.
  heavy = np.array([roofline.primitive_class(t) not in roofline.FUSIBLE_CLASSES for t in graph.op_types])
  held: set[int] = set()
  roots_of: dict[int, set[int]] = {}

  def roots(tensor: int) -> set[int]:
    """The held tensors a forward tensor is recomputed from (itself if it is held)."""
    if tensor in roots_of:
      return roots_of[tensor]
    op = producer[tensor]
    # A cast, broadcast or reshape is recomputed wherever it is read (XLA duplicates it into
    # each reader's kernel): never held for its own sake.
    leaves = graph.op_types[op] not in _VIEWS and any(
        phase[r] == "forward" and group[r] != group[op] for r in readers[tensor])
    if sources[op] or heavy[op] or leaves:
      found = {tensor}
    else:
      found = set().union(*(roots(t) for t in operands[op] if t is not None)) \
          if any(t is not None for t in operands[op]) else {tensor}
    roots_of[tensor] = found
    return found

  for t in range(graph.num_tensors):
    if phase[producer[t]] == "forward" and any(phase[r] == "backward" for r in readers[t]):
      held |= roots(t)
  saved = np.zeros(num_ops)
  for t in held:
    if phase[producer[t]] == "forward":  # Inputs and parameters are counted as such.
      saved[producer[t]] += size[t]
  # The backward pass's working set: after each op, the bytes of its batch-sized tensors
  # still to be read (made, not yet read for the last time), split or whole.
  live_whole = np.zeros(num_ops + 1)
  live_split = np.zeros(num_ops + 1)
  for t in range(graph.num_tensors):
    op = producer[t]
    if phase[op] != "backward" or not carries[t]:
      continue
    last = max(readers[t], default=op)
    target = live_split if split[op] else live_whole
    target[op] += size[t]
    target[last + 1] -= size[t]
  working_whole = np.cumsum(live_whole)[:num_ops]
  working_split = np.cumsum(live_split)[:num_ops]
  parameter_bytes = np.zeros(len(units))
  parameter_split = np.zeros(len(units))
  for t in np.flatnonzero(is_param_input[producer]):
    u = unit[producer[t]]
    parameter_bytes[u] += size[t]
    if t in split_params:
      parameter_split[u] += size[t]
  # A block's input: the first tensor of block 0 read from outside it.
  boundary = 0.0
  if len(names):
    first = [op for op in range(num_ops) if unit[op] == 0 and phase[op] == "forward"]
    outside = {t for op in first for t in operands[op] if t is not None
               and unit[producer[t]] != 0 and not param_view[t]}
    boundary = float(max((size[t] for t in outside), default=0.0))
  after = np.zeros(num_ops, bool)
  for op in range(num_ops):
    if not sources[op]:
      after[op] = unit[op] == outer and any(
          unit[producer[t]] != outer or after[producer[t]]
          for t in operands[op] if t is not None)
  return StepProfile(graph.name, kind, batch, units, unit, phase, seconds, scales, split,
                     all_reduce, saved, working_whole, working_split, parameter_bytes,
                     parameter_split,
                     boundary, after, dict(meta["training"]))
