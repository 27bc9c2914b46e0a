"""The domain-free BRKGA engine: optimization, monotone best, budget, seeds, mutants."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import regal_brkga as brkga
HIDDEN = jnp.asarray([3, 0, 6, 1, 7, 2, 5, 4])


def footrule(chromosomes):
  """Distance between the order of the keys and a hidden permutation (0 only when equal)."""
  ranks = jnp.argsort(jnp.argsort(chromosomes, axis=1), axis=1)
  return jnp.sum(jnp.abs(ranks - HIDDEN), axis=1).astype(jnp.float32)


PARAMS = brkga.Params(population_size=40, num_elites=8, num_mutants=6, num_populations=2,
                      exchange_interval=5, exchange_count=2)


@pytest.fixture(scope="module")
def search():
  run = jax.jit(lambda key: brkga.run(footrule, key, PARAMS, 4000, 8))
  return run, run(jax.random.key(0))


def test_recovers_hidden_permutation(search):
  _, result = search
  assert result.best_fitness == 0
  order = np.argsort(np.argsort(np.asarray(result.best_chromosome)))
  assert order.tolist() == HIDDEN.tolist()


def test_best_never_worsens_and_budget_is_respected(search):
  _, result = search
  history = np.asarray(result.history)
  assert np.all(np.diff(history) <= 0)
  generations = brkga.max_generations(PARAMS, 4000)
  assert int(result.generations) == generations == len(history) - 1
  used = 2 * 40 + generations * PARAMS.offspring_per_generation
  assert int(result.evaluations) == used
  assert used <= 4000 < used + PARAMS.offspring_per_generation


def test_same_key_same_result(search):
  run, result = search
  again = run(jax.random.key(0))
  np.testing.assert_array_equal(again.history, result.history)
  np.testing.assert_array_equal(again.best_chromosome, result.best_chromosome)


def test_counts_every_fitness_call():
  calls = []

  def counting(x):
    calls.append(x.shape[0])  # Runs at trace time: one entry per distinct call site.
    return footrule(x)

  params = brkga.Params(population_size=20, num_elites=4, num_mutants=3)
  result = brkga.run(counting, jax.random.key(1), params, 500, 8)
  assert calls == [20, 16]  # The initial population, then one generation's offspring.
  assert int(result.evaluations) == 20 + int(result.generations) * 16 <= 500


def test_seed_is_an_upper_bound():
  seed = jnp.asarray(np.argsort(np.argsort(HIDDEN)) / 8.0 + 0.01)[None]  # decodes to HIDDEN
  assert footrule(seed)[0] == 0
  params = brkga.Params(population_size=20, num_elites=4, num_mutants=3)
  result = brkga.run(footrule, jax.random.key(2), params, 20, 8, seeds=seed)
  assert int(result.generations) == 0 and result.best_fitness == 0
  worse_seed = jnp.full((1, 8), 0.5)
  bound = footrule(worse_seed)[0]
  result = brkga.run(footrule, jax.random.key(3), params, 300, 8, seeds=worse_seed)
  assert result.best_fitness <= bound


def test_extreme_beta_concentrates_mutants():
  key = jax.random.key(4)
  alpha = jnp.asarray([100.0, 0.1, 1.0])
  beta = jnp.asarray([0.1, 100.0, 1.0])
  draws = brkga.mutants(key, (4000, 3), alpha, beta)
  means = np.asarray(draws.mean(axis=0))
  assert means[0] > 0.99 and means[1] < 0.01 and abs(means[2] - 0.5) < 0.03


@pytest.mark.parametrize("alpha,beta", [(0.3, 0.3), (2.0, 5.0), (0.05, 3.0), (40.0, 40.0)])
def test_beta_sample_matches_beta_moments(alpha, beta):
  draws = np.asarray(brkga.beta_sample(jax.random.key(8), jnp.full(40000, alpha),
                                       jnp.full(40000, beta)), np.float64)
  mean = alpha / (alpha + beta)
  variance = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
  assert np.all((draws >= 0) & (draws <= 1))
  assert abs(draws.mean() - mean) < 4 * np.sqrt(variance / draws.size) + 1e-6
  assert abs(draws.var() / variance - 1) < 0.05
  # Against numpy's sampler (an independent implementation): same quantiles within noise.
  reference = np.random.default_rng(0).beta(alpha, beta, 40000)
  quantiles = [0.1, 0.25, 0.5, 0.75, 0.9]
  np.testing.assert_allclose(np.quantile(draws, quantiles), np.quantile(reference, quantiles),
                             atol=0.02 * max(np.sqrt(variance) * 4, 1e-3))


def test_crossover_takes_elite_genes_with_rho():
  elite, other = jnp.ones((2000, 50)), jnp.zeros((2000, 50))
  child = brkga.crossover(jax.random.key(5), elite, other, 0.7)
  assert abs(float(child.mean()) - 0.7) < 0.01
  per_gene = brkga.crossover(jax.random.key(6), elite, other,
                             jnp.where(jnp.arange(50) < 25, 1.0, 0.0))
  assert per_gene[:, :25].min() == 1 and per_gene[:, 25:].max() == 0


def test_elites_keep_their_fitness_and_mutants_can_be_parents():
  params = brkga.Params(population_size=6, num_elites=2, num_mutants=2)
  population = jnp.linspace(0, 1, 6 * 3).reshape(1, 6, 3)
  fitness = jnp.arange(6.0)[None]
  state = brkga.init(jax.random.key(7), params, population, fitness)
  offspring, state = brkga.ask(state, params)
  assert offspring.shape == (1, 4, 3)
  scored = jnp.asarray([[10.0, 11.0, -1.0, 12.0]])  # A mutant (index 2) is the new best.
  state = brkga.tell(state, params, offspring, scored)
  np.testing.assert_array_equal(state.fitness[0], [-1.0, 0.0, 1.0, 10.0, 11.0, 12.0])
  assert state.best_fitness == -1.0
  np.testing.assert_array_equal(state.best_chromosome, offspring[0, 2])


def test_bad_params():
  with pytest.raises(ValueError, match="num_elites"):
    brkga.Params(population_size=10, num_elites=10).validate()
  with pytest.raises(ValueError, match="must not exceed"):
    brkga.Params(population_size=10, num_elites=5, num_mutants=6).validate()
  with pytest.raises(ValueError, match="budget 10 is below"):
    brkga.max_generations(brkga.Params(population_size=20, num_elites=4), 10)


def test_restart_keeps_only_the_best_and_never_loses_it():
  params = brkga.Params(population_size=10, num_elites=3, num_mutants=2, restart_patience=2)
  population = jnp.linspace(0, 1, 10 * 8).reshape(1, 10, 8)
  state = brkga.init(jax.random.key(8), params, population, jnp.arange(10.0)[None])
  for _ in range(2):  # Two generations of worse offspring: stagnation reaches 2.
    offspring, state = brkga.ask(state, params)
    state = brkga.tell(state, params, offspring, jnp.full((1, 7), 50.0))
  assert int(state.stagnation) == 2
  elites_before = state.population[0, :3]
  offspring, state = brkga.ask(state, params)  # A restart generation: all fresh keys.
  state = brkga.tell(state, params, offspring, jnp.full((1, 7), 40.0))
  assert state.best_fitness == 0.0 and int(state.stagnation) == 0
  np.testing.assert_array_equal(state.population[0, 0], elites_before[0])
  # The other former elites are gone; their slots are unscored and rank last.
  assert np.isinf(np.asarray(state.fitness[0, -2:])).all()
  assert np.all(np.asarray(state.fitness[0, 1:8]) == 40.0)
  for old in np.asarray(elites_before[1:]):
    assert not (np.asarray(state.population[0]) == old).all(axis=1).any()


def test_a_seeds_restart_starts_again_from_the_seeds_and_keeps_the_best_aside():
  params = brkga.Params(population_size=10, num_elites=3, num_mutants=2, restart_patience=2,
                        restart_from=brkga.SEEDS)
  population = jnp.linspace(0, 1, 10 * 8).reshape(1, 10, 8)
  seeds = population[0, 4:6]  # Two seeds, neither the best.
  state = brkga.init(jax.random.key(8), params, population, jnp.arange(10.0)[None],
                     restart_seeds=seeds)
  for _ in range(2):
    offspring, state = brkga.ask(state, params)
    state = brkga.tell(state, params, offspring, jnp.full((1, 7), 50.0))
  best_before = state.population[0, 0]
  offspring, state = brkga.ask(state, params)  # The restart: the seeds, then fresh keys.
  np.testing.assert_array_equal(offspring[0, :2], seeds)
  assert state.offspring_origin[0].tolist() == [0, 1, -1, -1, -1, -1, -1]
  state = brkga.tell(state, params, offspring, jnp.array([[40.0, 41, 45, 45, 45, 45, 45]]))
  # The best so far is kept aside, not in the new run's populations.
  assert state.best_fitness == 0.0 and int(state.stagnation) == 0
  np.testing.assert_array_equal(state.best_chromosome, best_before)
  assert not (np.asarray(state.population[0]) == np.asarray(best_before)).all(axis=1).any()
  assert state.fitness[0, :2].tolist() == [40.0, 41.0] and state.origin[0, :2].tolist() == [0, 1]
  # Stagnation counts from the new run's best (40): 30 is progress there, though worse than 0.
  offspring, state = brkga.ask(state, params)
  state = brkga.tell(state, params, offspring, jnp.full((1, 7), 30.0))
  assert int(state.stagnation) == 0 and state.best_fitness == 0.0
  offspring, state = brkga.ask(state, params)
  state = brkga.tell(state, params, offspring, jnp.full((1, 7), 35.0))
  assert int(state.stagnation) == 1


@pytest.mark.parametrize("restart_from", brkga.RESTART_FROM)
def test_restarts_do_not_break_a_search(restart_from):
  params = brkga.Params(population_size=40, num_elites=8, num_mutants=6, restart_patience=5,
                        restart_from=restart_from)
  seeds = jnp.full((2, 8), 0.5)
  result = jax.jit(lambda k: brkga.run(footrule, k, params, 3000, 8, seeds=seeds))(
      jax.random.key(9))
  assert np.all(np.diff(np.asarray(result.history)) <= 0)
  assert int(result.evaluations) <= 3000
  assert float(result.best_fitness) <= float(footrule(seeds)[0])


def test_lineage_follows_elite_parents():
  """Children inherit their elite parent's seed; mutants start no line; `run` reports the
  seed the winner descends from."""
  params = brkga.Params(population_size=6, num_elites=2, num_mutants=2)
  population = jnp.linspace(0, 1, 6 * 3).reshape(1, 6, 3)
  origin = brkga.seed_origin(params, 2)
  assert origin.tolist() == [[0, 1, -1, -1, -1, -1]]
  # Seed 1 is the best chromosome, seed 0 the second best: they are the two elites.
  state = brkga.init(jax.random.key(7), params, population, jnp.array([[1.0, 0.0, 5, 6, 7, 8]]),
                     origin)
  assert state.origin.tolist() == [[1, 0, -1, -1, -1, -1]] and int(state.best_origin) == 1
  offspring, state = brkga.ask(state, params)
  assert set(state.offspring_origin[0, :2].tolist()) <= {0, 1}
  assert state.offspring_origin[0, 2:].tolist() == [-1, -1]
  state = brkga.tell(state, params, offspring, jnp.array([[9.0, 9.0, -1.0, 9.0]]))
  assert int(state.best_origin) == -1  # The winning mutant.

  target = jnp.linspace(0.1, 0.9, 12)
  fitness = lambda c: jnp.sum((c - target) ** 2, axis=-1)  # noqa: E731
  seeds = jnp.stack([jnp.full(12, 0.5), target])
  search = brkga.run(fitness, jax.random.key(0), brkga.goncalves_resende(12), 400, 12, seeds)
  assert int(search.best_origin) == 1 and float(search.best_fitness) == 0.0
  unseeded = brkga.run(fitness, jax.random.key(0), brkga.goncalves_resende(12), 400, 12)
  assert int(unseeded.best_origin) == -1


@pytest.mark.parametrize("genes, evals, population", [
    (500, None, 200), (500, 10**6, 200), (500, 5000, 50), (500, 100, 20), (30, 5000, 30)])
def test_a_small_budget_caps_the_default_population(genes, evals, population):
  """The population is min(genes, 200) unless the budget would then buy fewer than
  BUDGET_GENERATIONS generations; never under 20."""
  assert brkga.BUDGET_GENERATIONS == 100
  params = brkga.goncalves_resende(genes, evals=evals)
  assert params.population_size == population
  assert params.num_elites == max(1, int(0.2 * population))
