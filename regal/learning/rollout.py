"""Rollouts for training: the one search (`regal.search.guides.run_guided`) on training graphs.

`RolloutWorker.run(tasks)` is what a Ray actor (or the driver, in-process) executes: for each
(graph index, per-gene Beta alpha and beta on the graph's own layout or None for the unguided
search, seed, budget) it returns the objective of the search `regal.optimize` runs (the
preset's parameters and settings for the problem's model, the heuristic seeds, the bucketed
compiled search, guided or not; `Task.prior`: a prior over fresh keys), scored by the problem's own model. The worker pads every
graph to one shape (`brkga_search.common_shape`), so it compiles the search once: the same
search and parameters as each graph's own buckets, only padded further; with `Task.best` also the best chromosome (what measured rewards
decode and execute).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import numpy as np

import regal_brkga as brkga
from regal.baselines import heuristics
from regal.scoring import performance
from regal.search import brkga_presets
from regal.search import brkga_search
from regal.search import guides


@dataclasses.dataclass(frozen=True)
class Task:
  graph_index: int
  alpha: np.ndarray | None  # [layout.size] of the graph's own layout; None: unguided.
  beta: np.ndarray | None
  seed: int
  evals: int | None = None  # None: the worker's budget
  best: bool = False  # Return (objective, best chromosome on the graph's own layout).
  params: brkga.Params | None = None  # In place of the preset's (a sweep trial's setting).
  # A prior over fresh keys (`guides.Guidance.prior_q` / `prior_mean` / `prior_spread`), each
  # [layout.size]; None: none.
  prior: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
  timed: bool = False  # Return (objective, wall seconds of the search).
  seeds: dict[str, np.ndarray] | None = None  # First-population seeds besides the heuristics'.


class RolloutWorker:
  """Holds the problems and their heuristic seeds; `run` runs rollout tasks."""

  def __init__(self, problems: Sequence[performance.Problem], evals: int,
               preset: str = brkga_presets.DEFAULT):
    self.problems = list(problems)
    self.evals = evals
    self.preset = preset
    self._seeds: dict[int, dict[str, np.ndarray]] = {}
    # Every graph padded to one shape: the worker compiles the search once (per budget).
    same = len({p.devices.num_devices for p in self.problems}) == 1
    decoders = {brkga_presets.search_settings(preset, model=p.model).decoder
                for p in self.problems}
    # Transfer genes stay where the graphs' decoders differ (one that derives them ignores them).
    decoder = decoders.pop() if len(decoders) == 1 else "direct"
    self.shape = (brkga_search.common_shape(self.problems, decoder) if same and all(
        brkga_search.bucketed(p) for p in self.problems) else None)

  def seeds(self, index: int) -> dict[str, np.ndarray]:
    """The heuristic seed chromosomes of graph `index` (deterministic, computed once)."""
    if index not in self._seeds:
      self._seeds[index] = heuristics.seeds(self.problems[index])
    return self._seeds[index]

  def run(self, tasks: Sequence[Task]) -> list:
    results = []
    for task in tasks:
      prior = task.prior or (None, None, None)
      guidance = guides.Guidance({**self.seeds(task.graph_index), **(task.seeds or {})},
                                 task.alpha, task.beta,
                                 prior_q=prior[0], prior_mean=prior[1], prior_spread=prior[2])
      started = time.perf_counter()
      problem, evals = self.problems[task.graph_index], task.evals or self.evals
      result = guides.run_guided(problem, evals, task.seed, guidance, guides.plan_search(
          problem, evals, self.preset, params=task.params), shape=self.shape)
      seconds = time.perf_counter() - started
      results.append((result.objective, result.best_chromosome) if task.best
                     else (result.objective, seconds) if task.timed else result.objective)
    return results
