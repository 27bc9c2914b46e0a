"""The per-op cost model on real devices (issues 70, 83): an imported graph's FLOPs and bytes
turned into seconds on the accelerator kinds of `regal.parallelism.hardware`.

  python -m regal.optimize --graph bert.json --devices 4 --device_preset h100 --shard auto
  python -m regal.optimize --graph bert.json --devices 4 --device_preset h100+cpu  # + a host

An op's time on a kind is its roofline, max(FLOPs / peak FLOP/s, bytes read and written /
memory bandwidth); a tensor crosses a link in latency + bytes / bandwidth (`hardware.
accelerator_spec`: NVLink or ICI inside a node, the network between nodes, PCIe to the host).
Peak rates are dense: an op whose output is 16-bit (BF16 / FP16) runs at the kind's 16-bit
peak, any other at its 32-bit rate as XLA runs float32 by default (TF32 tensor cores on A100
/ H100, bfloat16 passes on TPU; V100 has no TF32: its FP32 rate). Memory is the device's HBM
(the host: its DRAM). Launch overheads and fusion are not modelled here: every op is its own
kernel (a training step's fused kernels are `regal.parallelism.profile`'s).

Times keep the importers' unit (one unit is 10 ps, the time a nominal 100 GB/s link takes per
byte; `regal_datasets.jax_import.NOMINAL_LINK_BYTES_PER_SECOND`), so results read in seconds. The
graph's costs are the first device's times; the others' `speed` is the ratio of their total
roofline time on this graph to the first's (exact for a graph of one kind; for a mix, per
graph rather than per op, stated in the result).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from regal.parallelism import hardware, shard_imported
from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets.graph import Graph
from regal_datasets.jax_import import NOMINAL_LINK_BYTES_PER_SECOND


KINDS = hardware.KINDS


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


def roofline_seconds(graph: Graph, kind: str) -> np.ndarray:
  """[num_ops] seconds of each op on `kind`: max(FLOPs / peak, bytes / memory bandwidth);
  sources and what derives from parameters alone (present before the step, computed once:
  `shard_imported.resident_ops`) take none."""
  accelerator = KINDS[kind]
  flops = np.asarray(graph.metadata["op_flops"], float)
  peak = np.where(op_item_bytes(graph) <= 2, accelerator.half_peak_flops,
                  accelerator.peak_flops)
  seconds = np.maximum(flops / peak, op_bytes(graph) / accelerator.memory_bandwidth)
  sources = np.array([t in ("input", "param", "const") for t in graph.op_types])
  return np.where(sources | shard_imported.resident_ops(graph), 0.0, seconds)


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
  seconds = {kind: roofline_seconds(graph, kind) for kind in dict.fromkeys(devices.kinds)}
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
