"""regal.learning.rollout: a rollout is the one search (`regal.search.guides.run_guided`, what
regal.optimize runs), its reward comes from the problem's own model, and the policy's Betas
shape the drawn genes."""
import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets.synthetic import sized_graph
from regal.learning import rollout
from regal.scoring import performance
from regal.search import guides


@pytest.fixture(scope="module")
def worker():
  graph = sized_graph(10, seed=0)
  problems = [performance.Problem(g, devices_lib.homogeneous(2), model=model)
              for g, model in [(graph, "sync"), (sized_graph(12, seed=2), "wc"),
                               (sized_graph(11, seed=4), "doppler")]]
  # With latency the delay model's answer scores differently under WC.
  problems.append(performance.Problem(sized_graph(30, seed=7),
                                      devices_lib.homogeneous(2, latency=5.0), model="delay"))
  return rollout.RolloutWorker(problems, evals=300)


def test_a_rollout_is_the_search_regal_optimize_runs(worker):
  """The same search, seeds and parameters; the worker pads every graph to one shape."""
  assert worker.shape.bucket.num_ops > min(p.graph.num_ops for p in worker.problems)
  for index, problem in enumerate(worker.problems[:2]):
    [(value, best)] = worker.run([rollout.Task(index, None, None, seed=3, best=True)])
    direct = guides.run_guided(problem, 300, 3, guides.guidance(problem, 0,
                                                                [guides.HeuristicSeeds()]),
                               shape=worker.shape)
    assert value == direct.objective
    np.testing.assert_array_equal(best, direct.best_chromosome)


def test_rewards_come_from_the_problems_own_model(worker):
  """A delay or doppler training problem is scored by that model (the old rollouts scored
  every model but sync with the WC model): the rollout's objective is the reference score of
  its best chromosome."""
  differs = []
  for index in (2, 3):
    problem = worker.problems[index]
    [(value, best)] = worker.run([rollout.Task(index, None, None, seed=1, best=True)])
    reference, _ = performance.score_reference(problem, best)
    assert value == pytest.approx(reference, rel=1e-5)
    wc = performance.score_reference(
        performance.Problem(problem.graph, problem.devices, model="wc"), best)[0]
    differs.append(wc != pytest.approx(reference, rel=1e-5))
  assert any(differs)  # Scored with the WC model, the first assertion would fail.


def test_rollouts_draw_from_the_policy_distributions():
  """The Betas shape every drawn gene (initial population and mutants): concentrated near
  1 or near 0, the best chromosome's drawn keys are near 1 or 0; uniform keys are spread.
  Device 0 is ten times slower and the Betas put every drawn op on device 1, so the single-
  device seed (on device 0) is never the best nor its elite parent: the best is drawn."""
  devices = devices_lib.from_json_dict({"speed": [0.1, 1.0]})
  problem = performance.Problem(sized_graph(10, seed=0), devices, model="sync")
  worker = rollout.RolloutWorker([problem], evals=300)
  worker._seeds[0] = {}  # No heuristic seeds.
  layout = problem.layout
  drawn = layout.priority_slice

  def betas(priority: float) -> tuple[np.ndarray, np.ndarray]:
    alpha, beta = np.ones(layout.size), np.ones(layout.size)
    on_device_one = np.arange(layout.affinity_slice.stop) % layout.num_devices == 1
    alpha[layout.affinity_slice] = np.where(on_device_one, 1e3, 1e-3)
    beta[layout.affinity_slice] = np.where(on_device_one, 1e-3, 1e3)
    alpha[drawn], beta[drawn] = priority, 1.0 / priority
    return alpha, beta

  high = rollout.Task(0, *betas(1e3), seed=1, best=True)
  low = rollout.Task(0, *betas(1e-3), seed=1, best=True)
  uniform = rollout.Task(0, None, None, seed=1, best=True)
  (_, near_one), (_, near_zero), (_, spread) = worker.run([high, low, uniform])
  assert near_one[drawn].min() > 0.9 and near_zero[drawn].max() < 0.1
  assert spread.min() < 0.1 and spread.max() > 0.9


def test_a_worker_of_wc_graphs_pads_to_the_consumer_decoders_shape():
  """WC searches derive their transfer order (the default consumer decoder), so a worker of WC
  graphs alone compiles a search without transfer genes; mixed models keep them (above)."""
  problems = [performance.Problem(sized_graph(n, seed=n), devices_lib.homogeneous(2), model="wc")
              for n in (10, 12)]
  assert rollout.RolloutWorker(problems, evals=300).shape.bucket.num_tensors == 0
  assert rollout.RolloutWorker(problems[:1] + [performance.Problem(
      sized_graph(11, seed=4), devices_lib.homogeneous(2), model="sync")],
      evals=300).shape.bucket.num_tensors > 0
