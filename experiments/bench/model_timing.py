"""Timing the performance models: the batched fitness (whichever engine the problem picks:
JAX or native) against the pure-Python reference (shared by `regal_experiments.bench.perf_model` and
`regal_experiments.scaling`)."""
from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

from regal.scoring import performance


def time_batched(problem: performance.Problem, population: int, repeats: int) -> tuple[float, float]:
  fitness = performance.make_fitness_fn(problem)
  genes = jnp.asarray(np.random.default_rng(population).random(
      (population, problem.layout.size)).astype(np.float32))
  start = time.perf_counter()
  fitness(genes).block_until_ready()
  compile_seconds = time.perf_counter() - start
  best = np.inf
  for _ in range(repeats):
    start = time.perf_counter()
    fitness(genes).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return population / best, compile_seconds


def time_reference(problem: performance.Problem, budget: float) -> float:
  rng = np.random.default_rng(1)
  done, start = 0, time.perf_counter()
  while time.perf_counter() - start < budget or done < 2:
    performance.score_reference(problem, rng.random(problem.layout.size).astype(np.float32))
    done += 1
  return done / (time.perf_counter() - start)
