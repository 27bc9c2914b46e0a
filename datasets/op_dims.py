"""What every axis of an imported op means: the op as an einsum over its own index labels
(issue 70), so that `regal.parallelism.shard_imported` can split any op of a JAX or ONNX model.

An op's `OpDims` gives each axis of each output a label (an index of its iteration space) and
each axis of each operand the label it is read at, or None where the operand is read whole
along that axis (a broadcast dimension, a window, a merged reshape axis). A label that is
*parallel* (in `split`, on an output axis) can be split: shard s computes the outputs' block s
along it from the operands' block s along it. A label in `combine` is contracted (a matmul's
inner dimension, a summed axis): shard s computes a partial result from block s of the
operands, and a reduce op (sum / max / min) combines the partials.

The rules are per JAX primitive (`from_equation`) and per ONNX operator (`from_onnx_node`);
anything they do not know has no dims, and the op stays whole. `batch_labels` follows the
batch axis of the graph's data inputs through these maps (the labels tensors join), which is
what data parallelism splits.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np

from regal_datasets.graph import Graph

Shape = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class OpDims:
  """Index labels of one op (see the module doc); labels are 0..len(sizes)-1."""
  inputs: tuple[tuple[int | None, ...], ...]  # Per operand, per axis.
  outputs: tuple[tuple[int, ...], ...]  # Per output, per axis.
  sizes: tuple[int, ...]  # Per label.
  split: frozenset[int]  # Parallel labels that may be split.
  combine: dict[int, str]  # Contracted labels that may be split: "sum", "max" or "min".

  def to_json(self) -> dict[str, Any]:
    return {"in": [list(a) for a in self.inputs], "out": [list(a) for a in self.outputs],
            "sizes": list(self.sizes), "split": sorted(self.split),
            "combine": {str(k): v for k, v in sorted(self.combine.items())}}

  @staticmethod
  def from_json(data: dict[str, Any] | None) -> "OpDims | None":
    if data is None:
      return None
    return OpDims(tuple(tuple(a) for a in data["in"]), tuple(tuple(a) for a in data["out"]),
                  tuple(int(s) for s in data["sizes"]), frozenset(data["split"]),
                  {int(k): v for k, v in data["combine"].items()})

  def splittable(self) -> list[int]:
    """Labels an op may be split on, parallel first."""
    return sorted(self.split) + sorted(self.combine)


class _Labels:
  """Builds an OpDims: fresh labels for output axes, operand axes mapped onto them."""

  def __init__(self, out_shapes: Sequence[Shape]):
    self.sizes: list[int] = []
    self.outputs = [[self.fresh(d) for d in shape] for shape in out_shapes]
    self.split: set[int] = set(label for axes in self.outputs for label in axes)
    self.combine: dict[int, str] = {}

  def fresh(self, size: int) -> int:
    self.sizes.append(int(size))
    return len(self.sizes) - 1

  def fixed(self, *labels: int) -> None:
    """Labels that cannot be split (a window, a concatenated axis)."""
    self.split.difference_update(labels)

  def done(self, inputs: Sequence[Sequence[int | None]]) -> OpDims:
    split = frozenset(label for label in self.split if self.sizes[label] > 1)
    combine = {k: v for k, v in self.combine.items() if self.sizes[k] > 1}
    return OpDims(tuple(tuple(a) for a in inputs), tuple(tuple(a) for a in self.outputs),
                  tuple(self.sizes), split, combine)


def source_dims(shape: Shape) -> OpDims:
  """An input, parameter or constant: any axis may be cut (its data is sliced)."""
  return _Labels([shape]).done([])


def elementwise_dims(in_shapes: Sequence[Shape], out_shape: Shape,
                     align_right: bool = False) -> OpDims | None:
  """Every output axis a label; an operand axis of the same size reads it, a size-1 or missing
  axis is broadcast (`align_right`: numpy / ONNX broadcasting, else equal ranks or scalars)."""
  labels = _Labels([out_shape])
  out = labels.outputs[0]
  inputs = []
  for shape in in_shapes:
    offset = len(out_shape) - len(shape)
    if not align_right and offset and len(shape):
      return None
    inputs.append([out[offset + i] if offset >= 0 and 0 <= offset + i < len(out)
                   and dim == out_shape[offset + i] else None
                   for i, dim in enumerate(shape)])
  return labels.done(inputs)


def dot_dims(lhs: Shape, rhs: Shape, out: Shape, lhs_contract, rhs_contract, lhs_batch,
             rhs_batch) -> OpDims:
  """dot_general: out = batch axes, lhs free axes, rhs free axes; contracted axes sum."""
  labels = _Labels([out])
  out_labels = iter(labels.outputs[0])
  left: list[int | None] = [None] * len(lhs)
  right: list[int | None] = [None] * len(rhs)
  for a, b in zip(lhs_batch, rhs_batch):
    left[a] = right[b] = next(out_labels)
  for a in range(len(lhs)):
    if a not in lhs_batch and a not in lhs_contract:
      left[a] = next(out_labels)
  for b in range(len(rhs)):
    if b not in rhs_batch and b not in rhs_contract:
      right[b] = next(out_labels)
  for a, b in zip(lhs_contract, rhs_contract):
    label = labels.fresh(lhs[a])
    left[a] = right[b] = label
    labels.combine[label] = "sum"
  return labels.done([left, right])


def reduce_dims(in_shape: Shape, out_shape: Shape, axes: Sequence[int], combine: str | None,
                keep_dims: bool = False) -> OpDims:
  """A reduction over `axes`: the other axes map in order; the reduced ones combine (or stay
  whole when `combine` is None: an argmax)."""
  labels = _Labels([out_shape])
  out = iter(labels.outputs[0])
  inputs: list[int | None] = []
  for axis, size in enumerate(in_shape):
    if axis in axes:
      if keep_dims:
        labels.fixed(next(out))
      label = labels.fresh(size)
      inputs.append(label)
      if combine:
        labels.combine[label] = combine
    else:
      inputs.append(next(out))
  return labels.done([inputs])


def reshape_dims(in_shape: Shape, out_shape: Shape) -> OpDims:
  """Axes that keep their size after equal products of the axes before them map. Where axes
  merge or split ([B, S] -> [B * S], or back), the outermost input and output axes of the group
  share a label of the smaller's size when it divides the larger: a block of it is one
  contiguous run of the row-major data on both sides (`shard_imported.block_region` scales
  the larger axis). Other merged or split axes are read whole."""
  labels = _Labels([out_shape])
  out = labels.outputs[0]
  before_in = [math.prod(in_shape[:i]) for i in range(len(in_shape))]
  before_out = [math.prod(out_shape[:j]) for j in range(len(out_shape))]
  inputs: list[int | None] = [None] * len(in_shape)
  j = 0
  for i, size in enumerate(in_shape):
    if size == 1:
      continue  # A unit axis: nothing to split.
    while j < len(out_shape) and (before_out[j] < before_in[i] or out_shape[j] == 1):
      j += 1
    if j == len(out_shape) or before_out[j] != before_in[i]:
      continue  # Inside a group: its outermost axes carry its label.
    outer = min(size, out_shape[j])
    if outer and max(size, out_shape[j]) % outer == 0:
      inputs[i] = out[j]
      labels.sizes[out[j]] = outer
  mapped = {label for label in inputs if label is not None}
  labels.fixed(*[label for label in out if label not in mapped])
  return labels.done([inputs])


def permute_dims(in_shape: Shape, out_shape: Shape, permutation: Sequence[int]) -> OpDims:
  labels = _Labels([out_shape])
  inputs: list[int | None] = [None] * len(in_shape)
  for j, i in enumerate(permutation):
    inputs[i] = labels.outputs[0][j]
  return labels.done([inputs])


def axis_map_dims(in_shapes: Sequence[Shape], out_shape: Shape,
                  maps: Sequence[dict[int, int]], fixed_out: Sequence[int] = (),
                  fix_unmapped: bool = True) -> OpDims:
  """Operand axis i reads output axis maps[k][i] (same size); `fixed_out` axes stay whole, and
  output axes no operand reads too unless `fix_unmapped` is False (a broadcast: any block of
  it is the same operand, broadcast)."""
  labels = _Labels([out_shape])
  out = labels.outputs[0]
  inputs = []
  for shape, axis_map in zip(in_shapes, maps):
    inputs.append([out[axis_map[i]] if i in axis_map and out_shape[axis_map[i]] == dim
                   else None for i, dim in enumerate(shape)])
  mapped = {label for axes in inputs for label in axes if label is not None}
  labels.fixed(*[out[j] for j in fixed_out],
               *[label for label in out if label not in mapped and fix_unmapped])
  return labels.done(inputs)


# ----- JAX primitives ----------------------------------------------------------------------
_JAX_ELEMENTWISE = frozenset("""
abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp conj cos cosh digamma div
eq erf erf_inv erfc exp exp2 expm1 floor ge gt igamma imag integer_pow is_finite le lgamma log
log1p logistic lt max min mul ne neg nextafter not or pow real rem round rsqrt select_n sign sin
sinh sqrt square sub tan tanh xor shift_left shift_right_arithmetic shift_right_logical
population_count clz add_any convert_element_type copy copy_p stop_gradient reduce_precision
""".split())
_JAX_REDUCE = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min",
               "argmax": None, "argmin": None, "reduce_prod": None, "reduce_and": None,
               "reduce_or": None}
_JAX_WINDOW = ("reduce_window_sum", "reduce_window_max", "reduce_window_min")


def _shape(var) -> Shape:
  return tuple(int(d) for d in getattr(getattr(var, "aval", None), "shape", ()))


def from_equation(eqn) -> OpDims | None:
  """The dims of one jaxpr equation, or None where its primitive has no rule here."""
  name, params = eqn.primitive.name, eqn.params
  ins = [_shape(v) for v in eqn.invars]
  outs = [_shape(v) for v in eqn.outvars]
  if name == "split":
    return split_dims(ins[0], outs, params["axis"])
  if len(outs) != 1:
    return None
  out = outs[0]
  if name in _JAX_ELEMENTWISE:
    return elementwise_dims(ins, out)
  if name == "dot_general":
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    return dot_dims(ins[0], ins[1], out, lc, rc, lb, rb)
  if name == "conv_general_dilated":
    return _conv_dims(ins, out, params)
  if name in _JAX_REDUCE:
    return reduce_dims(ins[0], out, tuple(params["axes"]), _JAX_REDUCE[name])
  if name == "transpose":
    return permute_dims(ins[0], out, params["permutation"])
  if name == "broadcast_in_dim":
    return axis_map_dims(ins[:1], out, [dict(enumerate(params["broadcast_dimensions"]))],
                         fix_unmapped=False)
  if name == "reshape" and params.get("dimensions") is None:
    return reshape_dims(ins[0], out)
  if name == "squeeze":
    kept = [i for i in range(len(ins[0])) if i not in params["dimensions"]]
    return axis_map_dims(ins, out, [{i: j for j, i in enumerate(kept)}])
  if name == "concatenate":
    axis = params["dimension"]
    keep = {i: i for i in range(len(out)) if i != axis}
    return axis_map_dims(ins, out, [keep] * len(ins), fixed_out=[axis])
  if name == "pad":
    plain = {i: i for i, (lo, hi, inner) in enumerate(params["padding_config"])
             if (lo, hi, inner) == (0, 0, 0)}
    return axis_map_dims(ins, out, [plain, {}])
  if name == "slice":
    strides = params.get("strides") or (1,) * len(out)
    whole = {i: i for i, (lo, hi, step) in enumerate(zip(params["start_indices"],
                                                         params["limit_indices"], strides))
             if lo == 0 and hi == ins[0][i] and step == 1}
    return axis_map_dims(ins, out, [whole])
  if name in _JAX_WINDOW:
    plain = {i: i for i in range(len(out)) if params["window_dimensions"][i] == 1
             and params["window_strides"][i] == 1 and tuple(params["padding"][i]) == (0, 0)
             and params["base_dilation"][i] == 1 and params["window_dilation"][i] == 1}
    return axis_map_dims(ins, out, [plain])
  if name == "gather":
    return _gather_dims(ins, out, params)
  if name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
    return axis_map_dims(ins, out, [{i: i for i in range(len(out)) if i != params["axis"]}])
  return None


def split_dims(operand: Shape, outs: Sequence[Shape], axis: int) -> OpDims:
  """split (`jnp.split`, a fused QKV projection cut in three): every output keeps the
  operand's other axes (shared labels, which may be split); the cut axis is a label of its
  own in each output, never split."""
  sizes: list[int] = []
  shared: dict[int, int] = {}
  for i, n in enumerate(operand):
    if i != axis:
      shared[i] = len(sizes)
      sizes.append(int(n))
  outputs = []
  for out in outs:
    axes = []
    for i, n in enumerate(out):
      if i == axis:
        axes.append(len(sizes))
        sizes.append(int(n))
      else:
        axes.append(shared[i])
    outputs.append(tuple(axes))
  split = frozenset(label for label in shared.values() if sizes[label] > 1)
  return OpDims((tuple(shared.get(i) for i in range(len(operand))),), tuple(outputs),
                tuple(sizes), split, {})


def _gather_dims(ins: list[Shape], out: Shape, params: dict) -> OpDims | None:
  """gather (an embedding lookup): output axes outside `offset_dims` follow the indices' axes
  (the last is the index vector); offset axes follow the operand's uncollapsed axes when
  they are sliced whole and not indexed."""
  numbers = params["dimension_numbers"]
  if getattr(numbers, "operand_batching_dims", ()):
    return None
  labels = _Labels([out])
  out_labels = labels.outputs[0]
  offset_dims = tuple(numbers.offset_dims)
  batch_axes = [i for i in range(len(out)) if i not in offset_dims]
  indices: list[int | None] = [out_labels[j] for j in batch_axes] + [None]
  operand: list[int | None] = [None] * len(ins[0])
  kept = [d for d in range(len(ins[0])) if d not in numbers.collapsed_slice_dims]
  for j, d in zip(offset_dims, kept):
    if params["slice_sizes"][d] == ins[0][d] and d not in numbers.start_index_map:
      operand[d] = out_labels[j]
  mapped = {label for label in operand + indices if label is not None}
  labels.fixed(*[label for label in out_labels if label not in mapped])
  return labels.done([operand, indices[:len(ins[1])]])


def _conv_dims(ins: list[Shape], out: Shape, params: dict) -> OpDims:
  """conv_general_dilated: batch and output features map (without feature or batch groups);
  input features contract (summed); spatial axes stay whole (they would need halos)."""
  numbers = params["dimension_numbers"]
  return _convolution(ins, out, numbers.lhs_spec, numbers.rhs_spec, numbers.out_spec,
                      params["feature_group_count"] != 1 or params["batch_group_count"] != 1,
                      batch_grouped=params["batch_group_count"] != 1)


def _convolution(ins: list[Shape], out: Shape, lhs_spec, rhs_spec, out_spec, grouped: bool,
                 batch_grouped: bool = False, bias: bool = False) -> OpDims:
  """A convolution whose specs give (batch, features, spatial...) axes of the input, output and
  kernel ((out features, in features, spatial...)): the batch maps; without groups the output
  features follow the kernel's and the input features are summed; spatial axes stay whole.
  `bias`: a third operand over the output features."""
  labels = _Labels([out])
  out_labels = labels.outputs[0]
  lhs: list[int | None] = [None] * len(ins[0])
  rhs: list[int | None] = [None] * len(ins[1])
  lhs[lhs_spec[0]] = out_labels[out_spec[0]]
  if not grouped:
    rhs[rhs_spec[0]] = out_labels[out_spec[1]]
    label = labels.fresh(ins[0][lhs_spec[1]])
    lhs[lhs_spec[1]] = rhs[rhs_spec[1]] = label
    labels.combine[label] = "sum"
  operands = [lhs, rhs]
  if bias:
    operands.append([None if grouped else out_labels[out_spec[1]]])
  mapped = {label for axes in operands for label in axes if label is not None}
  labels.fixed(*[label for label in out_labels if label not in mapped])
  if batch_grouped:
    labels.fixed(out_labels[out_spec[0]])
  return labels.done(operands)


# ----- ONNX operators ----------------------------------------------------------------------
def from_onnx_node(node, in_shapes: list[Shape | None], out_shapes: list[Shape],
                   attribute, elementwise_ops: frozenset) -> OpDims | None:
  """The dims of one ONNX node (`attribute(node, name, default)` reads its attributes)."""
  op = node.op_type
  if len(out_shapes) != 1 or any(s is None for s in in_shapes):
    return None
  ins, out = [tuple(s) for s in in_shapes], tuple(out_shapes[0])
  if op in elementwise_ops or op in ("Cast", "Identity", "Dropout", "Erf", "Gelu"):
    return elementwise_dims(ins, out, align_right=True)
  if op == "MatMul" and len(ins[0]) >= 2 and len(ins[1]) >= 2:
    return _onnx_matmul(ins, out)
  if op == "Gemm":
    trans_a, trans_b = attribute(node, "transA", 0), attribute(node, "transB", 0)
    lc, rc = (0 if trans_a else 1), (1 if trans_b else 0)
    dims = dot_dims(ins[0], ins[1], out, (lc,), (rc,), (), ())
    if len(ins) > 2:  # The bias broadcasts over the output.
      extra = elementwise_dims([ins[2]], out, align_right=True).inputs[0]
      dims = dataclasses.replace(dims, inputs=dims.inputs + (extra,))
    return dims
  if op in ("Softmax", "LogSoftmax", "LayerNormalization"):
    axis = attribute(node, "axis", -1) % len(out)
    whole = range(axis, len(out)) if op == "LayerNormalization" else (axis,)
    maps = [{i: i for i in range(len(out)) if i not in whole}]
    maps += [{} for _ in ins[1:]]
    return axis_map_dims(ins, out, maps, fixed_out=list(whole))
  if op == "Einsum" and "..." not in attribute(node, "equation", b"...").decode():
    return einsum_dims(attribute(node, "equation", b"").decode(), ins, out)
  if op == "Transpose":
    permutation = attribute(node, "perm", list(reversed(range(len(ins[0])))))
    dims = permute_dims(ins[0], out, permutation)
    return dims
  if op == "Reshape":
    dims = reshape_dims(ins[0], out)
    return dataclasses.replace(dims, inputs=dims.inputs + ((None,) * len(ins[1]),))
  if op == "Gather" and len(ins) == 2 and ins[0]:
    return _onnx_gather(ins, out, attribute(node, "axis", 0) % len(ins[0]))
  if op == "Conv" and len(ins[0]) >= 3 and len(ins[1]) == len(ins[0]) and len(out) == len(ins[0]):
    return _onnx_conv(ins, out, attribute(node, "group", 1))
  if op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin") and len(ins) == 1:
    axes = attribute(node, "axes", list(range(len(ins[0]))))
    keep = bool(attribute(node, "keepdims", 1))
    combine = {"ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min"}.get(op)
    return reduce_dims(ins[0], out, tuple(a % len(ins[0]) for a in axes), combine, keep)
  return None


def _onnx_gather(ins: list[Shape], out: Shape, axis: int) -> OpDims | None:
  """Gather (an embedding's lookup: table [V, H], ids [B, S] -> [B, S, H]): the indices' axes
  and the data's other axes follow the output's; the gathered axis stays whole (split, each
  part would need a masked lookup and a sum)."""
  data, indices = ins
  if len(out) != len(data) - 1 + len(indices):
    return None
  labels = _Labels([out])
  out_labels = labels.outputs[0]
  data_axes: list[int | None] = [
      out_labels[i] if i < axis else None if i == axis else out_labels[i + len(indices) - 1]
      for i in range(len(data))]
  index_axes: list[int | None] = [out_labels[axis + j] for j in range(len(indices))]
  return labels.done([data_axes, index_axes])


def _onnx_conv(ins: list[Shape], out: Shape, group: int) -> OpDims:
  """Conv (X [N, C, spatial...], W [M, C / group, kernel...], bias [M]), as `_conv_dims` for
  JAX: its layout is (batch, features, spatial...) on every side."""
  layout = tuple(range(len(out)))
  return _convolution(ins, out, layout, layout, layout, group != 1, bias=len(ins) > 2)


def einsum_dims(equation: str, ins: list[Shape], out: Shape) -> OpDims | None:
  """An einsum: the output's letters are parallel labels, the others are summed."""
  operands, _, result = equation.replace(" ", "").partition("->")
  letters = operands.split(",")
  if not result or len(set(result)) != len(result) or len(letters) != len(ins):
    return None
  labels = _Labels([out])
  index = dict(zip(result, labels.outputs[0]))
  for names, shape in zip(letters, ins):
    for letter, size in zip(names, shape):
      if letter not in index:
        index[letter] = labels.fresh(size)
        labels.combine[index[letter]] = "sum"
  return labels.done([[index[letter] for letter in names] for names in letters])


def _onnx_matmul(ins: list[Shape], out: Shape) -> OpDims:
  """numpy matmul: leading axes broadcast (right-aligned), then rows x contracted x cols."""
  labels = _Labels([out])
  out_labels = labels.outputs[0]
  batch = len(out) - 2
  operands = []
  for shape, free in ((ins[0], -2), (ins[1], -1)):
    offset = batch - (len(shape) - 2)
    axes: list[int | None] = [out_labels[offset + i] if shape[i] == out[offset + i] else None
                              for i in range(len(shape) - 2)]
    axes += [out_labels[-2], None] if free == -2 else [None, out_labels[-1]]
    operands.append(axes)
  label = labels.fresh(ins[0][-1])
  operands[0][-1] = label
  operands[1][-2] = label
  labels.combine[label] = "sum"
  return labels.done(operands)


# ----- graph-wide ---------------------------------------------------------------------------
def graph_dims(graph: Graph) -> list[OpDims | None]:
  """Every op's dims from the graph's metadata (None where it records none)."""
  recorded = graph.metadata.get("op_dims")
  if not isinstance(recorded, list) or len(recorded) != graph.num_ops:
    return [None] * graph.num_ops
  return [OpDims.from_json(d) for d in recorded]


def batch_labels(graph: Graph, dims: list[OpDims | None] | None = None) -> list[int | None]:
  """Per op, the label of its batch dimension (None where it has none): the labels joined to
  axis 0 of the data inputs (`metadata["data_inputs"]`) through the tensors ops pass on."""
  dims = graph_dims(graph) if dims is None else dims
  operands = graph.metadata.get("operands") or [None] * graph.num_ops
  parent: dict[tuple[int, int], tuple[int, int]] = {}

  def find(node):
    parent.setdefault(node, node)
    while parent[node] != node:
      parent[node] = parent[parent[node]]
      node = parent[node]
    return node

  port = graph.tensor_port
  for op, op_dims in enumerate(dims):
    if op_dims is None or operands[op] is None:
      continue
    for tensor, axes in zip(operands[op], op_dims.inputs):
      producer = int(graph.tensor_producer[tensor]) if tensor is not None else None
      if producer is None or dims[producer] is None:
        continue
      produced = dims[producer].outputs[int(port[tensor])]
      for axis, label in enumerate(axes):
        if label is not None and axis < len(produced):
          parent[find((op, label))] = find((producer, produced[axis]))
  roots = {find((op, dims[op].outputs[0][0])) for op in graph.metadata.get("data_inputs", [])
           if dims[op] is not None and dims[op].outputs and dims[op].outputs[0]}
  labels: list[int | None] = []
  for op, op_dims in enumerate(dims):
    found = None
    if op_dims is not None:
      for label in op_dims.splittable():
        if find((op, label)) in roots:
          found = label
          break
    labels.append(found)
  return labels


def label_flops_share(graph: Graph, labels: list[int | None]) -> float:
  """The share of the graph's FLOPs in ops that have a label (what a split can reach)."""
  flops = np.asarray(graph.metadata.get("op_flops", np.zeros(graph.num_ops)), float)
  total = flops.sum()
  return float(flops[[label is not None for label in labels]].sum() / total) if total else 0.0
