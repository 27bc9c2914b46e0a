"""The references REGAL's rewards compare with, computed on the rollout pool (Ray actors by
default) and cached in the workdir as they finish: per graph and reference seed the unguided
search's objective and best chromosome (`unguided-<config>.npz`), with measured rewards its
best solution's measured time (`unguided-measured-<config>.json`), and the test filter's
uniform runs at 1K and 10K evaluations (`filter1000-<config>.npz`, `filter10000-<config>.npz`;
REGAL section 5.1). A fine-tuning run reads its source workdir's caches too."""
from __future__ import annotations

import os
from typing import Any

import ml_collections
import numpy as np

from regal_datasets import errors
from regal.learning import workdir
from regal.learning.rollout import Task
from regal.learning.rollout_pool import RolloutPool
from regal.scoring import chromosome as chromosome_lib

EVAL_SEED = 10_000_019  # Rollout seeds of evaluations: the same for every evaluation.
FILTER_SHORT, FILTER_LONG = 1000, 10000  # The test filter's BRKGA budgets (REGAL 5.1).


def seed_of(slot: int) -> int:
  """The search seed of reference slot `slot` (0..reference_seeds - 1) of every graph."""
  return EVAL_SEED + slot


def room_for_improvement(short, long, threshold_pct: float) -> np.ndarray:
  """[G] whether the longer search beat the shorter one by at least `threshold_pct` % of the
  shorter one's objective (REGAL 5.1 keeps test graphs with BRKGA 10K >= 18% better than 1K)."""
  short, long = np.asarray(short, np.float64), np.asarray(long, np.float64)
  return 100.0 * (short - long) / short >= threshold_pct


class References:
  """A training run's references, cached in `folder` (see the module doc)."""

  def __init__(self, config: ml_collections.ConfigDict, folder: str, problems: list,
               pool: RolloutPool):
    self.config, self.workdir, self.problems, self.pool = config, folder, problems, pool
    self.measured_rewards: dict = {}  # Graph index -> MeasuredReward, built when first used.
    self.uniform_seconds: dict[int, float] = {}
    self.unguided_cache: dict[tuple[int, int], np.ndarray] = {}

  def _cached(self, name: str) -> str | None:
    """A cache file of this config: the workdir's own, else the fine-tuning source's."""
    for folder in (self.workdir, self.config.finetune_from):
      if folder and os.path.exists(os.path.join(folder, name)):
        return os.path.join(folder, name)
    return None

  def _per_graph(self, name: str, what: str, indices: list[int], compute,
                 unit: str = "searches") -> dict[int, Any]:
    """`per_graph_stage` in this workdir, reading a fine-tuning source's cache too."""
    return workdir.per_graph_stage(os.path.join(self.workdir, name), self._cached(name),
                                   what, indices, compute, unit)

  def _unguided_runs(self, name: str, what: str, pairs: list[tuple[int, int]],
                     evals: int) -> dict[tuple[int, int], np.ndarray]:
    """The unguided search on each (graph, seed slot) of `pairs`: [objective, best chromosome
    ...] (a per-graph stage in an .npz whose items are the pairs, numbered graph *
    reference_seeds + slot)."""
    slots = self.config.reference_seeds
    ids = [graph * slots + slot for graph, slot in pairs]

    def compute(missing, on_done):
      self.pool.map([Task(i // slots, None, None, seed_of(i % slots), evals, best=True)
                     for i in missing],
                    on_done=lambda chunk, values: on_done(
                        [missing[k] for k in chunk],
                        [np.concatenate([[value], chromosome]).astype(np.float64)
                         for value, chromosome in values]))

    values = self._per_graph(name, what, ids, compute)
    return {pair: values[i] for pair, i in zip(pairs, ids)}

  def _uniform_runs(self, name: str, what: str, indices: list[int],
                    evals: int) -> dict[int, float]:
    """The unguided search's objective with the first reference seed on each graph."""
    runs = self._unguided_runs(name, what, [(i, 0) for i in indices], evals)
    return {i: float(runs[(i, 0)][0]) for i in indices}

  def _unguided_pairs(self, pairs) -> None:
    wanted = [pair for pair in dict.fromkeys(pairs) if pair not in self.unguided_cache]
    if wanted:
      self.unguided_cache.update(self._unguided_runs(
          f"unguided-{workdir.cache_fingerprint(self.config)}.npz",
          f"unguided search reference ({self.config.evals} evaluations each)",
          wanted, self.config.evals))

  def unguided(self, indices, slots) -> np.ndarray:
    """The reward's reference: the unguided search on each graph with the same seed (slot)
    and budget, cached in the workdir as it is computed."""
    pairs = [(int(i), int(k)) for i, k in zip(indices, slots)]
    self._unguided_pairs(pairs)
    return np.array([float(self.unguided_cache[pair][0]) for pair in pairs])

  def unguided_best(self, index: int, slot: int) -> np.ndarray:
    """The unguided search's best chromosome on graph `index` with the seed of `slot`."""
    self._unguided_pairs([(index, slot)])
    return np.asarray(self.unguided_cache[(index, slot)][1:], np.float32)

  # ----- measured rewards ------------------------------------------------------------------
  @property
  def measured(self) -> bool:
    return self.config.reward == "measured"

  def measure(self, index: int, chromosome: np.ndarray) -> float:
    """Median wall time of a solution of graph `index` executed on the devices."""
    problem = self.problems[index]
    placement, order = chromosome_lib.assignment(chromosome, problem.layout)
    if index not in self.measured_rewards:
      from regal.execute import choose_program, executor
      from regal.execute.measured import MeasuredReward
      graph = self.problems[index].graph
      self.measured_rewards[index] = MeasuredReward(
          graph, choose_program.program_for(graph, standin_seconds=self.config.standin_seconds),
          executor.available_devices(self.config.num_devices),
          repeats=self.config.measure_repeats)
    return self.measured_rewards[index].measure(placement, order)

  def reference(self, indices, slots) -> np.ndarray:
    """The reward's reference per rollout: the unguided search's objective on the graph with
    the same seed, or with measured rewards its best solution's measured time (cached in the
    workdir)."""
    if not self.measured:
      return self.unguided(indices, slots)
    slots_per_graph = self.config.reference_seeds
    pairs = [int(i) * slots_per_graph + int(k) for i, k in zip(indices, slots)]
    wanted = [p for p in dict.fromkeys(pairs) if p not in self.uniform_seconds]
    if wanted:
      def compute(missing, on_done):
        self.pool.map([Task(p // slots_per_graph, None, None,
                            seed_of(p % slots_per_graph), self.config.evals, best=True)
                       for p in missing],
                      on_done=lambda chunk, values: on_done(
                          [missing[k] for k in chunk],
                          [self.measure(missing[k] // slots_per_graph, chromosome)
                           for k, (_, chromosome) in zip(chunk, values)]))

      self.uniform_seconds.update(self._per_graph(
          f"unguided-measured-{workdir.fingerprint(self.config)}.json",
          "measured unguided search reference", wanted, compute))
    return np.array([self.uniform_seconds[p] for p in pairs])

  def filtered_test(self, test: list[int]) -> list[int]:
    """The test graphs with room for improvement (REGAL section 5.1): uniform BRKGA with
    10K evaluations at least `test_filter_pct` % better than with 1K. All when the threshold
    is 0."""
    if not self.config.test_filter_pct:
      return test
    runs = {budget: self._uniform_runs(
        f"filter{budget}-{workdir.cache_fingerprint(self.config)}.npz",
        f"test filter: uniform BRKGA with {budget} evaluations", test, budget)
        for budget in (FILTER_SHORT, FILTER_LONG)}
    short, long = ([runs[budget][i] for i in test] for budget in (FILTER_SHORT, FILTER_LONG))
    kept = [i for i, keep in zip(test, room_for_improvement(short, long,
                                                             self.config.test_filter_pct))
            if keep]
    print(f"test filter: {len(kept)} of {len(test)} graphs have BRKGA 10K at least "
          f"{self.config.test_filter_pct:.0f}% better than 1K", flush=True)
    if not kept:
      raise errors.ConfigError(f"no test graph passes the {self.config.test_filter_pct}% "
                               f"filter; lower test_filter_pct or add test graphs")
    return kept
