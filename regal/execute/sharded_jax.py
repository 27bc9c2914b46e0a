"""Real data for a JAX function's graph split by `regal.parallelism.shard_imported`: every shard binds
its original equation's primitive on the regions of its operands it reads, so executing the
sharded graph under any placement computes `fn(*inputs)` (issue 70's check against the
unsharded function).

A shard's operand is assembled from the blocks (tensors) its op reads: pasted into the box
they span, then cut to the region the shard needs. Primitives whose parameters name a shape
(`broadcast_in_dim`, `reshape`, `slice`, `gather`) get the shard's shapes; a partial result
(a contracted label) is the primitive on the operands' blocks, and a reduce op adds (or takes
the max or min of) the partials.
"""
from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from regal.parallelism import shard_imported
from regal_datasets import errors, op_dims
from regal_datasets.graph import Graph
from regal_datasets.jax_import import Traced
from regal.execute.jax_program import bind, bind_args, input_values
from regal.execute.program import Kernel, Program, op_inputs, sink_tensors

Region = tuple[tuple[int, int], ...]


def _assemble(shape_box: Region, blocks: Sequence[Region], needed: Region, *arrays):
  """The `needed` region from blocks covering it (their regions in the tensor's coordinates);
  `shape_box` is the box they span."""
  origin = [lo for lo, _ in shape_box]
  if len(arrays) == 1 and blocks[0] == needed:
    return arrays[0]
  box = jnp.zeros([hi - lo for lo, hi in shape_box], arrays[0].dtype)
  for region, array in zip(blocks, arrays):
    box = box.at[tuple(slice(lo - o, hi - o) for (lo, hi), o in zip(region, origin))].set(array)
  return box[tuple(slice(lo - o, hi - o) for (lo, hi), o in zip(needed, origin))]


def _params(equation, operand_shapes: list[tuple[int, ...]], out_shape: tuple[int, ...],
            dims: op_dims.OpDims | None):
  """The equation's parameters for a shard's shapes."""
  params = dict(equation.params)
  name = equation.primitive.name
  if name == "broadcast_in_dim":
    params["shape"] = tuple(out_shape)
  elif name == "reshape":
    params["new_sizes"] = tuple(out_shape)
  elif name == "slice":
    strides = params.get("strides") or (1,) * len(out_shape)
    params["limit_indices"] = tuple(start + size * step for start, size, step in
                                    zip(params["start_indices"], out_shape, strides))
  elif name == "gather" and dims is not None:
    sizes = list(params["slice_sizes"])
    for axis, label in enumerate(dims.inputs[0]):
      if label is not None:
        sizes[axis] = operand_shapes[0][axis]
    params["slice_sizes"] = tuple(sizes)
  return params


def _shard_fn(equation, operands, out_shape, dims, *tensors):
  """The equation on the operands' regions (`operands`: per operand its position among
  `tensors`' assembled values, or ("literal", value))."""
  args = [operand[1] if isinstance(operand, tuple) else tensors[operand] for operand in operands]
  params = _params(equation, [tuple(np.shape(a)) for a in args], out_shape, dims)
  results = bind_args(equation, args, params)
  kept = tuple(r for r, v in zip(results, equation.outvars) if type(v).__name__ != "DropVar")
  return kept or (jnp.zeros((), jnp.float32),)  # A token: the executor sees it finish.


def _overlaps(a: Region, b: Region) -> bool:
  return all(lo < hi2 and lo2 < hi for (lo, hi), (lo2, hi2) in zip(a, b))


def sharded_jax_program(traced: Traced, sharded: Graph, seed: int = 0) -> Program:
  """The program of `sharded` (`regal.parallelism.shard_imported.shard` of `traced.graph`)."""
  meta = sharded.metadata
  if "shard_of" not in meta or meta.get("sharding", {}).get("source_graph") != traced.graph.name:
    raise errors.ConfigError(f"graph {sharded.name!r} is not a sharding of "
                             f"{traced.graph.name!r}")
  source = traced.graph
  shapes = [tuple(s) for s in source.metadata["tensor_shapes"]]
  values = iter(input_values(traced, seed) + [np.asarray(c) for c in traced.consts])
  source_values = {op: next(values) for op, entry in enumerate(traced.equations)
                   if entry is None}
  dims = op_dims.graph_dims(source)
  shards = meta["sharding"]["shards"]
  inputs = op_inputs(sharded)
  regions = [(int(t), tuple(tuple(r) for r in region)) for t, region in meta["tensor_region"]]
  outputs = [[] for _ in range(sharded.num_ops)]
  for tensor, producer in enumerate(sharded.tensor_producer):
    outputs[int(producer)].append(tensor)
  host = _HostValues(traced, source_values)
  kernels = []
  resident_reads = meta.get("resident_reads") or [[] for _ in range(sharded.num_ops)]
  for new_op, (op, shard, role, label) in enumerate(meta["shard_of"]):
    if traced.equations[op] is None:  # Its region of a source's value.
      region = regions[outputs[new_op][0]][1]
      kernels.append(Kernel(inputs=(), value=(np.asarray(host(op)[
          tuple(slice(lo, hi) for lo, hi in region)]),)))
      continue
    new_inputs = tuple(inputs[new_op])
    if role == "reduce":
      kernels.append(Kernel(inputs=new_inputs, fn=jax.jit(functools.partial(
          _reduce, dims[op].combine[label]))))
      continue
    equation, operands = traced.equations[op]
    out_shape = tuple(hi - lo for lo, hi in regions[outputs[new_op][0]][1])
    steps, positions, resident = [], [], []
    for position, operand in enumerate(operands):
      if isinstance(operand, tuple):  # A literal.
        positions.append(operand)
        continue
      full = tuple((0, n) for n in shapes[operand])
      needed = full
      if role in ("shard", "partial"):
        needed = shard_imported.block_region(dims[op].inputs[position], shapes[operand], label,
                                             dims[op].sizes[label], shard, shards)
      positions.append(len(steps))
      if any(t == operand and tuple(map(tuple, r)) == needed
             for t, r, _ in resident_reads[new_op]):  # A parameter: loaded once per device.
        resident.append(host(int(source.tensor_producer[operand]))[
            tuple(slice(lo, hi) for lo, hi in needed)])
        steps.append((None, len(resident) - 1))
        continue
      blocks = tuple(k for k, t in enumerate(new_inputs)
                     if regions[t][0] == operand and _overlaps(regions[t][1], needed))
      block_regions = tuple(regions[new_inputs[k]][1] for k in blocks)
      box = tuple((min(r[a][0] for r in block_regions), max(r[a][1] for r in block_regions))
                  for a in range(len(needed)))
      steps.append((blocks, functools.partial(_assemble, box, block_regions, needed)))
    fn = functools.partial(_shard_fn, equation, tuple(positions), out_shape, dims[op])
    kernels.append(Kernel(inputs=new_inputs, fn=_Resident(jax.jit(functools.partial(
        _run_shard, tuple(steps), fn, len(resident))), resident)))
  return Program(tuple(kernels), "jax_sharded", sink_tensors(sharded), {"seed": seed})


class _HostValues:
  """The full value of a source or a resident op (computed from its operands on the host)."""

  def __init__(self, traced: Traced, source_values: dict):
    self.traced, self.values = traced, dict(source_values)
    self.producer = traced.graph.tensor_producer

  def __call__(self, op: int) -> np.ndarray:
    if op not in self.values:
      equation, operands = self.traced.equations[op]
      args = [o if isinstance(o, tuple) else self(int(self.producer[o])) for o in operands]
      keep = [type(v).__name__ != "DropVar" for v in equation.outvars]
      tensors = [a for a in args if not isinstance(a, tuple)]
      self.values[op] = np.asarray(bind(equation, operands, keep, *tensors)[0])
    return self.values[op]


class _Resident:
  """A kernel with its resident parameters: put on a device the first time it runs there, and
  passed before the tensors it reads."""

  def __init__(self, jitted, values: list[np.ndarray]):
    self.jitted, self.values, self.placed = jitted, values, {}

  def __call__(self, *tensors):
    device = jax.config.jax_default_device or jax.devices()[0]
    if device not in self.placed:
      self.placed[device] = [jax.device_put(v, device) for v in self.values]
    return self.jitted(*self.placed[device], *tensors)


def _run_shard(steps, fn, num_resident, *args):
  resident, tensors = args[:num_resident], args[num_resident:]
  assembled = [resident[how] if blocks is None else assemble(*[tensors[k] for k in blocks])
               for blocks, how in steps for assemble in [how]]
  return fn(*assembled)


def _reduce(combine: str, *partials):
  stacked = jnp.stack(partials)
  return ({"sum": jnp.sum, "max": jnp.max, "min": jnp.min}[combine](stacked, axis=0),)
