"""`engine.run`, driven from the host: the same search, draw for draw, for a fitness that runs
on the host (a compiled simulator) rather than in JAX.

Each step (the start, `ask`, `tell`, the improve hook's key and merge) is a jitted program of
its own, and the fitness is called between them as a plain function. No program holds a host
callback, so each step's executable can be kept across processes (`programs.Program`; JAX's
cache never stores a program with a callback): a second run of the same shapes loads them
instead of tracing and compiling. `engine.run` stays the path for a fitness written in JAX (on an accelerator the
whole search is one program).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from regal_brkga import engine, programs

# fitness(chromosomes [N, n] numpy) -> fitness [N] (smaller is better).
HostFitness = Callable[[np.ndarray], np.ndarray]
# improve(key, population [Pi, P, n], fitness [Pi, P], allowance int) ->
#   (population, fitness, evaluations spent <= allowance): the host form of `ImproveFn`.
HostImprove = Callable[[jax.Array, jnp.ndarray, jnp.ndarray, int],
                       tuple[jnp.ndarray, jnp.ndarray, int]]


def _first(key: jax.Array, params: engine.Params, num_genes: int, seeds):
  init_key, search_key = jax.random.split(key)
  return search_key, engine.initial_population(init_key, params, num_genes, seeds)


def _first_state(key: jax.Array, params: engine.Params, population, fitness,
                 seeds) -> engine.State:
  num_seeds = 0 if seeds is None else seeds.shape[0]
  return engine.init(key, params, population, fitness, engine.seed_origin(params, num_seeds),
                     None if seeds is None else population[0, :num_seeds])


# Each step's executable is kept across processes (`programs`): a later run loads it.
_start = programs.Program(_first, static_argnums=(2,))
_init = programs.Program(_first_state)
_ask = programs.Program(engine.ask)
_tell = programs.Program(engine.tell)
_improve_key = programs.Program(engine.improve_key)
_after_improve = programs.Program(engine.after_improve)


def _scored(fitness_fn: HostFitness, chromosomes: jnp.ndarray) -> jnp.ndarray:
  """Fitness [...] of chromosomes [..., n], scored on the host as float32 (put on the device
  as it is: `jnp.asarray` would compile a copy per shape)."""
  flat = np.asarray(chromosomes).reshape(-1, chromosomes.shape[-1])
  return jax.device_put(np.asarray(fitness_fn(flat), np.float32).reshape(
      chromosomes.shape[:-1]))


def run_on_host(fitness_fn: HostFitness, key: jax.Array, params: engine.Params, budget: int,
                num_genes: int, seeds: jnp.ndarray | None = None,
                improve: HostImprove | None = None, improve_interval: int = 1,
                stop: Callable[[engine.State], bool] | None = None) -> engine.Result:
  """`engine.run` with a host `fitness_fn` (numpy [N, n] -> [N]), a host `improve` hook and a
  host `stop(state)`; the same key gives the same result as `engine.run` with the same
  fitness in JAX."""
  params.validate()
  generations = engine.max_generations(params, budget)
  if improve_interval < 1:
    raise ValueError(f"improve_interval must be at least 1, got {improve_interval}")
  if seeds is not None:
    seeds = jax.device_put(seeds)
  search_key, population = _start(key, params, num_genes, seeds)
  state = _init(search_key, params, population, _scored(fitness_fn, population), seeds)
  history = np.full(generations + 1, np.inf, np.float32)
  history[0] = state.best_fitness
  while True:
    generation, evaluations = (int(v) for v in jax.device_get((state.generation,
                                                                 state.evaluations)))
    if not engine.goes_on(generation, evaluations, params, budget, generations) or (
        stop is not None and stop(state)):
      break
    offspring, state = _ask(state, params)
    state = _tell(state, params, offspring, _scored(fitness_fn, offspring))
    if improve is not None:
      generation, evaluations = (int(v) for v in jax.device_get((state.generation,
                                                                   state.evaluations)))
      # Not due, the hook would get no budget and change nothing (`engine.run` calls it
      # anyway, for one call site under `jit`).
      if engine.improve_due(generation, evaluations, params, budget, improve_interval):
        population, fitness, spent = improve(_improve_key(state), state.population,
                                             state.fitness, budget - evaluations)
        state = _after_improve(state, population, fitness, np.int32(spent))
    history[int(state.generation)] = state.best_fitness
  return engine.Result(best_chromosome=state.best_chromosome, best_fitness=state.best_fitness,
                       history=jax.device_put(history), generations=state.generation,
                       evaluations=state.evaluations, final_population=state.population,
                       final_fitness=state.fitness, best_origin=state.best_origin)
