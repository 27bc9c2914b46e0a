"""Random search and the IDRS hook: one generation of chromosomes drawn gene by gene.

Random search (REGAL's baseline) draws every gene uniformly; IDRS draws them from
per-gene Beta(alpha, beta) distributions a policy predicts (the learning issue supplies the
policy; here any distributions can be passed in). Both spend the whole budget in batches of
`batch_size` chromosomes on the batched JAX model and keep the best.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

import regal_brkga as brkga
from regal.baselines.common import MethodResult, finish
from regal.scoring import performance


def sample_search(problem: performance.Problem, evals: int = 5000, seed: int = 0,
                  alpha: np.ndarray | None = None, beta: np.ndarray | None = None,
                  batch_size: int = 200, method: str = "random") -> MethodResult:
  """The best of `evals` chromosomes drawn from Beta(alpha, beta) per gene (uniform if None)."""
  started = time.perf_counter()
  if evals < 1:
    raise ValueError(f"the budget must be at least one evaluation, got {evals}")
  searched = problem
  num_genes = problem.layout.size
  uniform = alpha is None and beta is None
  alpha = jnp.ones(num_genes) if alpha is None else jnp.broadcast_to(jnp.asarray(alpha),
                                                                     (num_genes,))
  beta = jnp.ones(num_genes) if beta is None else jnp.broadcast_to(jnp.asarray(beta),
                                                                   (num_genes,))
  fitness = performance.make_fitness_fn(searched)
  batch_size = min(batch_size, evals)

  @jax.jit
  def best_of_batch(key):
    if uniform:
      chromosomes = jax.random.uniform(key, (batch_size, num_genes))
    else:
      chromosomes = brkga.beta_sample(key, jnp.broadcast_to(alpha, (batch_size, num_genes)),
                                      jnp.broadcast_to(beta, (batch_size, num_genes)))
    values = fitness(chromosomes)
    return values, chromosomes

  key = jax.random.key(seed)
  best_value, best_chromosome, used = np.inf, None, 0
  while used < evals:
    key, batch_key = jax.random.split(key)
    values, chromosomes = best_of_batch(batch_key)
    take = min(batch_size, evals - used)  # The last batch counts only what the budget allows.
    values = np.asarray(values)[:take]
    winner = int(np.argmin(values))
    if values[winner] < best_value:
      best_value, best_chromosome = float(values[winner]), np.asarray(chromosomes[winner])
    used += take
  return finish(method, problem, None, None, started, evaluations=used,
                chromosome=best_chromosome, searched_objective=best_value)


def random_search(problem: performance.Problem, evals: int = 5000, seed: int = 0
                  ) -> MethodResult:
  return sample_search(problem, evals, seed)


def idrs(problem: performance.Problem, alpha: np.ndarray, beta: np.ndarray, evals: int = 5000,
         seed: int = 0) -> MethodResult:
  """REGAL's IDRS: one generation from a policy's per-gene Beta distributions."""
  return sample_search(problem, evals, seed, alpha=alpha, beta=beta, method="idrs")
