"""The scoring path: Problem validation, batched fitness against reference scoring."""
import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets import errors, synthetic
from regal.scoring import chromosome as ch
from regal.scoring import performance


@pytest.fixture(scope="module")
def graph():
  return synthetic.generate(np.random.default_rng(5))


@pytest.mark.parametrize("model", ["wc", "sync"])
@pytest.mark.parametrize("objective, limit", [("runtime", None), ("memory", None),
                                              ("runtime_under_memory", 350.0)])
def test_fitness_equals_reference_scoring(graph, model, objective, limit):
  problem = performance.Problem(graph, devices_lib.homogeneous(2), model=model,
                                objective=objective, memory_limit=limit)
  population = np.random.default_rng(0).random((6, problem.layout.size)).astype(np.float32)
  values = np.asarray(performance.make_fitness_fn(problem)(population))
  expected = [performance.score_reference(problem, c)[0] for c in population]
  np.testing.assert_allclose(values, expected, rtol=1e-5)


def test_encoded_single_device_solution_scores_sum_of_costs(graph):
  problem = performance.Problem(graph, devices_lib.homogeneous(3))
  genes = ch.encode(np.zeros(graph.num_ops, int), graph.topological_order, problem.layout)
  value, schedule = performance.score_reference(problem, genes)
  assert value == graph.compute_cost.sum()
  assert schedule.op_start[graph.topological_order].tolist() == sorted(schedule.op_start)


@pytest.mark.parametrize("kwargs, message", [
    (dict(model="tpu"), "unknown model 'tpu'"),
    (dict(objective="speed"), "unknown objective 'speed'"),
    (dict(objective="runtime_under_memory"), "needs a memory limit"),
    (dict(objective="runtime_under_memory", memory_limit=-1), "must be positive"),
    (dict(model="doppler", objective="memory"), "doppler model has no memory"),
])
def test_bad_problems(graph, kwargs, message):
  with pytest.raises(errors.ConfigError, match=message):
    performance.Problem(graph, devices_lib.homogeneous(2), **kwargs)


def test_bad_placement_is_refused_before_running(graph):
  from regal.scoring.wc import reference as wc_reference
  devices = devices_lib.homogeneous(2)
  with pytest.raises(errors.ConfigError, match="placed on device 5"):
    wc_reference.simulate_wc(graph, devices, np.full(graph.num_ops, 5),
                             np.zeros(graph.num_ops), np.zeros((graph.num_tensors, 2)))
  with pytest.raises(errors.ConfigError, match="placement has 3 entries"):
    wc_reference.simulate_wc(graph, devices, np.zeros(3, int), np.zeros(graph.num_ops),
                             np.zeros((graph.num_tensors, 2)))
