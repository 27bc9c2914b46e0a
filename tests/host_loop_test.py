"""The host-driven search (`brkga.run_on_host`, `local_moves.elite_improver_on_host`) against
the whole-search program (`brkga.run` under `jit`, the reference): the same keys, the same
result, bit for bit, through seeds, exchanges, both kinds of restart, a stop and local moves."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import regal_brkga as brkga
from regal_datasets import synthetic
from regal.scoring import chromosome as chromosome_lib
from regal.search import local_moves

HIDDEN = jnp.asarray([3, 0, 6, 1, 7, 2, 5, 4, 9, 8])


def footrule(chromosomes):
  ranks = jnp.argsort(jnp.argsort(chromosomes[:, :10], axis=1), axis=1)
  return (jnp.sum(jnp.abs(ranks - HIDDEN), axis=1) + chromosomes[:, 10:].sum(axis=1)
          ).astype(jnp.float32)


def on_host(fitness):
  """The JAX fitness as a host function: numpy in, numpy out."""
  jitted = jax.jit(fitness)
  return lambda chromosomes: np.asarray(jitted(jnp.asarray(chromosomes)))


def assert_same(fused: brkga.Result, hosted: brkga.Result) -> None:
  for name in fused._fields:
    np.testing.assert_array_equal(np.asarray(getattr(fused, name)),
                                  np.asarray(getattr(hosted, name)), err_msg=name)


@pytest.mark.parametrize("restart_from", [brkga.BEST, brkga.SEEDS])
def test_same_search_as_the_whole_program(restart_from):
  params = brkga.Params(population_size=30, num_elites=6, num_mutants=5, num_populations=2,
                        exchange_interval=3, exchange_count=2, restart_patience=4,
                        restart_from=restart_from, rho=0.65)
  seeds = jax.random.uniform(jax.random.key(9), (3, 14))
  fused = jax.jit(lambda key: brkga.run(footrule, key, params, 1500, 14, seeds=seeds))(
      jax.random.key(4))
  hosted = brkga.run_on_host(on_host(footrule), jax.random.key(4), params, 1500, 14,
                             seeds=seeds)
  assert int(hosted.generations) == brkga.max_generations(params, 1500)
  assert_same(fused, hosted)


def test_guided_mutants_and_a_stop_match():
  alpha = jnp.linspace(0.5, 3.0, 14)
  params = brkga.Params(population_size=24, num_elites=5, num_mutants=6, mutant_alpha=alpha,
                        mutant_beta=jnp.flip(alpha))
  fused = jax.jit(lambda key: brkga.run(footrule, key, params, 2000, 14,
                                        stop=lambda state: state.generation >= 7))(
      jax.random.key(1))
  hosted = brkga.run_on_host(on_host(footrule), jax.random.key(1), params, 2000, 14,
                             stop=lambda state: int(state.generation) >= 7)
  assert int(hosted.generations) == 7
  assert_same(fused, hosted)


@pytest.mark.parametrize("pool, exchange, relabel, accept_worse", [
    (0, 0.0, 0.0, 0.0), (6, 0.3, 0.2, 0.05)])
def test_local_moves_match(pool, exchange, relabel, accept_worse):
  graph = synthetic.sized_graph(12, seed=3)
  layout = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, 3)
  table = local_moves.move_table(graph)
  weights = jax.random.uniform(jax.random.key(2), (layout.size,))

  def fitness(chromosomes):  # Any exact fitness: moves only write genes.
    decoded = jax.vmap(lambda c: chromosome_lib.decode(c, layout))(chromosomes)
    return (jnp.sin(7 * chromosomes) @ weights + decoded.placement.sum(axis=1)
            ).astype(jnp.float32)

  settings = (table, layout, local_moves.Memetic(
      climbers=3, steps=4, batch=5, swap_fraction=0.2, neighbour_device=0.6,
      cluster_fraction=0.3, exchange_fraction=exchange, accept_worse=accept_worse,
      relabel_fraction=relabel, climber_pool=pool))
  params = brkga.Params(population_size=20, num_elites=4, num_mutants=3, num_populations=2,
                        exchange_interval=2, exchange_count=1)
  fused = jax.jit(lambda key: brkga.run(
      fitness, key, params, 900, layout.size,
      improve=local_moves.elite_improver(fitness, *settings), improve_interval=2))(
      jax.random.key(7))
  host_fitness = on_host(fitness)
  hosted = brkga.run_on_host(host_fitness, jax.random.key(7), params, 900, layout.size,
                             improve=local_moves.elite_improver_on_host(host_fitness,
                                                                        *settings),
                             improve_interval=2)
  assert int(hosted.evaluations) <= 900
  assert_same(fused, hosted)


def test_a_prior_keeps_the_genes_it_leaves_and_zero_changes_nothing():
  """Common random numbers: with a prior on some genes, every other gene of the initial
  population is the unguided draw, bit for bit; q = 0 is the unguided search itself."""
  params = brkga.Params(population_size=24, num_elites=5, num_mutants=6)
  key = jax.random.key(3)
  plain = brkga.initial_population(key, params, 14)
  q = jnp.zeros(14).at[:5].set(0.5)
  steered = brkga.initial_population(key, params.replace(prior_q=q, prior_mean=0.9,
                                                         prior_spread=0.1), 14)
  np.testing.assert_array_equal(plain[..., 5:], steered[..., 5:])
  changed = np.asarray(plain[..., :5] != steered[..., :5])
  assert 0.35 < changed.mean() < 0.65  # About q of the steered genes.
  assert np.all(np.abs(np.asarray(steered[..., :5])[changed] - 0.9) < 0.1)
  zero = brkga.run_on_host(on_host(footrule), jax.random.key(5), params.replace(prior_q=0.0),
                           600, 14)
  plain_run = brkga.run_on_host(on_host(footrule), jax.random.key(5), params, 600, 14)
  assert_same(plain_run, zero)
  guided = jax.jit(lambda k: brkga.run(footrule, k, params.replace(prior_q=q), 600, 14))(
      jax.random.key(5))
  assert_same(guided, brkga.run_on_host(on_host(footrule), jax.random.key(5),
                                        params.replace(prior_q=q), 600, 14))
