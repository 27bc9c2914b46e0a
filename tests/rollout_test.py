"""regal.learning.rollout: bucket-padded chromosomes score exactly like the graph's own, and one
compiled search serves every graph of a bucket."""
import jax.numpy as jnp
import numpy as np
import pytest

from datasets import devices as devices_lib
from datasets.synthetic import sized_graph
from regal.learning import rollout
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance


@pytest.fixture(scope="module")
def worker():
  graph = sized_graph(10, seed=0)
  same_shape = graph.replace(compute_cost=graph.compute_cost * 1.5 + 1)
  problems = [performance.Problem(g, devices_lib.homogeneous(2), model=model)
              for g, model in [(graph, "sync"), (same_shape, "sync"),
                               (sized_graph(12, seed=2), "wc")]]
  return rollout.RolloutWorker(problems, evals=200)


def test_padded_chromosomes_score_like_the_originals(worker):
  rng = np.random.default_rng(0)
  for index, problem in enumerate(worker.problems):
    own = rng.random((16, problem.layout.size)).astype(np.float32)
    padded = np.stack([chromosome_lib.to_bucket(problem.layout, worker.layouts[index], c, fill=0.0)
                       for c in own])
    expected = np.asarray(performance.make_fitness_fn(problem)(jnp.asarray(own)))
    got = np.asarray(rollout._simulate(problem, worker.sims[index], jnp.asarray(padded),
                                       worker.layouts[index]))
    np.testing.assert_array_equal(got, expected)


def test_rollouts_are_deterministic_and_share_compilations(worker):
  tasks = [rollout.Task(i, None, None, seed=3) for i in range(3)]
  first = worker.run(tasks)
  assert first == worker.run(tasks)
  assert all(np.isfinite(first))
  # The two sync graphs of one shape share a compiled search.
  assert len(worker._searches) == 2 and first[0] != first[1]


def test_rollouts_draw_from_the_policy_distributions(worker):
  """REGAL's Betas shape every drawn gene (initial population and mutants): concentrated near
  1 or near 0, the best chromosome's keys are all near 1 or 0; uniform keys are spread."""
  size = worker.problems[0].layout.size
  high = rollout.Task(0, np.full(size, 1e3), np.full(size, 1e-3), seed=1, best=True)
  low = rollout.Task(0, np.full(size, 1e-3), np.full(size, 1e3), seed=1, best=True)
  uniform = rollout.Task(0, None, None, seed=1, best=True)
  (_, near_one), (_, near_zero), (_, spread) = worker.run([high, low, uniform])
  assert near_one.min() > 0.9 and near_zero.max() < 0.1
  assert spread.min() < 0.1 and spread.max() > 0.9


def test_training_and_inference_feature_runs_draw_one_population_size(worker):
  """The feature population is sized by the graph's own chromosome, not the padded bucket the
  training workers run on, so a graph's features have one distribution wherever they run."""
  import brkga
  from regal.learning import features as features_lib
  problem = worker.problems[0]
  assert worker.layouts[0].size > problem.layout.size  # Padded: the old rule differed here.
  wanted = features_lib.feature_params(problem).population_size
  assert wanted != brkga.goncalves_resende(min(worker.layouts[0].size, 400)).population_size
  placement, priority = worker.feature_population(0, 400, seed=0)
  assert placement.shape == priority.shape == (wanted, problem.graph.num_ops)
