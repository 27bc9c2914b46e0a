"""What a graph's structure alone says about any placement of it."""
from __future__ import annotations

import numpy as np

from datasets.devices import DeviceSpec
from datasets.graph import Graph


def longest_compute_path(graph: Graph) -> float:
  """The largest total compute cost along a dependency path (transfers free)."""
  longest = np.zeros(graph.num_ops)
  for op in graph.topological_order.tolist():
    longest[op] = graph.compute_cost[op] + max(
        (longest[p] for p in graph.predecessors(op)), default=0.0)
  return float(longest.max(initial=0.0))


def makespan_lower_bound(graph: Graph, devices: DeviceSpec) -> float:
  """No placement under any of our models finishes sooner: max(total compute over the summed
  device speeds, the longest compute path on the fastest device)."""
  speed = np.asarray(devices.speed, np.float64)
  return max(float(graph.compute_cost.sum()) / float(speed.sum()),
             longest_compute_path(graph) / float(speed.max()))
