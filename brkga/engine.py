"""A vectorized biased random-key genetic algorithm (BRKGA) in JAX, domain-free.

Goncalves & Resende (2011): a population of random-key chromosomes in [0, 1]^n. Each
generation keeps the elites (the best `num_elites`, with their fitness: they are not scored
again), adds children and mutants, and scores only the new ones:
* a child crosses one elite parent with one non-elite parent, gene by gene, taking the elite
  gene with probability rho (a scalar or one value per gene);
* a mutant draws gene i from Beta(alpha_i, beta_i) (uniform by default), and so does every
  member of the initial populations (REGAL's policy shapes both); with a prior
  (`Params.prior_q`), gene i is instead, with probability q_i, drawn around a prior key
  (`with_prior`), the other genes kept as drawn (common random numbers with the unguided run);
mutants join the non-elite pool and can be parents in the next generation. Several independent
populations evolve side by side and, every `exchange_interval` generations, each receives the
best `exchange_count` chromosomes of every other population in place of its worst. After
`restart_patience` generations without a better best, the populations restart: that
generation's offspring are all fresh uniform keys, and the former elites are gone (their slots
hold fresh unscored keys ranked last, so they are never elites and are replaced by the next
offspring; nothing unscored is counted as evaluated). `restart_from` says what the new start
keeps: `BEST`, the best chromosome so far (the classic restart); or `SEEDS`, the search's seeds
(`run`'s), which join the fresh offspring and are scored again: an independent run from the
search's own start, while the best so far is kept aside (`State.best_*`). Stagnation counts
from the best of the current run (since the last restart), so a run that is still improving is
not cut short by a better best it does not hold.

A search may be memetic: `run`'s `improve` hook (population in, improved population and the
evaluations it spent out) polishes chromosomes after every `improve_interval`-th generation
and after the last one (which leaves it the remainder no generation fits in); it gets the
budget left (0 between due generations) and must not exceed it. The engine counts its evaluations like any other, re-sorts
the populations, and keeps the hook's better chromosomes as elites.

Fitness is minimized. The interface follows evosax: `init` / `ask` / `tell` over immutable
state and parameter dataclasses, and `run`, which runs a whole search under `jit` with a
`lax.while_loop`. Evaluations are counted as the paper counts them: every chromosome scored
(the initial populations, then the children and mutants of each generation); a search never
exceeds its budget, stopping before a generation that would.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct


BEST, SEEDS = "best", "seeds"  # What a restart keeps (`Params.restart_from`).
RESTART_FROM = (BEST, SEEDS)


@struct.dataclass
class Params:
  """Search settings. Sizes are static (they fix array shapes); the rest may be traced."""
  rho: jnp.ndarray | float = 0.7  # Elite-gene inheritance probability (scalar or [n]).
  mutant_alpha: jnp.ndarray | float = 1.0  # Beta(alpha, beta) per gene for mutants.
  mutant_beta: jnp.ndarray | float = 1.0
  population_size: int = struct.field(pytree_node=False, default=100)
  num_elites: int = struct.field(pytree_node=False, default=20)
  num_mutants: int = struct.field(pytree_node=False, default=15)
  num_populations: int = struct.field(pytree_node=False, default=1)
  exchange_interval: int = struct.field(pytree_node=False, default=0)  # 0: never exchange.
  exchange_count: int = struct.field(pytree_node=False, default=2)
  restart_patience: int = struct.field(pytree_node=False, default=0)  # 0: never restart.
  restart_from: str = struct.field(pytree_node=False, default="best")  # BEST or SEEDS.
  # A prior over fresh keys (`with_prior`): gene i of a fresh key comes, with probability
  # prior_q[i], from a logit-normal around prior_mean[i] (spread prior_spread[i] in logit
  # space) instead of the draw above; 0 (the default) draws exactly what the search draws
  # without a prior.
  prior_q: jnp.ndarray | float = 0.0
  prior_mean: jnp.ndarray | float = 0.5
  prior_spread: jnp.ndarray | float = 1.0

  @property
  def num_children(self) -> int:
    return self.population_size - self.num_elites - self.num_mutants

  @property
  def offspring_per_generation(self) -> int:
    """Chromosomes scored per generation, all populations together."""
    return self.num_populations * (self.population_size - self.num_elites)

  def validate(self) -> "Params":
    if self.restart_from not in RESTART_FROM:
      raise ValueError(f"restart_from must be one of {RESTART_FROM}, got {self.restart_from!r}")
    if not 0 < self.num_elites < self.population_size:
      raise ValueError(f"num_elites must be in 1..population_size - 1, got {self.num_elites}")
    if self.num_mutants < 0 or self.num_children < 0:
      raise ValueError("num_elites + num_mutants must not exceed population_size")
    if self.num_populations < 1:
      raise ValueError("num_populations must be at least 1")
    if self.exchange_interval and (self.num_populations - 1) * self.exchange_count >= (
        self.population_size - self.num_elites):
      raise ValueError("exchange_count too large: incoming chromosomes would replace elites")
    return self


BUDGET_GENERATIONS = 100
ELITE_FRACTION, MUTANT_FRACTION = 0.2, 0.15  # Of the population, in `goncalves_resende`.


def goncalves_resende(num_genes: int, population_factor: int = 1,
                      evals: int | None = None) -> Params:
  """Hyperparameters in the ranges Goncalves & Resende (2011) recommend, as REGAL used them:
  population a * n (capped to keep a generation affordable), 20% elites, 15% mutants,
  rho = 0.7. Given the search's budget of `evals`, the population is also at most
  evals / `BUDGET_GENERATIONS` (never under 20), so that a small budget still buys enough
  generations to converge rather than a few generations of a large population."""
  population = min(max(population_factor * num_genes, 20), 200)
  if evals is not None:
    population = min(population, max(evals // BUDGET_GENERATIONS, 20))
  population = int(population)
  return Params(population_size=population, num_elites=max(1, int(ELITE_FRACTION * population)),
                num_mutants=int(MUTANT_FRACTION * population), rho=0.7).validate()


@struct.dataclass
class State:
  population: jnp.ndarray  # [Pi, P, n] sorted best first within each population
  fitness: jnp.ndarray  # [Pi, P]
  best_chromosome: jnp.ndarray  # [n]
  best_fitness: jnp.ndarray  # []
  generation: jnp.ndarray  # [] int32
  evaluations: jnp.ndarray  # [] int32
  stagnation: jnp.ndarray  # [] int32 generations since the best last improved
  key: jax.Array
  # Lineage: the seed (index into `seeds`) each chromosome descends from through its elite
  # parents (a child inherits its elite parent's), -1 for none; mutants and fresh keys are -1.
  origin: jnp.ndarray  # [Pi, P] int32
  best_origin: jnp.ndarray  # [] int32
  offspring_origin: jnp.ndarray  # [Pi, P - E] int32, set by `ask` for `tell`
  run_best: jnp.ndarray  # [] the best fitness since the last restart (stagnation counts from it)
  # [S, n] what a SEEDS restart starts from again (`run`'s seeds; [0, n]: none).
  restart_seeds: jnp.ndarray


def _sort(population: jnp.ndarray, fitness: jnp.ndarray, origin: jnp.ndarray
          ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  order = jnp.argsort(fitness, axis=-1, stable=True)
  return (jnp.take_along_axis(population, order[..., None], axis=-2),
          jnp.take_along_axis(fitness, order, axis=-1),
          jnp.take_along_axis(origin, order, axis=-1))


def seed_origin(params: Params, num_seeds: int = 0) -> jnp.ndarray:
  """[Pi, P] lineage of an initial population whose first `num_seeds` members of population 0
  are seeds 0..num_seeds-1 (the rest: -1)."""
  origin = jnp.full((params.num_populations, params.population_size), -1, jnp.int32)
  return origin.at[0, :num_seeds].set(jnp.arange(num_seeds, dtype=jnp.int32))


def with_prior(key: jax.Array, keys: jnp.ndarray, params: Params) -> jnp.ndarray:
  """Fresh keys [..., n] with gene i, with probability `prior_q[i]`, drawn from the prior
  instead (`Params.prior_q`), from a key of its own: the genes the prior leaves are the
  search's own draws, so a guided search and an unguided one with the same key share them
  (common random numbers), and `prior_q = 0` changes nothing."""
  q = jnp.broadcast_to(jnp.asarray(params.prior_q, jnp.float32), keys.shape)

  def mixed():
    take_key, draw_key = jax.random.split(jax.random.fold_in(key, 0x9A1))
    take = jax.random.uniform(take_key, keys.shape) < q
    mean = jnp.clip(jnp.broadcast_to(jnp.asarray(params.prior_mean, jnp.float32), keys.shape),
                    1e-6, 1 - 1e-6)
    spread = jnp.broadcast_to(jnp.asarray(params.prior_spread, jnp.float32), keys.shape)
    drawn = jax.nn.sigmoid(jnp.log(mean) - jnp.log1p(-mean)
                           + spread * jax.random.normal(draw_key, keys.shape))
    return jnp.where(take, drawn.astype(keys.dtype), keys)

  return jax.lax.cond(jnp.any(q > 0), mixed, lambda: keys)


def initial_population(key: jax.Array, params: Params, num_genes: int,
                       seeds: jnp.ndarray | None = None) -> jnp.ndarray:
  """Random keys [Pi, P, n] drawn like mutants (uniform by default: the same keys as
  `jax.random.uniform`; `with_prior`); `seeds` [S, n] replace the first members of
  population 0."""
  population = with_prior(key, mutants(
      key, (params.num_populations, params.population_size, num_genes), params.mutant_alpha,
      params.mutant_beta), params)
  if seeds is not None:
    seeds = jnp.clip(jnp.asarray(seeds, population.dtype), 0.0, 1.0)
    if seeds.shape[0] > params.population_size:
      raise ValueError(f"{seeds.shape[0]} seeds do not fit a population of "
                       f"{params.population_size}")
    population = population.at[0, :seeds.shape[0]].set(seeds)
  return population


def init(key: jax.Array, params: Params, population: jnp.ndarray,
         fitness: jnp.ndarray, origin: jnp.ndarray | None = None,
         restart_seeds: jnp.ndarray | None = None) -> State:
  """State from scored initial populations [Pi, P, n], their fitness [Pi, P] and lineage
  [Pi, P] (`seed_origin`; default: no seeds); `restart_seeds` [S, n]: what a SEEDS restart
  starts from (the first S members of population 0 then; lineage 0..S-1)."""
  if origin is None:
    origin = seed_origin(params)
  if restart_seeds is None:
    restart_seeds = jnp.zeros((0, population.shape[-1]), population.dtype)
  population, fitness, origin = _sort(population, fitness, origin)
  best = jnp.argmin(fitness[:, 0])
  pops = population.shape[0]
  return State(population=population, fitness=fitness, best_chromosome=population[best, 0],
               best_fitness=fitness[best, 0], generation=jnp.zeros((), jnp.int32),
               evaluations=jnp.asarray(population.shape[0] * population.shape[1], jnp.int32),
               stagnation=jnp.zeros((), jnp.int32), key=key, origin=origin,
               best_origin=origin[best, 0],
               offspring_origin=jnp.full((pops, params.population_size - params.num_elites),
                                         -1, jnp.int32),
               run_best=fitness[best, 0],
               restart_seeds=jnp.asarray(restart_seeds, population.dtype))


def crossover(key: jax.Array, elite: jnp.ndarray, other: jnp.ndarray,
              rho: jnp.ndarray | float) -> jnp.ndarray:
  """Gene by gene: the elite parent's gene with probability rho, else the other's."""
  return jnp.where(jax.random.uniform(key, elite.shape) < rho, elite, other)


def mutants(key: jax.Array, shape: tuple[int, ...], alpha, beta) -> jnp.ndarray:
  """Mutant chromosomes with gene i drawn from Beta(alpha_i, beta_i).

  Uniform keys when every alpha and beta is 1 (the default), else `beta_sample`.
  """
  alpha = jnp.broadcast_to(jnp.asarray(alpha, jnp.float32), shape)
  beta = jnp.broadcast_to(jnp.asarray(beta, jnp.float32), shape)
  return jax.lax.cond(jnp.all((alpha == 1) & (beta == 1)),
                      lambda: jax.random.uniform(key, shape),
                      lambda: beta_sample(key, alpha, beta))


def log_gamma_sample(key: jax.Array, shape_param: jnp.ndarray) -> jnp.ndarray:
  """log of Gamma(shape_param, 1) draws, one per element (any shape_param > 0).

  Marsaglia & Tsang (2000) on the whole array at once: each round proposes a value for every
  element still rejected, and rounds repeat while any is (each accepts at least ~95%, so a few
  rounds suffice). `jax.random.gamma` splits a key and loops per element, ~150x slower on a
  CPU. Shapes below 1 use Gamma(a) = Gamma(a + 1) * U^(1/a), kept in logs so tiny shapes do
  not underflow to 0.
  """
  boosted = jnp.where(shape_param < 1, shape_param + 1, shape_param)
  d = boosted - 1.0 / 3.0
  c = 1.0 / jnp.sqrt(9.0 * d)

  def round_(carry):
    key, accepted, value = carry
    key, normal_key, uniform_key = jax.random.split(key, 3)
    x = jax.random.normal(normal_key, shape_param.shape)
    v = (1 + c * x) ** 3
    log_u = jnp.log(jax.random.uniform(uniform_key, shape_param.shape, minval=1e-38))
    safe_v = jnp.where(v > 0, v, 1.0)
    ok = (v > 0) & (log_u < 0.5 * x * x + d - d * safe_v + d * jnp.log(safe_v))
    take = ok & ~accepted
    return key, accepted | ok, jnp.where(take, jnp.log(d) + jnp.log(safe_v), value)

  key, boost_key = jax.random.split(key)
  start = (key, jnp.zeros(shape_param.shape, bool), jnp.zeros(shape_param.shape))
  _, _, log_value = jax.lax.while_loop(lambda c: ~jnp.all(c[1]), round_, start)
  log_boost = jnp.log(jax.random.uniform(boost_key, shape_param.shape, minval=1e-38))
  return log_value + jnp.where(shape_param < 1, log_boost / shape_param, 0.0)


def beta_sample(key: jax.Array, alpha: jnp.ndarray, beta: jnp.ndarray) -> jnp.ndarray:
  """Beta(alpha, beta) draws of alpha's shape: X / (X + Y) with X ~ Gamma(alpha), Y ~
  Gamma(beta), as a sigmoid of log X - log Y (stable for tiny parameters)."""
  x_key, y_key = jax.random.split(key)
  return jax.nn.sigmoid(log_gamma_sample(x_key, alpha) - log_gamma_sample(y_key, beta))


def _restarting(state: State, params: Params) -> jnp.ndarray:
  return jnp.asarray(params.restart_patience > 0) & (state.stagnation >= params.restart_patience)


def ask(state: State, params: Params) -> tuple[jnp.ndarray, State]:
  """Children and mutants to score: [Pi, P - E, n] (children first; all fresh on a restart)."""
  pops, size, genes = state.population.shape
  elites, children = params.num_elites, params.num_children
  key, elite_key, other_key, cross_key, mutant_key = jax.random.split(state.key, 5)
  elite_parent = jax.random.randint(elite_key, (pops, children), 0, elites)
  other_parent = jax.random.randint(other_key, (pops, children), elites, size)
  take = lambda index: jnp.take_along_axis(state.population, index[..., None], axis=1)  # noqa: E731
  kids = crossover(cross_key, take(elite_parent), take(other_parent), params.rho)
  fresh = with_prior(mutant_key, mutants(mutant_key, (pops, params.num_mutants, genes),
                                         params.mutant_alpha, params.mutant_beta),
                     params).astype(state.population.dtype)
  offspring = jnp.concatenate([kids, fresh], axis=1)
  origin = jnp.concatenate([jnp.take_along_axis(state.origin, elite_parent, axis=1),
                            jnp.full((pops, params.num_mutants), -1, jnp.int32)], axis=1)
  if params.restart_patience:
    # Derived, not split off the stream, so a search that never restarts draws exactly what
    # it would without restarts.
    # Drawn only on a restart (under `cond`): fresh keys for every offspring cost as much as
    # the rest of a generation.
    restart_key = jax.random.fold_in(mutant_key, 1)

    def restarted():
      fresh = jax.random.uniform(restart_key, offspring.shape, offspring.dtype)
      fresh_origin = jnp.full_like(origin, -1)
      count = state.restart_seeds.shape[0] if params.restart_from == SEEDS else 0
      if count:
        fresh = fresh.at[0, :count].set(state.restart_seeds.astype(fresh.dtype))
        fresh_origin = fresh_origin.at[0, :count].set(jnp.arange(count, dtype=jnp.int32))
      return fresh, fresh_origin

    offspring, origin = jax.lax.cond(_restarting(state, params), restarted,
                                     lambda: (offspring, origin))
  return offspring, state.replace(key=key, offspring_origin=origin)


def tell(state: State, params: Params, offspring: jnp.ndarray,
         offspring_fitness: jnp.ndarray) -> State:
  """The next generation: elites (fitness kept) plus scored offspring, sorted."""
  elites = params.num_elites
  kept, kept_fitness = state.population[:, :elites], state.fitness[:, :elites]
  kept_origin = state.origin[:, :elites]
  key = state.key
  restarting = _restarting(state, params)
  if params.restart_patience:
    # On a restart the elite slots get fresh unscored keys; a BEST restart keeps the best so
    # far in the first.
    fresh_key = jax.random.fold_in(key, 2)  # Derived, as in `ask`.

    def fresh():
      keys = jax.random.uniform(fresh_key, kept.shape, kept.dtype)
      unscored = jnp.full_like(kept_fitness, jnp.inf)
      no_line = jnp.full_like(kept_origin, -1)
      if params.restart_from == SEEDS:
        return keys, unscored, no_line
      return (keys.at[0, 0].set(state.best_chromosome),
              unscored.at[0, 0].set(state.best_fitness), no_line.at[0, 0].set(state.best_origin))

    kept, kept_fitness, kept_origin = jax.lax.cond(
        restarting, fresh, lambda: (kept, kept_fitness, kept_origin))
    state = state.replace(run_best=jnp.where(restarting, jnp.inf, state.run_best))
  population = jnp.concatenate([kept, offspring], axis=1)
  fitness = jnp.concatenate([kept_fitness, offspring_fitness], axis=1)
  origin = jnp.concatenate([kept_origin, state.offspring_origin], axis=1)
  population, fitness, origin = _sort(population, fitness, origin)
  generation = state.generation + 1
  if params.exchange_interval and params.num_populations > 1:
    exchanged = _exchange(population, fitness, origin, params)
    do = generation % params.exchange_interval == 0
    population = jnp.where(do, exchanged[0], population)
    fitness = jnp.where(do, exchanged[1], fitness)
    origin = jnp.where(do, exchanged[2], origin)
  improved, best = _with_populations(state, population, fitness, origin)
  return best.replace(
      generation=generation, key=key,
      stagnation=jnp.where(improved | restarting, 0, state.stagnation + 1),
      evaluations=state.evaluations + offspring.shape[0] * offspring.shape[1])


def _with_populations(state: State, population: jnp.ndarray, fitness: jnp.ndarray,
                      origin: jnp.ndarray) -> tuple[jnp.ndarray, State]:
  """(whether the current run's best improved, the state holding these sorted populations and
  the best so far)."""
  best = jnp.argmin(fitness[:, 0])
  improved = fitness[best, 0] < state.best_fitness
  return fitness[best, 0] < state.run_best, state.replace(
      population=population, fitness=fitness, origin=origin,
      run_best=jnp.minimum(state.run_best, fitness[best, 0]),
      best_chromosome=jnp.where(improved, population[best, 0], state.best_chromosome),
      best_fitness=jnp.where(improved, fitness[best, 0], state.best_fitness),
      best_origin=jnp.where(improved, origin[best, 0], state.best_origin))


def _exchange(population: jnp.ndarray, fitness: jnp.ndarray, origin: jnp.ndarray,
              params: Params) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """Each population gets the best `exchange_count` of every other one in place of its worst."""
  pops, size, _ = population.shape
  count = params.exchange_count
  incoming = (pops - 1) * count
  best, best_fitness = population[:, :count], fitness[:, :count]  # [Pi, k, n]
  others = jnp.array([[j for j in range(pops) if j != i] for i in range(pops)], jnp.int32)
  gifts = best[others].reshape(pops, incoming, -1)
  gift_fitness = best_fitness[others].reshape(pops, incoming)
  gift_origin = origin[:, :count][others].reshape(pops, incoming)
  population = jnp.concatenate([population[:, :size - incoming], gifts], axis=1)
  fitness = jnp.concatenate([fitness[:, :size - incoming], gift_fitness], axis=1)
  origin = jnp.concatenate([origin[:, :size - incoming], gift_origin], axis=1)
  return _sort(population, fitness, origin)


class Result(NamedTuple):
  best_chromosome: jnp.ndarray
  best_fitness: jnp.ndarray
  history: jnp.ndarray  # [max_generations + 1] best fitness after each generation (0: initial;
  # inf after the last generation run)
  generations: jnp.ndarray
  evaluations: jnp.ndarray
  final_population: jnp.ndarray  # [Pi, P, n] sorted best first (REGAL's BRKGA features)
  final_fitness: jnp.ndarray  # [Pi, P]
  best_origin: jnp.ndarray  # [] the seed the best descends from through elite parents; -1: none


def max_generations(params: Params, budget: int) -> int:
  """Generations that fit in `budget` evaluations after the initial populations."""
  initial = params.num_populations * params.population_size
  if budget < initial:
    raise ValueError(f"budget {budget} is below one initial population set ({initial})")
  return (budget - initial) // params.offspring_per_generation


# improve(key, population [Pi, P, n], fitness [Pi, P], allowance []) ->
#   (population, fitness, evaluations spent [] <= allowance).
ImproveFn = Callable[[jax.Array, jnp.ndarray, jnp.ndarray, jnp.ndarray],
                     tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]]


def improve_key(state: State) -> jax.Array:
  """The improve hook's key: its own, leaving the engine's stream alone, so a hook that
  changes nothing changes nothing."""
  return jax.random.fold_in(state.key, 0x1A7E)


def after_improve(state: State, population: jnp.ndarray, fitness: jnp.ndarray,
                  spent: jnp.ndarray) -> State:
  """The state holding the hook's polished populations, re-sorted, and its evaluations."""
  better, polished = _with_populations(state, *_sort(population, fitness, state.origin))
  return polished.replace(
      stagnation=jnp.where(better, 0, state.stagnation),
      evaluations=state.evaluations + spent.astype(state.evaluations.dtype))


def improved(state: State, improve: ImproveFn, budget: int | jnp.ndarray) -> State:
  """The state after `improve` polished its populations with at most the budget left."""
  return after_improve(state, *improve(improve_key(state), state.population, state.fitness,
                                       budget - state.evaluations))


def goes_on(generation, evaluations, params: Params, budget: int, generations: int):
  """Whether another generation runs: it fits in the budget and the generation cap (ints or
  traced)."""
  return (evaluations + params.offspring_per_generation <= budget) & (generation < generations)


def improve_due(generation, evaluations, params: Params, budget: int, interval: int):
  """Whether the improve hook runs after this generation: every `interval`-th one, and after
  the last one (the remainder no generation fits in)."""
  return (generation % interval == 0) | (evaluations + params.offspring_per_generation > budget)


def run(fitness_fn: Callable[[jnp.ndarray], jnp.ndarray], key: jax.Array, params: Params,
        budget: int, num_genes: int, seeds: jnp.ndarray | None = None,
        improve: ImproveFn | None = None, improve_interval: int = 1,
        stop: Callable[[State], jnp.ndarray] | None = None) -> Result:
  """A whole search, jit-compatible (`budget`, `num_genes`, `improve_interval` static).

  `fitness_fn` maps chromosomes [N, n] to fitness [N] (smaller is better). Same key, same
  result. `seeds` [S, n] enter population 0; the best seed is an upper bound on the result.
  `improve` (module doc) runs after every `improve_interval`-th generation. `stop(state)`, if
  given, is asked before each generation whether to end early (e.g. a wall-clock limit).
  """
  params.validate()
  generations = max_generations(params, budget)
  if improve_interval < 1:
    raise ValueError(f"improve_interval must be at least 1, got {improve_interval}")
  init_key, search_key = jax.random.split(key)
  population = initial_population(init_key, params, num_genes, seeds)
  pops, size, _ = population.shape
  fitness = fitness_fn(population.reshape(pops * size, num_genes)).reshape(pops, size)
  num_seeds = 0 if seeds is None else seeds.shape[0]
  state = init(search_key, params, population, fitness, seed_origin(params, num_seeds),
               None if seeds is None else population[0, :num_seeds])
  history = jnp.full(generations + 1, jnp.inf, fitness.dtype).at[0].set(state.best_fitness)

  def body(carry):
    state, history = carry
    offspring, state = ask(state, params)
    scored = fitness_fn(offspring.reshape(-1, num_genes)).reshape(offspring.shape[:2])
    state = tell(state, params, offspring, scored)
    if improve is not None:
      # One call site, so the hook is compiled once; not due, it gets no budget.
      due = improve_due(state.generation, state.evaluations, params, budget, improve_interval)
      state = improved(state, improve, jnp.where(due, budget, state.evaluations))
    return state, history.at[state.generation].set(state.best_fitness)

  def more(carry):
    state = carry[0]
    go = goes_on(state.generation, state.evaluations, params, budget, generations)
    return go if stop is None else go & ~stop(state)

  state, history = jax.lax.while_loop(more, body, (state, history))
  return Result(best_chromosome=state.best_chromosome, best_fitness=state.best_fitness,
                history=history, generations=state.generation, evaluations=state.evaluations,
                final_population=state.population, final_fitness=state.fitness,
                best_origin=state.best_origin)
