"""Any imported graph (JAX or ONNX) split into shards, as Doppler's engine decomposes its
workloads (`regal_datasets.sharded`, Doppler appendix D), for any op whose axes `regal_datasets.op_dims`
describes (issue 70).

`shard(graph, shards, choice)` splits op o on label `choice[o]` into `shards` equal blocks:
* a parallel label (an output axis: batch, heads, output features): shard s computes block s
  of every output from block s of the operands along that label (operands read whole along
  their other axes);
* a contracted label (a matmul's inner dimension, a summed axis): shard s computes a partial
  result from block s of the operands; one reduce op (role "reduce": sum / max / min) adds
  the partials up;
* None (or an op without dims): the op stays whole and reads its operands whole.
A consumer reads every block of a tensor that overlaps the region it needs, so reading along
another axis than the producer split is an all-to-all, and reading a split tensor whole a
gather: the graph carries that communication as ordinary transfers.

Parameters (inputs that are not data, constants, and what ops without FLOPs derive from them
alone: a weight's reshape, a position-embedding lookup; `resident_ops`) are resident where
they are read, loaded once and never moved between steps: they are not ops of the split graph
at all. Each op lists the regions of them it reads (`metadata["resident_reads"]`: [original
tensor, region, bytes]), which its roofline counts as bytes read
(`regal.parallelism.roofline.op_bytes`) and which count in the memory of every device that holds a
reader (`regal.scoring.resident`: in its peak memory). A backward graph's gradient
reductions are contracted labels: their reduce ops are ordinary ops.

Each op records `metadata["shard_of"]`: [original op, shard (-1 whole), role, label] (and
`meta_op` / `meta_op_role` as `regal_datasets.sharded` does, for the Enumerative Optimizer) and
each tensor `metadata["tensor_region"]`: [original tensor, [[lo, hi] per axis]]; what
`regal.execute.sharded_jax` needs to run it on real data. FLOPs are conserved: a shard holds
its block's share of its op's FLOPs, reduce ops (K - 1 per output element) aside, and the
resident ops' FLOPs (computed before the step) leave the graph.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from regal_datasets import errors, op_dims
from regal_datasets.graph import Graph, GraphBuilder
from regal_datasets.op_dims import OpDims

ROLES = ("whole", "shard", "partial", "reduce", "input")
Region = tuple[tuple[int, int], ...]


def _require_dims(graph: Graph) -> list[OpDims | None]:
  for key in ("op_dims", "operands", "tensor_shapes", "op_flops"):
    if key not in graph.metadata:
      raise errors.ConfigError(
          f"graph {graph.name!r} records no op shapes ({key}): only graphs imported from JAX "
          f"(regal_datasets.zoo, regal_datasets.jax_import) or ONNX can be sharded; import it again")
  return op_dims.graph_dims(graph)


# A dimension `shards` does not divide is still split when it is this many times larger: its
# blocks then differ by one element in at least this many (GPT-2's vocabulary of 50257 ways).
UNEVEN_FACTOR = 64


def candidates(graph: Graph, shards: int, even_only: bool = False) -> list[list[int]]:
  """Per op, the labels it may be split on into `shards` blocks (parallel first): those
  `shards` divides, and (unless `even_only`) those `UNEVEN_FACTOR` times larger."""
  dims = _require_dims(graph)
  return [[] if d is None or shards < 2 else
          [label for label in d.splittable() if d.sizes[label] % shards == 0 or (
              not even_only and d.sizes[label] >= UNEVEN_FACTOR * shards)]
          for d in dims]


def check_shards(graph: Graph, shards: int) -> None:
  """A shard count no op's dimension divides is refused in one line."""
  if shards < 1:
    raise errors.ConfigError(f"shard count must be >= 1, got {shards}")
  if shards > 1 and not any(candidates(graph, shards, even_only=True)):
    raise errors.ConfigError(f"--shard {shards} divides no splittable dimension of graph "
                             f"{graph.name!r}; give a divisor of its batch (or auto)")


def data_parallel_choice(graph: Graph, shards: int) -> list[int | None]:
  """Every op split on its batch dimension (where it has one that `shards` divides)."""
  dims = _require_dims(graph)
  batch = op_dims.batch_labels(graph, dims)
  return [label if label is not None and dims[op].sizes[label] % shards == 0 else None
          for op, label in enumerate(batch)]


def resident_ops(graph: Graph) -> np.ndarray:
  """[num_ops] whether an op's outputs are parameters: a source that is not data (a weight, a
  constant), or an op that reads only such outputs and does not grow them (a weight's
  reshape or transpose, an iota, a position-embedding lookup; outside a training step, whose
  parameters change every step, also what computes on them alone: a batch norm's folded
  scale): computed once, not every step, and held by every device that reads it rather than
  sent from one."""
  resident = np.zeros(graph.num_ops, bool)
  if "operands" not in graph.metadata or "op_flops" not in graph.metadata:
    return resident  # Not an imported graph (a split one carries its reads instead).
  data = set(graph.metadata.get("data_inputs", ()))
  flops = np.asarray(graph.metadata["op_flops"], float)
  operands = graph.metadata["operands"]
  fixed_parameters = "training" not in graph.metadata
  for op in graph.topological_order.tolist():
    if op in data:
      continue
    if graph.op_types[op] in ("input", "param", "const"):
      resident[op] = True
    elif (flops[op] == 0 or fixed_parameters) and all(
        resident[int(graph.tensor_producer[t])] for t in operands[op] if t is not None):
      read = sum(float(graph.tensor_size[t]) for t in set(operands[op]) if t is not None)
      written = float(graph.tensor_size[graph.tensor_producer == op].sum())
      # Kept only where it does not grow: a broadcast of a constant (a causal mask to every
      # head and batch row) is computed in each step rather than held.
      resident[op] = graph.num_outputs[op] == 1 and (not read or written <= read)
  return resident


def without_resident_costs(graph: Graph) -> Graph:
  """`graph` with its resident ops (`resident_ops`) costing nothing: what a split graph
  charges for them, so that the unsplit graph compares fairly."""
  resident = resident_ops(graph)
  if not (resident & (graph.compute_cost > 0)).any():
    return graph
  return graph.replace(compute_cost=np.where(resident, 0.0, graph.compute_cost))


@dataclasses.dataclass
class _Block:
  tensor: int
  region: Region


def _overlaps(a: Region, b: Region) -> bool:
  return all(lo < hi2 and lo2 < hi for (lo, hi), (lo2, hi2) in zip(a, b))


def _elements(region: Region) -> int:
  return math.prod(hi - lo for lo, hi in region)


def block_region(axes: Sequence[int | None], shape: Sequence[int], label: int, size: int,
                 block: int, shards: int) -> Region:
  """The region of a tensor (its axes' labels, its shape) that block `block` of `shards` reads
  or writes when its op splits on `label` (of `size`): each axis carrying the label is cut at
  the label's block boundaries, scaled by how many of the label's units the axis holds (an
  axis that merges the label with inner axes, a reshape's [B, S] -> [B * S], holds S per
  unit), the others whole."""
  lo, hi = size * block // shards, size * (block + 1) // shards
  region = []
  for axis_label, n in zip(axes, shape):
    if axis_label != label:
      region.append((0, n))
      continue
    if n % size:
      raise ValueError(f"an axis of {n} carries a label of size {size}")
    region.append((lo * (n // size), hi * (n // size)))
  return tuple(region)


def shard(graph: Graph, shards: int, choice: Sequence[int | None],
          name: str | None = None) -> Graph:
  """`graph` with op o split on `choice[o]` into `shards` blocks (the module doc)."""
  dims = _require_dims(graph)
  if len(choice) != graph.num_ops:
    raise errors.ConfigError(f"choice names {len(choice)} ops, graph has {graph.num_ops}")
  allowed = candidates(graph, shards)
  for op, label in enumerate(choice):
    if label is not None and label not in allowed[op]:
      raise errors.ConfigError(f"op {graph.op_names[op]!r} cannot be split on label {label} "
                               f"into {shards} (its candidates: {allowed[op]})")
  meta = graph.metadata
  operands, shapes = meta["operands"], [tuple(s) for s in meta["tensor_shapes"]]
  flops = np.asarray(meta["op_flops"], float)
  item_bytes = [graph.tensor_size[t] / max(math.prod(shapes[t]), 1)
                for t in range(graph.num_tensors)]
  outputs: list[list[int]] = [[] for _ in range(graph.num_ops)]
  for tensor, producer in enumerate(graph.tensor_producer):
    outputs[int(producer)].append(tensor)
  builder = GraphBuilder(name or f"{graph.name}_shard{shards}")
  shard_of: list[list] = []
  new_flops: list[float] = []
  regions: list[list] = []
  layout: dict[int, list[_Block]] = {}  # Original tensor -> its blocks in the new graph.
  resident_reads: list[list] = []
  resident = resident_ops(graph)

  def add_op(op_name: str, op_type: str, cost: float, op_flops: float, record: list) -> int:
    new = builder.add_op(op_name, cost, op_type)
    shard_of.append(record)
    resident_reads.append([])
    new_flops.append(op_flops)
    return new

  def add_tensor(op: int, tensor: int, region: Region) -> int:
    new = builder.add_tensor(op, float(item_bytes[tensor] * _elements(region)))
    regions.append([tensor, [list(r) for r in region]])
    return new

  def read(consumer: int, tensor: int, region: Region) -> None:
    """Edges from the blocks of `tensor` that overlap `region` (a parameter: none, a
    resident read)."""
    producer = int(graph.tensor_producer[tensor])
    if resident[producer]:
      resident_reads[consumer].append([tensor, [list(r) for r in region],
                                       float(item_bytes[tensor] * _elements(region))])
      return
    for block in layout[tensor]:
      if _overlaps(block.region, region):
        builder.add_data_edge(block.tensor, consumer)

  for op in (int(o) for o in graph.topological_order):
    if resident[op]:
      continue  # Copied per reader.
    d, label = dims[op], choice[op]
    op_name, op_type = graph.op_names[op], graph.op_types[op]
    cost = float(graph.compute_cost[op])
    whole_out = [tuple((0, n) for n in shapes[t]) for t in outputs[op]]
    if label is None:
      new = add_op(op_name, op_type, cost, float(flops[op]),
                   [op, -1, "input" if op_type in ("input", "param", "const") else "whole",
                    None])
      for tensor in dict.fromkeys(t for t in (operands[op] or ()) if t is not None):
        read(new, tensor, tuple((0, n) for n in shapes[tensor]))
      for tensor, region in zip(outputs[op], whole_out):
        layout.setdefault(tensor, []).append(_Block(add_tensor(new, tensor, region), region))
      continue
    size = d.sizes[label]
    contracted = label in d.combine
    partials: list[int] = []
    for s in range(shards):
      lo, hi = size * s // shards, size * (s + 1) // shards
      role = "partial" if contracted else ("input" if not operands[op] else "shard")
      share = (hi - lo) / size
      new = add_op(f"{op_name}/s{s}", op_type, cost * share, float(flops[op]) * share,
                   [op, s, role, label])
      for tensor, axes in zip(operands[op] or (), d.inputs):
        if tensor is None:
          continue
        read(new, tensor, block_region(axes, shapes[tensor], label, size, s, shards))
      for tensor, axes, full in zip(outputs[op], d.outputs, whole_out):
        region = full if contracted else block_region(axes, shapes[tensor], label, size, s,
                                                      shards)
        block = add_tensor(new, tensor, region)
        if contracted:
          partials.append(block)
        else:
          layout.setdefault(tensor, []).append(_Block(block, region))
    if contracted:
      (tensor,), (full,) = outputs[op], whole_out
      elements = _elements(full)
      reduce_flops = float((shards - 1) * elements)
      reduce = add_op(f"{op_name}/reduce", f"reduce_{d.combine[label]}",
                      reduce_flops / float(meta.get("flops_per_byte", 1.0)), reduce_flops,
                      [op, -1, "reduce", label])
      for partial in partials:
        builder.add_data_edge(partial, reduce)
      layout[tensor] = [_Block(add_tensor(reduce, tensor, full), full)]
  split_ops = sum(label is not None for label in choice)
  builder.metadata.update({
      key: value for key, value in meta.items()
      if key not in ("op_dims", "operands", "tensor_shapes", "op_flops", "data_inputs",
                     "op_scopes")})
  if "op_scopes" in meta:  # Each shard, partial or reduce keeps its source op's scope.
    builder.metadata["op_scopes"] = [meta["op_scopes"][row[0]] for row in shard_of]
  builder.metadata.update({
      "op_flops": new_flops, "shard_of": shard_of, "tensor_region": regions,
      "resident_reads": resident_reads,
      # Doppler's meta-op groups (`regal_datasets.sharded`'s keys: the Enumerative Optimizer's).
      "meta_op": [graph.op_names[row[0]] for row in shard_of],
      "meta_op_role": [{"whole": "shard", "partial": "shard"}.get(row[2], row[2])
                       for row in shard_of],
      "sharding": {"shards": shards, "source_graph": graph.name, "source_ops": graph.num_ops,
                   "split_ops": split_ops,
                   "resident_reads": sum(len(r) for r in resident_reads),
                   "choice": list(choice)}})
  return builder.build()
