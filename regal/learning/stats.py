"""The paired interval every claim about a guide rests on: a 95% bootstrap interval of the mean
over graphs of per-graph means of (graph, seed) values, graphs resampled, then seeds within
each (training's test verdict, `regal_experiments.paired_stats`, the search A/Bs)."""
from __future__ import annotations

import numpy as np

BOOTSTRAP = 10_000


def bootstrap_interval(per_pair: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
  """95% interval of the mean over graphs of per-graph means of [G, S] values: graphs
  resampled, then seeds within each."""
  graphs, seeds = per_pair.shape
  pick_graphs = rng.integers(0, graphs, (BOOTSTRAP, graphs))
  pick_seeds = rng.integers(0, seeds, (BOOTSTRAP, graphs, seeds))
  samples = per_pair[pick_graphs[..., None], pick_seeds].mean(axis=(1, 2))
  low, high = np.percentile(samples, [2.5, 97.5])
  return float(low), float(high)
