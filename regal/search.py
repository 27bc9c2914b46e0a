"""BRKGA over a graph: a performance model's objective as the fitness of random-key chromosomes.

`optimize` runs the domain-free engine (`brkga`) on the chromosomes of REGAL's decoder
(`regal.chromosome`), scored by `regal.performance`. Seed chromosomes (`regal.seed_arms`:
single device and critical path by default) enter the first population, so the result is never
worse than the best seed, and the result names the seed the winner descends from.

Default hyperparameters follow Goncalves & Resende (2011) as REGAL used them
(`brkga.goncalves_resende`): population proportional to the chromosome length (20..200), 20%
elites, 15% mutants, elite inheritance probability 0.7, one population.
"""
from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

import brkga
from regal import chromosome as chromosome_lib
from regal import performance


@dataclasses.dataclass(frozen=True)
class SearchResult:
  best_chromosome: np.ndarray
  objective: float
  placement: np.ndarray  # [o]
  order: np.ndarray  # [o] ops by priority
  history: np.ndarray  # best objective after each generation
  evaluations: int
  compile_seconds: float
  search_seconds: float
  seed_objectives: dict[str, float]
  origin: str | None = None  # The seed the best descends from through elite parents.


def single_device_seed(problem: performance.Problem, device: int = 0) -> np.ndarray:
  """Every op on one device, in topological order."""
  graph = problem.graph
  return chromosome_lib.encode(np.full(graph.num_ops, device), graph.topological_order,
                               problem.layout)


def default_params(problem: performance.Problem) -> brkga.Params:
  return brkga.goncalves_resende(problem.layout.size)


def optimize(problem: performance.Problem, evals: int = 5000, seed: int = 0,
             params: brkga.Params | None = None,
             seeds: dict[str, np.ndarray] | None = None) -> SearchResult:
  """BRKGA with `evals` fitness evaluations; `seeds` name chromosomes for the first population."""
  params = params or default_params(problem)
  seeds = {"single_device": single_device_seed(problem), **(seeds or {})}
  seed_matrix = jnp.asarray(np.stack(list(seeds.values())), jnp.float32)
  fitness = performance.make_fitness_fn(problem)
  seed_values = np.asarray(fitness(seed_matrix))
  num_genes = problem.layout.size

  def search(key):
    return brkga.run(fitness, key, params, evals, num_genes, seeds=seed_matrix)

  start = time.perf_counter()
  compiled = jax.jit(search).lower(jax.random.key(seed)).compile()
  compile_seconds = time.perf_counter() - start
  start = time.perf_counter()
  result = jax.block_until_ready(compiled(jax.random.key(seed)))
  search_seconds = time.perf_counter() - start
  best = np.asarray(result.best_chromosome)
  decoded = chromosome_lib.decode(best, problem.layout, problem.pinned)
  history = np.asarray(result.history)
  return SearchResult(
      best_chromosome=best, objective=float(result.best_fitness),
      placement=np.asarray(decoded.placement),
      order=chromosome_lib.priority_order(np.asarray(decoded.op_priority)),
      history=history[:int(result.generations) + 1], evaluations=int(result.evaluations),
      compile_seconds=compile_seconds, search_seconds=search_seconds,
      seed_objectives={name: float(v) for name, v in zip(seeds, seed_values)},
      origin=list(seeds)[int(result.best_origin)] if int(result.best_origin) >= 0 else None)
