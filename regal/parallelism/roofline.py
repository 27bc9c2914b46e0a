"""The per-op cost model on real devices (issues 70, 83): an imported graph's FLOPs and bytes
turned into seconds on the accelerator kinds of `regal.parallelism.hardware`.

  python -m regal.optimize --graph bert.json --devices 4 --device_preset h100 --shard auto
  python -m regal.optimize --graph bert.json --devices 4 --device_preset h100+cpu  # + a host

Ops run in kernels as XLA fuses them (`fusion_groups`: elementwise and data-movement ops join
a neighbour's kernel, at most one matmul, convolution or reduction per kernel). A kernel's
time is its roofline, max(FLOPs / (peak FLOP/s x matmul efficiency), bytes entering and leaving
it / (memory bandwidth x memory efficiency)), plus a launch (`KERNEL_COSTS`, calibrated where
published step times allow), shared among its ops (`kernel_seconds`; `roofline_seconds` is
the unfused roofline at the full peak, for comparison). Peak rates are dense: an op whose
output is 16-bit (BF16 / FP16) runs at the kind's 16-bit peak, any other at its 32-bit rate as
XLA runs float32 by default (TF32 tensor cores on A100 / H100, bfloat16 passes on TPU; V100
has no TF32: its FP32 rate). Memory is the device's HBM (the host: its DRAM). A tensor
crosses a link in latency + bytes / bandwidth (`hardware.accelerator_spec`: NVLink or ICI
inside a node, the network between nodes, PCIe to the host), one transfer at a time through
each GPU's NVLink port and network port, each way (`DeviceSpec.ports`).

Times keep the importers' unit (one unit is 10 ps, the time a nominal 100 GB/s link takes per
byte; `regal_datasets.jax_import.NOMINAL_LINK_BYTES_PER_SECOND`), so results read in seconds. The
graph's costs are the first device's times; the others' `speed` is the ratio of their total
kernel time on this graph to the first's (exact for a graph of one kind; for a mix, per
graph rather than per op, stated in the result).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from regal.parallelism import hardware, shard_imported
from regal_datasets import devices as devices_lib
from regal_datasets import errors, jax_import, onnx_import, train_step
from regal_datasets.graph import Graph
from regal_datasets.jax_import import NOMINAL_LINK_BYTES_PER_SECOND


KINDS = hardware.KINDS


# (matmul share of the dense peak, memory share of HBM bandwidth, seconds per kernel launch);
# kinds not in this table are refused. The matmul shares of H100 and A100 are fitted to
# MosaicML's published MPT training steps (calibration rows only; validated on others:
# experiments/results/training_predictions/); the other kinds keep the a-priori figures set
# before any comparison: 70% of the peak (a large BF16 GEMM in cuBLAS / XLA), 85% of HBM
# bandwidth (streaming kernels), a 3 us launch on a GPU (CUDA launch and XLA's dispatch) and
# 1 us on a TPU (one compiled program, per-op overheads).
KERNEL_COSTS = {
    "h100": (0.56, 0.85, 3e-6), "a100": (0.77, 0.85, 3e-6), "v100": (0.70, 0.85, 3e-6),
    "tpu_v5e": (0.70, 0.85, 1e-6), "cpu": (0.50, 0.70, 1e-6),
}
FUSIBLE_CLASSES = ("elementwise", "movement")
# The importers' op classes (JAX primitives, ONNX operators), less the movement XLA does not
# fuse into a neighbour: gathers and scatters index memory, dynamic slices move windows, and
# the rest mark boundaries or make values of their own.
_ELEMENTWISE = jax_import.ELEMENTWISE | onnx_import.ELEMENTWISE
_MOVEMENT = (jax_import.MOVEMENT | onnx_import.MOVEMENT) - {
    "gather", "scatter", "scatter-add", "scatter_add", "select_and_gather_add",
    "select_and_scatter_add", "dynamic_slice", "dynamic_update_slice", "iota",
    "bitcast_convert_type", "copy_p", "device_put", "optimization_barrier",
    "sharding_constraint",
    "Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND", "NonZero",
    "Shape", "Size", "Range", "Constant", "ConstantOfShape", "EyeLike", "OneHot", "Resize"}
def primitive_class(op_type: str) -> str:
  """`elementwise`, `movement` (both fuse into a neighbour's kernel) or `other`."""
  if op_type in _ELEMENTWISE:
    return "elementwise"
  if op_type in _MOVEMENT:
    return "movement"
  return "other"


def fusion_groups(graph: Graph, phase: np.ndarray, unit: np.ndarray,
                  readers: list[list[int]]) -> np.ndarray:
  """[ops] the kernel each op runs in, as XLA fuses: elementwise and data-movement ops join
  their producers' and readers' kernels, a kernel holds at most one other op (a matmul, a
  convolution, a reduction), and kernels stay inside one phase and one unit."""
  parent = list(range(graph.num_ops))
  heavy = [primitive_class(t) not in FUSIBLE_CLASSES for t in graph.op_types]
  holds_heavy = list(heavy)  # Per kernel (its root op): whether it holds a heavy op.

  def root(op: int) -> int:
    while parent[op] != op:
      parent[op] = parent[parent[op]]
      op = parent[op]
    return op

  for tensor, producer in enumerate(graph.tensor_producer.tolist()):
    if phase[producer] == "input":
      continue
    for reader in readers[tensor]:
      if phase[reader] != phase[producer] or unit[reader] != unit[producer]:
        continue
      a, b = root(producer), root(reader)
      if a != b and not (holds_heavy[a] and holds_heavy[b]):
        parent[b] = a
        holds_heavy[a] = holds_heavy[a] or holds_heavy[b]
  return np.array([root(op) for op in range(graph.num_ops)])


def fused_seconds(graph: Graph, kind: str, phase: np.ndarray, group: np.ndarray,
                  readers: list[list[int]],
                  costs: tuple[float, float, float] | None = None) -> np.ndarray:
  """[ops] seconds of each op on `kind`: its kernel's (`group`, `fusion_groups`) roofline
  (the FLOPs of its ops at their precision's peak; the bytes entering and leaving the kernel)
  plus a launch, shared among the kernel's ops in proportion to their FLOP and byte times;
  `costs`: (matmul share, memory share, launch seconds) instead of the kind's."""
  accelerator = KINDS[kind]
  matmul_share, memory_share, launch = costs or KERNEL_COSTS[kind]
  peak = np.where(op_item_bytes(graph) <= 2, accelerator.half_peak_flops,
                  accelerator.peak_flops) * matmul_share
  flop_seconds = np.asarray(graph.metadata["op_flops"], float) / peak
  moved = np.zeros(graph.num_ops)  # Bytes each op moves across its kernel's edge.
  size = graph.tensor_size
  for tensor, producer in enumerate(graph.tensor_producer.tolist()):
    outside = [r for r in readers[tensor] if group[r] != group[producer]]
    if outside or not readers[tensor]:  # Read by another kernel, or a step output.
      moved[producer] += size[tensor]
    for reader in outside:
      moved[reader] += size[tensor]
  if "resident_reads" in graph.metadata:  # Parameters a split graph's ops read from HBM.
    moved += [sum(read[2] for read in reads) for reads in graph.metadata["resident_reads"]]
  byte_seconds = moved / (accelerator.memory_bandwidth * memory_share)
  counted = phase != "input"
  flops_total = np.bincount(group, weights=flop_seconds * counted, minlength=graph.num_ops)
  bytes_total = np.bincount(group, weights=byte_seconds * counted, minlength=graph.num_ops)
  members = np.bincount(group, weights=counted.astype(float), minlength=graph.num_ops)
  kernel = np.maximum(flops_total, bytes_total) + launch
  weight = flop_seconds + byte_seconds
  weight_total = np.bincount(group, weights=weight * counted, minlength=graph.num_ops)
  share = np.where(weight_total[group] > 0, weight / np.maximum(weight_total[group], 1e-300),
                   1.0 / np.maximum(members[group], 1))
  return np.where(counted, kernel[group] * share, 0.0)


def op_bytes(graph: Graph) -> np.ndarray:
  """[num_ops] bytes each op reads and writes: its distinct input tensors, the resident
  parameters it reads (a split graph's `resident_reads`) and its outputs."""
  read = np.array([sum(r[2] for r in reads) for reads in graph.metadata["resident_reads"]],
                  float) if "resident_reads" in graph.metadata else np.zeros(graph.num_ops)
  pairs = set(zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()))
  for tensor, consumer in pairs:
    read[consumer] += graph.tensor_size[tensor]
  written = np.bincount(graph.tensor_producer, weights=graph.tensor_size,
                        minlength=graph.num_ops)
  return read + written


def op_item_bytes(graph: Graph) -> np.ndarray:
  """[num_ops] bytes per element of each op's first output (2: it computes in 16 bits); 4
  where the graph records no tensor shapes or the op has no output."""
  found = np.full(graph.num_ops, 4.0)
  shapes = graph.metadata.get("tensor_shapes")
  if not shapes or len(shapes) != graph.num_tensors:
    return found
  first = {}
  for tensor, producer in enumerate(graph.tensor_producer.tolist()):
    first.setdefault(producer, tensor)
  for op, tensor in first.items():
    elements = int(np.prod(shapes[tensor])) if len(shapes[tensor]) else 1
    if elements:
      found[op] = graph.tensor_size[tensor] / elements
  return found


def tensor_readers(graph: Graph) -> list[list[int]]:
  """[num_tensors] the ops reading each tensor, in op order, each once."""
  readers: list[list[int]] = [[] for _ in range(graph.num_tensors)]
  for tensor, consumer in sorted(set(zip(graph.data_edge_tensor.tolist(),
                                         graph.data_edge_consumer.tolist())),
                                 key=lambda pair: pair[1]):
    readers[tensor].append(consumer)
  return readers


def present_before_the_step(graph: Graph) -> np.ndarray:
  """[num_ops] bool: sources, and what derives from parameters alone (computed once, before
  the step: `shard_imported.resident_ops`); they take no time."""
  sources = np.array([t in ("input", "param", "const") for t in graph.op_types])
  return sources | shard_imported.resident_ops(graph)


def roofline_seconds(graph: Graph, kind: str) -> np.ndarray:
  """[num_ops] seconds of each op on `kind` as its own kernel at the full peak: max(FLOPs /
  peak, bytes / memory bandwidth), no launch (what `kernel_seconds` refines)."""
  accelerator = KINDS[kind]
  flops = np.asarray(graph.metadata["op_flops"], float)
  peak = np.where(op_item_bytes(graph) <= 2, accelerator.half_peak_flops,
                  accelerator.peak_flops)
  seconds = np.maximum(flops / peak, op_bytes(graph) / accelerator.memory_bandwidth)
  return np.where(present_before_the_step(graph), 0.0, seconds)


def kernel_seconds(graph: Graph, kind: str,
                   costs: tuple[float, float, float] | None = None) -> np.ndarray:
  """[num_ops] seconds of each op on `kind` as XLA runs the graph: its share of its fused
  kernel's time (`fusion_groups`, `fused_seconds`: the kind's efficiencies and a launch per
  kernel; `costs` instead of `KERNEL_COSTS[kind]`). Kernels stay inside a training step's
  phases; what is present before the step takes no time."""
  phase = np.where(present_before_the_step(graph), "input", np.array(train_step.phases(graph)))
  readers = tensor_readers(graph)
  group = fusion_groups(graph, phase, np.zeros(graph.num_ops, int), readers)
  return fused_seconds(graph, kind, phase, group, readers, costs)


def recost(graph: Graph, devices: devices_lib.DeviceSpec
           ) -> tuple[Graph, devices_lib.DeviceSpec]:
  """`graph` with its costs the roofline times of `devices`' first kind (in the importers'
  time unit) and `devices` with each kind's speed its total roofline time's ratio, scaled by
  the spec's own speed against the kind's peak (`devices` module doc)."""
  if not devices.kinds:
    return graph, devices
  hardware.check_kinds(devices)
  if "op_flops" not in graph.metadata:
    raise errors.ConfigError(
        f"--device_preset {devices.kinds[0]} costs ops by their FLOPs and bytes: graph "
        f"{graph.name!r} records no FLOPs (import it from JAX or ONNX, or give --device_spec "
        f"with speeds in its own units)")
  seconds = {kind: kernel_seconds(graph, kind) for kind in dict.fromkeys(devices.kinds)}
  reference = seconds[devices.kinds[0]]
  total = float(reference.sum())
  # A spec's own speeds scale each device against its kind's peak (a preset's are the peaks'
  # ratios: scale 1), so a device said to be slower stays slower.
  peak = np.array([KINDS[kind].peak_flops / KINDS[devices.kinds[0]].peak_flops
                   for kind in devices.kinds])
  scale = np.asarray(devices.speed, np.float64) / peak
  speed = scale * np.array([total / float(seconds[kind].sum()) if total else 1.0
                            for kind in devices.kinds])
  costs = reference * NOMINAL_LINK_BYTES_PER_SECOND
  metadata = {**graph.metadata, "link_bytes_per_second": NOMINAL_LINK_BYTES_PER_SECOND,
              "roofline": {"device": KINDS[devices.kinds[0]].name,
                           "peak_tflops": KINDS[devices.kinds[0]].peak_flops / 1e12,
                           "memory_tb_per_s": KINDS[devices.kinds[0]].memory_bandwidth / 1e12}}
  graph = graph.replace(compute_cost=costs, metadata=metadata)
  return graph, dataclasses.replace(devices, speed=speed)
