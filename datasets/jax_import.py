"""Any JAX function as a computation graph, traced abstractly (no weights are materialized).

`trace_graph(fn, *args)` runs `jax.make_jaxpr` on `jax.ShapeDtypeStruct` leaves (concrete arrays
are replaced by their shapes) and turns every primitive application into an op:

* inputs: one op per argument leaf (type "input", cost 0), named by its pytree path;
* an op per equation, typed by its primitive; sub-jaxprs of `jit`/`pjit`, `custom_jvp_call`,
  `custom_vjp_call`, `closed_call`, `remat` are inlined (`inline=True`) or kept as one op whose
  cost is the sum of their body (a call named `fused_...` is always kept: one kernel,
  `is_fused`); `scan` counts its body `length` times, `while` once (its trip count is unknown
  when tracing, logged), `cond` its most expensive branch;
* one output tensor per result, sized from its abstract value (elements x dtype bytes);
  one data edge per use.

Cost model (FLOPs, recorded per op in `metadata["op_flops"]`): `dot_general` 2 x batch x free
x free x contracted; `conv_general_dilated` 2 x output elements x kernel elements per output
feature, over the input's dilation (a strided convolution's gradient skips inserted zeros);
elementwise ops one per output element; reductions one per input element; `reduce_window`
one per output element and window position. Data movement (reshape, transpose,
gather, ...) has no FLOPs but is charged one unit per output element, as is any primitive this
table does not know (logged once each). An op's compute cost is its units divided by
`flops_per_byte`, the device's FLOP rate over the link's byte rate (default 1000: ~100 TFLOP/s
against ~100 GB/s), so that with unit device speed and bandwidth a tensor's bytes and an op's
cost are in the same time unit: the time the link takes per byte, 10 ps at the nominal
`NOMINAL_LINK_BYTES_PER_SECOND` the graph records (`link_bytes_per_second`), so results read in
seconds (`regal.app.units`).

What splitting the graph needs (`regal.parallelism.shard_imported`) is in its metadata too: per op its
`op_dims` (`regal_datasets.op_dims`: each axis's index label) and `operands` (each operand's tensor,
null for a literal), per tensor its `tensor_shapes`, and `data_inputs`: the input ops of the
data arguments (`data_args`, default the last), whose axis 0 is the batch. Per op its
`op_scopes`: the name stack it was traced under (Flax modules, `jax.named_scope`, and
`jvp(...)` / `transpose(jvp(...))` around a gradient's forward and backward ops).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
from absl import logging

from regal_datasets import errors, op_dims
from regal_datasets.graph import Graph, GraphBuilder

DEFAULT_FLOPS_PER_BYTE = 1000.0
NOMINAL_LINK_BYTES_PER_SECOND = 100e9  # One cost unit: the time this link takes per byte.
_INLINED_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
FUSED_PREFIX = "fused_"
ELEMENTWISE = frozenset("""
abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp conj cos cosh digamma div
eq erf erf_inv erfc exp exp2 expm1 floor ge gt igamma imag integer_pow is_finite le lgamma log
log1p logistic lt max min mul ne neg nextafter not or pow real rem round rsqrt select_n sign sin
sinh sqrt square sub tan tanh xor shift_left shift_right_arithmetic shift_right_logical
population_count clz random_bits threefry2x32 add_any
""".split())
_REDUCTIONS = frozenset("""
reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax argmin
cumsum cumprod cummax cummin cumlogsumexp reduce_precision sort top_k
""".split())
MOVEMENT = frozenset("""
reshape broadcast_in_dim transpose squeeze expand_dims convert_element_type slice
dynamic_slice dynamic_update_slice concatenate pad gather scatter scatter-add scatter_add
iota copy copy_p rev stop_gradient select_and_scatter_add select_and_gather_add bitcast_convert_type
split sharding_constraint device_put optimization_barrier
""".split())
_warned: set[str] = set()


def _elements(aval) -> int:
  return int(math.prod(getattr(aval, "shape", ())))


def _shape(aval) -> tuple[int, ...]:
  return tuple(int(d) for d in getattr(aval, "shape", ()))


def _bytes(aval) -> float:
  dtype = getattr(aval, "dtype", None)
  itemsize = np.dtype(dtype).itemsize if dtype is not None else 0
  return float(_elements(aval) * itemsize)


def dot_general_flops(lhs_shape, rhs_shape, dimension_numbers) -> float:
  (lhs_contract, _), (lhs_batch, _) = dimension_numbers
  batch = math.prod(lhs_shape[d] for d in lhs_batch)
  contract = math.prod(lhs_shape[d] for d in lhs_contract)
  lhs_free = math.prod(lhs_shape) // max(batch * contract, 1)
  rhs_free = math.prod(rhs_shape) // max(batch * contract, 1)
  return 2.0 * batch * lhs_free * rhs_free * contract


def _sub_jaxprs(eqn):
  """The jaxpr an equation calls (jit, custom_jvp/vjp, closed_call, remat), else None."""
  for key in _INLINED_PARAMS:
    sub = eqn.params.get(key)
    if hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):  # ClosedJaxpr
      return sub.jaxpr
    if hasattr(sub, "eqns"):  # Jaxpr (remat)
      return sub
  return None


def is_fused(eqn) -> bool:
  """A call named `fused_...` (a `jax.jit` or `jax.custom_vjp` function) runs as one kernel,
  as FlashAttention does: it stays one op, its FLOPs its body's, its bytes its operands' and
  results' (`zoo_models.fused_attention`)."""
  return str(eqn.params.get("name", "")).startswith(FUSED_PREFIX)


def equation_flops(eqn) -> tuple[float, float]:
  """(FLOPs, cost units) of one equation, nested bodies included."""
  name = eqn.primitive.name
  out_elements = sum(_elements(v.aval) for v in eqn.outvars)
  if name == "dot_general":
    lhs, rhs = eqn.invars[0].aval, eqn.invars[1].aval
    flops = dot_general_flops(lhs.shape, rhs.shape, eqn.params["dimension_numbers"])
    return flops, flops
  if name == "conv_general_dilated":
    rhs = eqn.invars[1].aval
    out_feature_dim = eqn.params["dimension_numbers"].rhs_spec[0]
    per_output = math.prod(rhs.shape) // rhs.shape[out_feature_dim]
    # An input dilated by s (a strided convolution's input gradient) is mostly inserted
    # zeros: one kernel tap in s per axis meets a value, and cuDNN / XLA skip the rest.
    dilated = math.prod(eqn.params.get("lhs_dilation") or (1,))
    flops = 2.0 * out_elements * per_output / dilated
    return flops, flops
  if name in ELEMENTWISE:
    return float(out_elements), float(out_elements)
  if name in _REDUCTIONS:
    flops = float(sum(_elements(v.aval) for v in eqn.invars if hasattr(v, "aval")))
    return flops, flops
  if name.startswith("reduce_window") or name in ("max_pool", "avg_pool"):
    window = math.prod(eqn.params.get("window_dimensions", (1,)))
    return float(out_elements * window), float(out_elements * window)
  if name == "scan":
    flops, units = jaxpr_flops(eqn.params["jaxpr"].jaxpr)
    return flops * eqn.params["length"], units * eqn.params["length"]
  if name == "while":
    _warn_once("while", "while loops are counted once (their trip count is unknown)")
    flops, units = jaxpr_flops(eqn.params["body_jaxpr"].jaxpr)
    cond_flops, cond_units = jaxpr_flops(eqn.params["cond_jaxpr"].jaxpr)
    return flops + cond_flops, units + cond_units
  if name == "cond":
    costs = [jaxpr_flops(branch.jaxpr) for branch in eqn.params["branches"]]
    return max(costs)
  sub = _sub_jaxprs(eqn)
  if sub is not None:
    return jaxpr_flops(sub)
  if name not in MOVEMENT:
    _warn_once(name, f"no FLOP rule for primitive {name!r}: charged one unit per output "
                     f"element")
  return 0.0, float(out_elements)


def jaxpr_flops(jaxpr) -> tuple[float, float]:
  flops = units = 0.0
  for eqn in jaxpr.eqns:
    f, u = equation_flops(eqn)
    flops, units = flops + f, units + u
  return flops, units


def _warn_once(key: str, message: str) -> None:
  if key not in _warned:
    _warned.add(key)
    logging.warning("jax importer: %s", message)


class _Importer:
  def __init__(self, name: str, inline: bool, flops_per_byte: float):
    self.builder = GraphBuilder(name)
    self.inline = inline
    self.flops_per_byte = flops_per_byte
    self.op_flops: list[float] = []
    self.counts: dict[str, int] = {}
    self.equations: list = []  # Per op: (equation, operands) or None for inputs / consts.
    self.dims: list = []  # Per op: its `op_dims.OpDims` as JSON, or None.
    self.operands: list = []  # Per op: the tensor of each operand (None: a literal).
    self.tensor_shapes: list = []  # Per tensor: its shape.
    self.literals: dict = {}  # Variables bound to literals through inlined bodies.
    self.scopes: list[str] = []  # Per op: its equation's name stack ("" for a source).

  def add_op(self, op_type: str, flops: float, units: float, outvars, inputs: list[int],
             equation=None, scope: str = ""):
    count = self.counts.get(op_type, 0)
    self.counts[op_type] = count + 1
    op = self.builder.add_op(f"{op_type}_{count}", units / self.flops_per_byte, op_type)
    self.op_flops.append(flops)
    self.scopes.append(scope)
    self.equations.append(equation)
    dims = op_dims.from_equation(equation[0]) if equation is not None else None
    self.dims.append(None if dims is None else dims.to_json())
    self.operands.append(list(inputs))
    for tensor in dict.fromkeys(t for t in inputs if t is not None):
      self.builder.add_data_edge(tensor, op)
    return [None if type(v).__name__ == "DropVar" else self.add_tensor(op, v.aval)
            for v in outvars]

  def add_tensor(self, op: int, aval) -> int:
    self.tensor_shapes.append(list(_shape(aval)))
    return self.builder.add_tensor(op, _bytes(aval))

  def add_source(self, aval) -> None:
    """The records of an input or constant op just added."""
    self.op_flops.append(0.0)
    self.scopes.append("")
    self.equations.append(None)
    self.dims.append(op_dims.source_dims(_shape(aval)).to_json())
    self.operands.append([])

  def walk(self, jaxpr, env: dict, prefix: str = "") -> None:
    """Adds `jaxpr`'s equations; `prefix`: the name stack of the equation that calls it."""
    literals = self.literals
    def read(var):
      return env.get(var) if not hasattr(var, "val") else None  # Literals carry no tensor.

    def operand(var):
      """A tensor id, or ("literal", value) for a literal or an inlined body's literal."""
      if hasattr(var, "val"):
        return ("literal", var.val)
      value = env.get(var)
      return ("literal", literals[var]) if value is None and var in literals else value

    for eqn in jaxpr.eqns:
      stack = str(eqn.source_info.name_stack)
      scope = "/".join(part for part in (prefix, stack) if part)
      sub = _sub_jaxprs(eqn) if self.inline and not is_fused(eqn) else None
      if sub is not None and eqn.primitive.name not in ("scan", "while", "cond"):
        inner = {var: read(v) for var, v in zip(sub.invars, eqn.invars)}
        for var, v in zip(sub.invars, eqn.invars):
          value = operand(v)
          if isinstance(value, tuple):
            literals[var] = value[1]
        self.walk(sub, inner, scope)
        for outer, result in zip(eqn.outvars, sub.outvars):
          env[outer] = None if hasattr(result, "val") else inner.get(result)
          if hasattr(result, "val"):
            literals[outer] = result.val
          elif result in literals:
            literals[outer] = literals[result]
        continue
      flops, units = equation_flops(eqn)
      op_type = str(eqn.params["name"]) if is_fused(eqn) else eqn.primitive.name
      tensors = self.add_op(op_type, flops, units, eqn.outvars,
                            [read(v) for v in eqn.invars],
                            (eqn, [operand(v) for v in eqn.invars]), scope)
      env.update(zip(eqn.outvars, tensors))


def _abstract(leaf):
  import jax
  if isinstance(leaf, jax.ShapeDtypeStruct):
    return leaf
  if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)
  return leaf


@dataclasses.dataclass(frozen=True)
class Traced:
  """A traced function: its graph, and what executing it needs (`regal.execute.jax_program`):
  per op its equation and operands (tensor ids or ("literal", value)), or None for an input
  or captured constant; the constants' values; the tensors holding the function's results."""
  graph: Graph
  equations: list
  input_avals: list
  consts: list
  outputs: list


def trace_graph(fn: Callable[..., Any], *args: Any, name: str = "jax_function",
                inline: bool = True, flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE,
                data_args: tuple[int, ...] | None = None) -> Graph:
  """The graph of `fn(*args)`; args are pytrees of arrays or `jax.ShapeDtypeStruct`s."""
  return trace(fn, *args, name=name, inline=inline, flops_per_byte=flops_per_byte,
               data_args=data_args).graph


def trace(fn: Callable[..., Any], *args: Any, name: str = "jax_function", inline: bool = True,
          flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE,
          data_args: tuple[int, ...] | None = None) -> Traced:
  """`trace_graph`, keeping the equations behind every op. `data_args`: the positional
  arguments that hold data, whose axis 0 is the batch (default: the last one, as in
  `apply(params, x)`); the others are parameters (`metadata["data_inputs"]`)."""
  import jax
  if not flops_per_byte > 0:
    raise errors.ConfigError(f"flops_per_byte must be positive, got {flops_per_byte}")
  abstract_args = jax.tree_util.tree_map(_abstract, args)
  closed = jax.make_jaxpr(fn)(*abstract_args)
  importer = _Importer(name, inline, flops_per_byte)
  env = {}
  leaves = jax.tree_util.tree_flatten_with_path(abstract_args)[0]
  paths = [jax.tree_util.keystr(path) or f"[{k}]" for k, (path, _) in enumerate(leaves)]
  data_args = (len(args) - 1,) if data_args is None else tuple(data_args)
  data_inputs = []
  for var, path, (key_path, _) in zip(closed.jaxpr.invars, paths, leaves):
    op = importer.builder.add_op(f"input{path}", 0.0, "input")
    if getattr(key_path[0], "idx", None) in data_args and _shape(var.aval):
      data_inputs.append(op)
    importer.add_source(var.aval)
    env[var] = importer.add_tensor(op, var.aval)
  for var in closed.jaxpr.constvars:  # Captured constants: present from the start.
    op = importer.builder.add_op(f"const_{len(importer.op_flops)}", 0.0, "const")
    importer.add_source(var.aval)
    env[var] = importer.add_tensor(op, var.aval)
  importer.walk(closed.jaxpr, env)
  importer.builder.metadata.update({
      "source": "jax", "flops_per_byte": flops_per_byte,
      "link_bytes_per_second": NOMINAL_LINK_BYTES_PER_SECOND, "inline": inline,
      "total_flops": float(sum(importer.op_flops)), "op_flops": importer.op_flops,
      "op_dims": importer.dims, "operands": importer.operands, "data_inputs": data_inputs,
      "tensor_shapes": importer.tensor_shapes, "op_scopes": importer.scopes})
  outputs = [None if hasattr(v, "val") else env.get(v) for v in closed.jaxpr.outvars]
  return Traced(importer.builder.build(), importer.equations,
                [v.aval for v in closed.jaxpr.invars], list(closed.consts), outputs)
