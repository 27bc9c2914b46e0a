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

from regal.parallelism import hardware
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


# The wiring is the kinds' (`regal.parallelism.hardware.KINDS`: NVLink per GPU, node size, NIC
# per GPU, with their sources). Latencies: NCCL's per-step base latencies, a few microseconds
# on NVLink and about ten across InfiniBand. Efficiency 0.8: an assumption (large-message
# nccl-tests bus bandwidth commonly reaches 75-90% of nominal), to calibrate on a lent GPU.
EFFICIENCY = 0.8


def fabric_of(kind: str) -> Fabric:
  """The fabric nodes of `kind` make (`hardware.KINDS`' figures)."""
  accelerator = hardware.KINDS[kind]
  return Fabric(f"{accelerator.name} x {accelerator.node_size} per node",
                accelerator.node_size, accelerator.link_bandwidth, accelerator.link_latency,
                accelerator.network_bandwidth, accelerator.network_latency, EFFICIENCY)


FABRICS = {kind: fabric_of(kind) for kind in ("h100", "a100", "v100", "tpu_v5e")}


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
