"""The graphs the benchmarks run on."""
from __future__ import annotations

import numpy as np

from datasets import synthetic
from datasets.graph import Graph


def synthetic_graph(num_ops: int, seed: int = 0, topology: str = "erdos_renyi") -> Graph:
  """A REGAL synthetic graph with exactly `num_ops` core ops; Erdos-Renyi by default (about
  1000 edges at 200 ops, like the anchors in the performance-model and BRKGA issues; edges
  grow with the square of the ops), Barabasi-Albert for about two edges per op."""
  spec = synthetic.SyntheticSpec(min_nodes=num_ops, max_nodes=num_ops)
  return synthetic.generate(np.random.default_rng(seed), spec, topology=topology)
