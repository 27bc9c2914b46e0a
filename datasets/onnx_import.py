"""An ONNX model as a computation graph (issue 70: a user's own model, from PyTorch or anywhere).

`load(path)` checks the model with the `onnx` package and runs its shape inference on the file
(models past protobuf's 2 GB included; weights are never read), and turns:

* every graph input that is not an initializer into an op of type "input" (cost 0);
* every initializer (a weight) into an op of type "param" (cost 0) whose one tensor is the
  weight's bytes: the memory it takes where it lives;
* every node into an op typed by its operator, one output tensor per named output, sized from
  its inferred shape (elements x dtype bytes), one data edge per distinct input tensor.

Cost model, as `regal_datasets.jax_import`'s (FLOPs in `metadata["op_flops"]`, compute cost = units /
`flops_per_byte`): MatMul 2 x output elements x the contracted size; Gemm the same plus the
bias; Einsum 2 x the product of all its index sizes (without an ellipsis); Conv 2 x output
elements x input channels per group x kernel elements (plus the bias); elementwise operators
one per output element; reductions and global pools one per input element; pooling one per
output element and kernel position; Softmax five per element, LayerNormalization eight,
BatchNormalization two; data movement (Reshape, Transpose, Gather, Concat, ...) no FLOPs but
one unit per output element; an operator this table does not know is warned about once by
name and costed like data movement. Shapes must be static after
inference (a symbolic batch dimension is an error naming the tensor: export with fixed shapes).
As the JAX importer, it records `op_dims`, `operands`, `tensor_shapes` and `data_inputs` (the
graph inputs that are not weights) for `regal.parallelism.shard_imported`.
"""
from __future__ import annotations

import math
import os

import numpy as np
from absl import logging

from regal_datasets import errors, op_dims
from regal_datasets.graph import Graph, GraphBuilder
from regal_datasets.jax_import import DEFAULT_FLOPS_PER_BYTE, NOMINAL_LINK_BYTES_PER_SECOND

ELEMENTWISE = frozenset("""
Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift Ceil Celu Clip Cos Cosh Div Elu Equal Erf
Exp Floor Gelu Greater GreaterOrEqual HardSigmoid HardSwish IsInf IsNaN LeakyRelu Less
LessOrEqual Log Max Mean Min Mish Mod Mul Neg Not Or PRelu Pow Reciprocal Relu Round Selu
Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Sub Sum Tan Tanh ThresholdedRelu Where Xor
QuickGelu
""".split())
_REDUCTIONS = frozenset("""
ArgMax ArgMin ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin
ReduceProd ReduceSum ReduceSumSquare GlobalAveragePool GlobalMaxPool GlobalLpPool CumSum TopK
""".split())
MOVEMENT = frozenset("""
Cast CastLike Concat Constant ConstantOfShape DepthToSpace Dropout Expand EyeLike Flatten Gather
GatherElements GatherND Identity NonZero OneHot Pad Range Reshape Resize ScatterElements
ScatterND Shape Size Slice SpaceToDepth Split Squeeze Tile Transpose Trilu Unsqueeze
""".split())
_PER_ELEMENT = {"Softmax": 5.0, "LogSoftmax": 5.0, "LayerNormalization": 8.0,
                "InstanceNormalization": 8.0, "GroupNormalization": 8.0,
                "BatchNormalization": 2.0}
_POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})
_warned: set[str] = set()


def _warn_once(op_type: str) -> None:
  if op_type not in _warned:
    _warned.add(op_type)
    logging.warning("onnx importer: no cost rule for operator %s: costed like data movement "
                    "(one unit per output element, no FLOPs)", op_type)


def _attribute(node, name: str, default):
  import onnx
  for attribute in node.attribute:
    if attribute.name == name:
      return onnx.helper.get_attribute_value(attribute)
  return default


def einsum_flops(equation: str, shapes: list[tuple[int, ...]]) -> float:
  """An einsum's FLOPs: one multiply-add (2 FLOPs) per point of the space of all its indices
  when it multiplies operands, one per point for a single operand (a sum or a transpose)."""
  operands = equation.replace(" ", "").split("->")[0].split(",")
  size: dict[str, int] = {}
  for letters, shape in zip(operands, shapes):
    for letter, dim in zip(letters, shape):
      size[letter] = dim
  return (2.0 if len(operands) > 1 else 1.0) * math.prod(size.values())


def node_flops(node, shapes: dict[str, tuple[int, ...]]) -> tuple[float, float]:
  """(FLOPs, cost units) of one node from its tensors' static shapes (the module doc)."""
  inputs = [shapes.get(name) for name in node.input if name]
  out_elements = sum(math.prod(shapes[name]) for name in node.output if name in shapes)
  op = node.op_type
  if op == "MatMul":
    flops = 2.0 * out_elements * inputs[0][-1]
  elif op == "Gemm":
    contracted = inputs[0][0] if _attribute(node, "transA", 0) else inputs[0][-1]
    flops = 2.0 * out_elements * contracted + (out_elements if len(inputs) > 2 else 0)
  elif op == "Conv":
    weight = inputs[1]  # [output channels, input channels / group, *kernel]
    flops = 2.0 * out_elements * math.prod(weight[1:]) + (out_elements if len(inputs) > 2 else 0)
  elif op == "Einsum" and "..." not in _attribute(node, "equation", b"...").decode():
    flops = einsum_flops(_attribute(node, "equation", b"").decode(), inputs)
  elif op in ELEMENTWISE:
    flops = float(out_elements)
  elif op in _REDUCTIONS:
    flops = float(math.prod(inputs[0]))
  elif op in _PER_ELEMENT:
    flops = _PER_ELEMENT[op] * out_elements
  elif op in _POOLS:
    flops = float(out_elements * math.prod(_attribute(node, "kernel_shape", [1])))
  else:
    if op not in MOVEMENT:
      _warn_once(op)
    return 0.0, float(out_elements)
  return flops, flops


def _static_shapes(model) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
  """Every typed tensor's static shape and element bytes (after shape inference)."""
  import onnx
  shapes, item_bytes = {}, {}
  values = (list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output))
  for value in values:
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
      continue
    dims = []
    for dim in tensor_type.shape.dim:
      if not dim.HasField("dim_value"):
        raise errors.FormatError(f"ONNX tensor {value.name!r} has a symbolic dimension "
                                 f"({dim.dim_param or '?'}): export the model with fixed "
                                 f"shapes")
      dims.append(int(dim.dim_value))
    shapes[value.name] = tuple(dims)
    item_bytes[value.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(
        tensor_type.elem_type)).itemsize
  for initializer in model.graph.initializer:
    shapes[initializer.name] = tuple(int(d) for d in initializer.dims)
    item_bytes[initializer.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(
        initializer.data_type)).itemsize
  return shapes, item_bytes


def _brief(error: Exception, width: int = 200) -> str:
  return " ".join(str(error).split())[:width]


def from_model(model, name: str = "onnx_model",
               flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE) -> Graph:
  """The graph of an `onnx.ModelProto` held in memory (the module doc; under 2 GB, protobuf's
  limit: `load` reads larger files from their path)."""
  import onnx
  _check_flops_per_byte(flops_per_byte)
  try:
    onnx.checker.check_model(model)
  except Exception as error:  # pylint: disable=broad-except  # onnx raises its own kinds.
    raise errors.FormatError(f"ONNX model {name!r} is not valid: {_brief(error)}") from None
  try:
    # data_prop: shapes computed from shapes (torch's Shape -> Gather -> Concat -> Reshape of a
    # flatten) propagate, so a statically shaped export stays static.
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
  except Exception as error:  # pylint: disable=broad-except  # onnx raises its own kinds.
    raise errors.FormatError(f"ONNX model {name!r}: shape inference failed "
                             f"({_brief(error)})") from None
  return _graph(model, name, flops_per_byte)


def _check_flops_per_byte(flops_per_byte: float) -> None:
  if not flops_per_byte > 0:
    raise errors.ConfigError(f"flops_per_byte must be positive, got {flops_per_byte}")


def _graph(model, name: str, flops_per_byte: float) -> Graph:
  """The graph of a checked model whose shapes were inferred (its weights need not be
  loaded: their shapes and types are in the model)."""
  shapes, item_bytes = _static_shapes(model)
  builder = GraphBuilder(name)
  tensor_of: dict[str, int] = {}
  op_flops: list[float] = []

  def tensor_bytes(tensor: str) -> float:
    if tensor not in shapes:
      raise errors.FormatError(f"ONNX model {name!r}: no inferred shape for tensor {tensor!r}")
    return float(math.prod(shapes[tensor]) * item_bytes[tensor])

  dims: list = []
  operands: list = []
  tensor_shapes: list = []
  data_inputs: list = []

  def add_tensor(op: int, tensor: str) -> None:
    tensor_of[tensor] = builder.add_tensor(op, tensor_bytes(tensor))
    tensor_shapes.append(list(shapes[tensor]))

  def add_source(kind: str, tensor: str) -> int:
    op = builder.add_op(f"{kind}:{tensor}", 0.0, kind)
    op_flops.append(0.0)
    dims.append(op_dims.source_dims(shapes.get(tensor, ())).to_json())
    operands.append([])
    add_tensor(op, tensor)
    return op

  weights = {initializer.name for initializer in model.graph.initializer}
  for initializer in model.graph.initializer:
    add_source("param", initializer.name)
  for value in model.graph.input:
    if value.name not in weights:
      op = add_source("input", value.name)
      if shapes.get(value.name):
        data_inputs.append(op)
  counts: dict[str, int] = {}
  for node in model.graph.node:
    missing = [t for t in node.input if t and t not in tensor_of]
    if missing:
      raise errors.FormatError(f"ONNX model {name!r}: node {node.name or node.op_type!r} reads "
                               f"{missing[0]!r}, which no earlier node or input produces")
    flops, units = node_flops(node, shapes)
    count = counts.get(node.op_type, 0)
    counts[node.op_type] = count + 1
    op = builder.add_op(node.name or f"{node.op_type}_{count}", units / flops_per_byte,
                        node.op_type)
    op_flops.append(flops)
    node_dims = op_dims.from_onnx_node(node, [shapes.get(t) for t in node.input if t],
                                       [shapes.get(t) for t in node.output if t], _attribute,
                                       ELEMENTWISE)
    dims.append(None if node_dims is None else node_dims.to_json())
    operands.append([tensor_of[t] for t in node.input if t])
    for tensor in dict.fromkeys(t for t in node.input if t):
      builder.add_data_edge(tensor_of[tensor], op)
    for tensor in node.output:
      if tensor:
        add_tensor(op, tensor)
  builder.metadata.update({
      "source": "onnx", "flops_per_byte": flops_per_byte,
      "link_bytes_per_second": NOMINAL_LINK_BYTES_PER_SECOND,
      "total_flops": float(sum(op_flops)), "op_flops": op_flops, "op_dims": dims,
      "operands": operands, "data_inputs": data_inputs, "tensor_shapes": tensor_shapes})
  return builder.build()


def load(path: str, flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE) -> Graph:
  """The graph of the ONNX file at `path`; one-line errors for a file that is not ONNX. The
  check and the shape inference run on the file, as the `onnx` package does for models past
  protobuf's 2 GB, and the weights are never read: a 7B model's external data stays on disk."""
  import tempfile

  import onnx
  from google.protobuf.message import DecodeError
  _check_flops_per_byte(flops_per_byte)
  name = os.path.splitext(os.path.basename(path))[0]
  if not os.path.isfile(path):
    raise errors.FormatError(f"{path}: no such file")
  try:
    model = onnx.load(path, load_external_data=False)
  except (DecodeError, ValueError, RuntimeError, UnicodeDecodeError) as error:
    raise errors.FormatError(f"{path}: not an ONNX model ({_brief(error, 120)})") from None
  if not model.graph.node:
    raise errors.FormatError(f"{path}: not an ONNX model (no graph nodes)")
  try:
    onnx.checker.check_model(path)
  except Exception as error:  # pylint: disable=broad-except  # onnx raises its own kinds.
    external = "stored in" in str(error) or "external" in str(error).lower()
    raise errors.FormatError(
        f"{path}: its weights cannot be read ({_brief(error, 160)})" if external else
        f"ONNX model {name!r} is not valid: {_brief(error)}") from None
  with tempfile.TemporaryDirectory() as folder:
    inferred = os.path.join(folder, "inferred.onnx")
    try:
      onnx.shape_inference.infer_shapes_path(path, inferred, strict_mode=True, data_prop=True)
    except Exception as error:  # pylint: disable=broad-except  # onnx raises its own kinds.
      raise errors.FormatError(f"ONNX model {name!r}: shape inference failed "
                               f"({_brief(error)})") from None
    model = onnx.load(inferred, load_external_data=False)
  return _graph(model, name, flops_per_byte)
