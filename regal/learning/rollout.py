"""BRKGA rollouts for training: one compiled search per size bucket, not per graph.

Training runs BRKGA on many graphs. `make_fitness_fn` bakes a graph into its compiled code;
here the padded `SimGraph` is an argument instead, every graph of a worker is padded to one
shape, and chromosomes use that padded layout (padded genes decode to masked ops and tensors
that the models ignore), so one compiled search serves every graph (per budget and objective).

`RolloutWorker.run(tasks)` is what a Ray actor (or the driver, in-process) executes: for each
(graph index, per-gene Beta alpha and beta on the graph's own layout, seed, budget) it returns
the best objective of BRKGA with those mutant distributions, and with `Task.best` also the best
chromosome (what measured rewards decode and execute).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

import brkga
from regal.learning import features as features_lib
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance, sync_model, wc_model
from regal.scoring.sim_graph import SimGraph, build_sim_graph


def _scalar(params: brkga.Params | None, name: str) -> float:
  return 1.0 if params is None else float(np.asarray(getattr(params, name)))


@dataclasses.dataclass(frozen=True)
class Task:
  graph_index: int
  alpha: np.ndarray | None  # [layout.size] of the graph's own layout; None: params' own
  # (uniform without params)
  beta: np.ndarray | None
  seed: int
  evals: int | None = None  # None: the worker's budget
  best: bool = False  # Return (objective, best chromosome on the graph's own layout).
  params: brkga.Params | None = None  # BRKGA settings (mutant Betas come from alpha / beta).


def bucket_layout(problem: performance.Problem, sim: SimGraph) -> chromosome_lib.Layout:
  return chromosome_lib.Layout(sim.op_mask.shape[0], sim.tensor_size.shape[0],
                               problem.devices.num_devices)


def _simulate(problem: performance.Problem, sim: SimGraph, chromosomes: jnp.ndarray,
              layout: chromosome_lib.Layout):
  decoded = jax.vmap(lambda c: chromosome_lib.decode(c, layout))(chromosomes)
  simulate = sync_model.simulate_batch if problem.model == "sync" else wc_model.simulate_batch
  result = simulate(sim, decoded.placement, decoded.op_priority, decoded.transfer_priority,
                    chunk=performance.WC_CHUNK)
  return performance.objective_value(problem, result.makespan, result.peak_memory)


def common_shape_sims(problems: Sequence[performance.Problem]) -> list[SimGraph]:
  """Every problem's SimGraph padded to one shape (the largest bucket of each dimension), so
  one compiled search serves them all. The real op and tensor counts, static fields the
  models never read, are dropped for the same reason."""
  own = [performance.sim_graph_for(p) for p in problems]
  shape = tuple(max(dims) for dims in zip(*[
      (s.op_mask.shape[0], s.tensor_size.shape[0], s.work.shape[0], s.data_edge_mask.shape[0],
       s.control_edge_mask.shape[0]) for s in own]))
  max_outputs = max(s.op_outputs.shape[1] for s in own)
  return [build_sim_graph(p.graph, p.devices, dtype=p.dtype, shape=shape,
                          memory=performance.needs_memory(p), max_outputs=max_outputs
                          ).replace(num_ops=0, num_tensors=0) for p in problems]


class RolloutWorker:
  """Holds the problems and their compiled searches; `run` scores rollout tasks."""

  def __init__(self, problems: Sequence[performance.Problem], evals: int):
    self.problems = list(problems)
    self.evals = evals
    self.sims = [jax.tree_util.tree_map(jnp.asarray, sim) for sim in common_shape_sims(problems)]
    self.layouts = [bucket_layout(p, s) for p, s in zip(self.problems, self.sims)]
    self._searches = {}

  def _search(self, index: int, evals: int, settings: brkga.Params | None = None):
    problem, layout = self.problems[index], self.layouts[index]
    shapes = jax.tree_util.tree_map(lambda x: x.shape, self.sims[index])
    # What the objective reads from the problem must match too.
    bound = (problem.duration_bound() if problem.objective == "runtime_under_memory"
             else None)
    key = (layout, str(shapes), problem.model, problem.objective,
           tuple(problem.memory_limits.tolist()), bound, evals, repr(settings))
    if key not in self._searches:
      # Goncalves & Resende's population, smaller when the budget would not allow a few
      # generations (as with the small budgets left after REGAL's feature run in tests).
      params = settings or brkga.goncalves_resende(min(layout.size, max(evals // 5, 20)))

      @jax.jit
      def search(sim, key, alpha, beta):
        run_params = params.replace(mutant_alpha=alpha, mutant_beta=beta)
        fitness = lambda c: _simulate(problem, sim, c, layout)
        result = brkga.run(fitness, key, run_params, evals, layout.size)
        return result.best_fitness, result.best_chromosome

      self._searches[key] = search
    return self._searches[key]

  def feature_population(self, index: int, evals: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(placement [P, o], priority [P, o]) of the final population of a uniform BRKGA run of
    `evals` evaluations on graph `index` (REGAL's BRKGA features), on the graph's own ops."""
    problem, layout = self.problems[index], self.layouts[index]
    params = features_lib.feature_params(problem, evals)
    shapes = str(jax.tree_util.tree_map(lambda x: x.shape, self.sims[index]))
    key = ("features", layout, params.population_size, evals, shapes, problem.model,
           problem.objective)
    if key not in self._searches:

      @jax.jit
      def search(sim, key):
        fitness = lambda c: _simulate(problem, sim, c, layout)
        return features_lib.feature_run(fitness, key, params, evals, layout)

      self._searches[key] = search
    placement, priority = self._searches[key](self.sims[index], jax.random.key(seed))
    num_ops = problem.graph.num_ops
    return np.asarray(placement)[:, :num_ops], np.asarray(priority)[:, :num_ops]

  def feature_populations(self, pairs: Sequence[tuple[int, int]], evals: int) -> list:
    """`feature_population` of each (graph index, seed)."""
    return [self.feature_population(index, evals, seed) for index, seed in pairs]

  def run(self, tasks: Sequence[Task]) -> list:
    results = []
    for task in tasks:
      problem, layout = self.problems[task.graph_index], self.layouts[task.graph_index]
      own = problem.layout
      alpha = (np.full(own.size, _scalar(task.params, "mutant_alpha")) if task.alpha is None
               else task.alpha)
      beta = (np.full(own.size, _scalar(task.params, "mutant_beta")) if task.beta is None
              else task.beta)
      search = self._search(task.graph_index, task.evals or self.evals, task.params)
      value, best = search(self.sims[task.graph_index], jax.random.key(task.seed),
                           jnp.asarray(chromosome_lib.to_bucket(own, layout, alpha), jnp.float32),
                           jnp.asarray(chromosome_lib.to_bucket(own, layout, beta), jnp.float32))
      if task.best:
        results.append((float(value), chromosome_lib.from_bucket(own, layout, best)))
      else:
        results.append(float(value))
    return results
