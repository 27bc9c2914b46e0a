"""regal.learning.rollout: bucket-padded chromosomes score exactly like the graph's own, and one
compiled search serves every graph of a bucket."""
import jax.numpy as jnp
import numpy as np
import pytest

from datasets import devices as devices_lib
from experiments.bench.graphs import synthetic_graph
from regal.learning import rollout
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance


@pytest.fixture(scope="module")
def worker():
  graph = synthetic_graph(10, seed=0)
  same_shape = graph.replace(compute_cost=graph.compute_cost * 1.5 + 1)
  problems = [performance.Problem(g, devices_lib.homogeneous(2), model=model)
              for g, model in [(graph, "sync"), (same_shape, "sync"),
                               (synthetic_graph(12, seed=2), "wc")]]
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
