"""Collectives at their standard costs, over links as they are (issue 83).

A collective over `n` ranks moving a buffer of `S` bytes takes, with NCCL's bus-bandwidth
convention (nccl-tests, doc/PERFORMANCE.md: busbw = algbw x the factor below, the rate each
rank's link actually carries):

  all-reduce              2 (n - 1) / n x S / busbw      ring: 2 (n - 1) latency steps;
                          tree: 2 log2(n) steps at 2 S / (0.9 busbw)
  reduce-scatter, all-gather  (n - 1) / n x S / busbw    n - 1 steps (S: the whole buffer)
  all-to-all              (n - 1) / n x S / busbw        n - 1 steps
  send (point to point)   S / link bandwidth             1 step

and NCCL picks the faster algorithm per size, as here (`algorithm="auto"`): the tree for
small buffers on many ranks, the ring for large ones (NCCL's tuning model rates a tree's
bandwidth below the ring's; 0.9 is our approximation of it). The bus bandwidth
is a `Fabric`'s: inside a node every GPU reaches the NVSwitch at its NVLink rate, shared by all
its peers (so a GPU does not send to seven peers at seven times that rate); a group spanning
nodes runs at the network card's rate per GPU (one NIC per GPU, as DGX / HGX nodes have).
"""
from __future__ import annotations

import dataclasses
import math

from regal_datasets import errors

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send")
ALGORITHMS = ("auto", "ring", "tree")
TREE_BANDWIDTH_SHARE = 0.9


@dataclasses.dataclass(frozen=True)
class Fabric:
  """How a kind's GPUs are wired (SI units: bytes/s each direction, seconds). `efficiency`:
  the fraction of nominal bandwidth a large collective reaches."""
  name: str
  gpus_per_node: int
  nvlink_bandwidth: float  # Per GPU to the switch (or its peers), each direction.
  nvlink_latency: float
  network_bandwidth: float  # Per GPU across nodes (its NIC), each direction.
  network_latency: float
  efficiency: float
  source: str

  def link(self, ranks: int, stride: int = 1) -> tuple[float, float]:
    """(bus bandwidth, latency per step) of a group of `ranks` ranks `stride` apart in the
    global order (node-major: ranks 0..gpus_per_node-1 share node 0)."""
    if ranks < 1 or stride < 1:
      raise errors.ConfigError(f"a group needs positive ranks and stride, got {ranks}, "
                               f"{stride}")
    if ranks * stride <= self.gpus_per_node:
      return self.nvlink_bandwidth * self.efficiency, self.nvlink_latency
    bandwidth = min(self.nvlink_bandwidth, self.network_bandwidth)
    return bandwidth * self.efficiency, self.network_latency


# Sources: NVIDIA DGX H100 user guide (8 H100 SXM per node, NVLink 4 through NVSwitch: 900 GB/s
# per GPU both ways; 8 ConnectX-7 400 Gb/s NICs, one per GPU: 50 GB/s); DGX A100 (NVLink 3,
# 600 GB/s both ways; 8 ConnectX-6 200 Gb/s: 25 GB/s); DGX-1 V100 (NVLink 2 hybrid cube mesh,
# 300 GB/s both ways; 4 x 100 Gb/s EDR for 8 GPUs: 6.25 GB/s per GPU); Google Cloud TPU v5e
# (a 16-chip 4 x 4 slice here; ICI 1,600 Gbps per chip: 200 GB/s; data-center network 25 GB/s
# per host of 4 chips). Latencies: NCCL's per-step base latencies, a few microseconds on
# NVLink and about ten across InfiniBand. Efficiency 0.8: an assumption (large-message
# nccl-tests bus bandwidth commonly reaches 75-90% of nominal), to calibrate on a lent GPU.
FABRICS = {
    "h100": Fabric("DGX H100", 8, 450e9, 3e-6, 50e9, 10e-6, 0.8, "DGX H100 user guide"),
    "a100": Fabric("DGX A100", 8, 300e9, 3e-6, 25e9, 10e-6, 0.8, "DGX A100 user guide"),
    "v100": Fabric("DGX-1 V100", 8, 150e9, 3e-6, 6.25e9, 10e-6, 0.8, "DGX-1 user guide"),
    "tpu_v5e": Fabric("TPU v5e slice", 16, 200e9, 2e-6, 6.25e9, 10e-6, 0.8,
                      "Cloud TPU v5e documentation"),
}


def _factor(kind: str, ranks: int) -> float:
  if kind == "all_reduce":
    return 2.0 * (ranks - 1) / ranks
  if kind == "send":
    return 1.0
  return (ranks - 1) / ranks


def _steps(kind: str, ranks: int) -> int:
  if kind == "all_reduce":
    return 2 * (ranks - 1)
  return 1 if kind == "send" else ranks - 1


def seconds(kind: str, size: float, ranks: int, bandwidth: float, latency: float,
            algorithm: str = "auto") -> float:
  """Seconds of one collective of `size` bytes (the whole buffer) over `ranks` ranks whose
  links carry `bandwidth` bytes/s (the bus bandwidth) with `latency` s per step."""
  if kind not in KINDS:
    raise errors.ConfigError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
  if algorithm not in ALGORITHMS:
    raise errors.ConfigError(f"unknown algorithm {algorithm!r}; known: "
                             f"{', '.join(ALGORITHMS)}")
  if ranks <= 1 or size <= 0:
    return 0.0
  ring = _steps(kind, ranks) * latency + _factor(kind, ranks) * size / bandwidth
  if kind != "all_reduce" or algorithm == "ring":
    return ring
  tree = (2 * math.ceil(math.log2(ranks)) * latency
          + 2.0 * size / (TREE_BANDWIDTH_SHARE * bandwidth))
  return tree if algorithm == "tree" else min(ring, tree)


def on_fabric(kind: str, size: float, fabric: Fabric, ranks: int, stride: int = 1,
              algorithm: str = "auto") -> float:
  """`seconds` for a group of `ranks` GPUs `stride` apart on `fabric`."""
  bandwidth, latency = fabric.link(ranks, stride)
  return seconds(kind, size, ranks, bandwidth, latency, algorithm)
