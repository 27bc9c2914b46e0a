"""BRKGA over a graph: a performance model's objective as the fitness of random-key chromosomes.

`optimize` runs the domain-free engine (`brkga`) on the chromosomes of REGAL's decoder
(`regal.chromosome`), scored by `regal.performance`. Seed chromosomes (`regal.seed_arms`:
single device and critical path by default) enter the first population, so the result is never
worse than the best seed, and the result names the seed the winner descends from.

Default hyperparameters follow Goncalves & Resende (2011) as REGAL used them
(`brkga.goncalves_resende`): population proportional to the chromosome length (20..200), 20%
elites, 15% mutants, elite inheritance probability 0.7, one population.

With a native scoring engine (the CPU default), the search runs on the problem's layout padded
to size buckets (`performance.bucket_layout`) and scores through a registered host scorer, so
one compiled search serves every graph of a bucket: a process optimizing many graphs
(`regal.optimize --graph a,b,c`, the task-graph table) compiles once per bucket, not per graph.
Padded genes decode to ops and tensors the scorer drops.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

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


def bucketed(problem: performance.Problem) -> bool:
  """Whether `optimize` searches the bucket layout with the registered host scorer."""
  return (performance.scoring_engine(problem) == "native" and problem.pinned is None
          and problem.noise_sigma == 0)


def search_layout(problem: performance.Problem) -> chromosome_lib.Layout:
  """The chromosome layout BRKGA evolves for `problem` (what default parameters depend on)."""
  return performance.bucket_layout(problem) if bucketed(problem) else problem.layout


def default_params(problem: performance.Problem) -> brkga.Params:
  return brkga.goncalves_resende(search_layout(problem).size)


_COMPILED: dict[Any, Any] = {}  # One compiled bucketed search per (bucket, settings).


def _bucketed_search(bucket: chromosome_lib.Layout, params: brkga.Params, evals: int,
                     num_seeds: int):
  """(compiled search(key, seeds, handle) -> brkga.Result, compile seconds; 0 when cached)."""
  leaves, treedef = jax.tree_util.tree_flatten(params)
  key = (bucket, str(treedef), tuple(np.asarray(leaf).tobytes() for leaf in leaves), evals,
         num_seeds)
  if key in _COMPILED:
    return _COMPILED[key], 0.0
  fitness = performance.bucket_fitness_fn(bucket)

  def search(rng, seeds, handle):
    return brkga.run(lambda c: fitness(c, handle), rng, params, evals, bucket.size, seeds=seeds)

  start = time.perf_counter()
  compiled = jax.jit(search).lower(
      jax.random.key(0), jax.ShapeDtypeStruct((num_seeds, bucket.size), jnp.float32),
      jax.ShapeDtypeStruct((), jnp.int32)).compile()
  _COMPILED[key] = compiled
  return compiled, time.perf_counter() - start


def optimize(problem: performance.Problem, evals: int = 5000, seed: int = 0,
             params: brkga.Params | None = None,
             seeds: dict[str, np.ndarray] | None = None) -> SearchResult:
  """BRKGA with `evals` fitness evaluations; `seeds` name chromosomes for the first population."""
  params = params or default_params(problem)
  seeds = {"single_device": single_device_seed(problem), **(seeds or {})}
  if bucketed(problem) and all(np.ndim(np.asarray(getattr(params, name))) == 0
                               for name in ("mutant_alpha", "mutant_beta")):
    return _optimize_bucketed(problem, evals, seed, params, seeds)
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
  return _result(problem, result, np.asarray(result.best_chromosome), seeds, seed_values,
                 compile_seconds, search_seconds)


def _optimize_bucketed(problem: performance.Problem, evals: int, seed: int,
                       params: brkga.Params, seeds: dict[str, np.ndarray]) -> SearchResult:
  own, bucket = problem.layout, performance.bucket_layout(problem)
  seed_matrix = np.stack([chromosome_lib.to_bucket(own, bucket, np.asarray(c, np.float32),
                                                   fill=0.0) for c in seeds.values()])
  compiled, compile_seconds = _bucketed_search(bucket, params, evals, len(seeds))
  with performance.registered_scorer(problem) as handle:
    decoded = chromosome_lib.decode(np.stack(list(seeds.values())).astype(np.float32), own)
    seed_values = performance.score_registered(handle, *decoded)
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(jax.random.key(seed), jnp.asarray(seed_matrix),
                                            jnp.asarray(handle, jnp.int32)))
    search_seconds = time.perf_counter() - start
  best = chromosome_lib.from_bucket(own, bucket, np.asarray(result.best_chromosome))
  return _result(problem, result, best, seeds, seed_values, compile_seconds, search_seconds)


def _result(problem: performance.Problem, result, best: np.ndarray, seeds: dict[str, np.ndarray],
            seed_values: np.ndarray, compile_seconds: float,
            search_seconds: float) -> SearchResult:
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
