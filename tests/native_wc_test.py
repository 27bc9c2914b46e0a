"""The native WC model equals the readable reference bit for bit (float32), and the scoring
path gives the same fitness with the native engine as with the JAX one."""
import dataclasses

import jax
import numpy as np
import pytest
from graph_strategies import dags, device_sets
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets import io as graph_io
from regal_datasets import synthetic
from regal_datasets.graph import Graph
from regal.scoring import performance
from regal.scoring.wc import native as native_wc
from regal.scoring.wc import reference as wc_reference


def random_inputs(rng, graph, devices, population, coarse=False):
  placement = rng.integers(0, devices.num_devices, (population, graph.num_ops))
  priority = rng.random((population, graph.num_ops)).astype(np.float32)
  transfer = rng.random((population, graph.num_tensors, devices.num_devices)).astype(np.float32)
  if coarse:  # Ties are common: the tie-breaking rules are exercised.
    priority = (np.round(priority * 3) / 3).astype(np.float32)
    transfer = (np.round(transfer * 2) / 2).astype(np.float32)
  return placement, priority, transfer


def assert_matches_reference(graph, devices, inputs, memory=True):
  native = native_wc.build_native_graph(graph, devices, memory=memory)
  makespan, peak, completion = native_wc.simulate_with_completion(native, *inputs)
  for p in range(inputs[0].shape[0]):
    ref = wc_reference.simulate_wc(graph, devices, *(x[p] for x in inputs), dtype=np.float32)
    assert makespan[p] == ref.makespan, p
    assert completion[p] == pytest.approx(np.mean(np.asarray(ref.op_end, np.float64)),
                                          rel=1e-12), p
    if memory:
      np.testing.assert_array_equal(peak[p], ref.peak_memory)
    else:
      assert np.isnan(peak[p]).all()


@settings(max_examples=40, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.booleans(), st.integers(0, 2**31))
def test_random_graphs_and_devices(graph, devices, memory, seed):
  inputs = random_inputs(np.random.default_rng(seed), graph, devices, 4, coarse=True)
  assert_matches_reference(graph, devices, inputs, memory=memory)


def test_synthetic_graphs():
  rng = np.random.default_rng(3)
  devices = devices_lib.homogeneous(3, latency=1.0)
  for _ in range(2):
    graph = synthetic.generate(rng)
    inputs = random_inputs(rng, graph, devices, 3)
    assert_matches_reference(graph, devices, inputs)


def test_doppler_graphs(shared_graphs):
  rng = np.random.default_rng(11)
  devices = devices_lib.homogeneous(4)
  for path in sorted((shared_graphs / "doppler").glob("*.txt")):
    graph = graph_io.load_graph(str(path))
    # Doppler's byte counts pass float32's exact integers: the same order of sums still
    # gives the same bits.
    assert_matches_reference(graph, devices, random_inputs(rng, graph, devices, 2))


def synthetic_case(seed, population):
  """(native graph, inputs) of a synthetic graph on 2 devices."""
  rng = np.random.default_rng(seed)
  graph = synthetic.generate(rng)
  devices = devices_lib.homogeneous(2)
  return (native_wc.build_native_graph(graph, devices),
          random_inputs(rng, graph, devices, population))


def test_threads_split_the_population_without_changing_results():
  native, inputs = synthetic_case(4, 7)
  one = native_wc.simulate(native, *inputs, threads=1)
  for threads in (2, 3, 16):
    for a, b in zip(one, native_wc.simulate(native, *inputs, threads=threads)):
      np.testing.assert_array_equal(a, b)
  empty = native_wc.simulate(native, *(x[:0] for x in inputs))
  assert empty[0].shape == (0,) and empty[1].shape == (0, 2)


def test_bad_placement_is_refused():
  native, (placement, priority, transfer) = synthetic_case(6, 2)
  with pytest.raises(ValueError, match="devices in 0..1"):
    native_wc.simulate(native, placement + 1, priority, transfer)


@pytest.mark.parametrize("objective, limit", [("runtime", None), ("memory", None),
                                              ("runtime_under_memory", 350.0)])
def test_fitness_is_the_same_with_either_engine(objective, limit):
  graph = synthetic.generate(np.random.default_rng(5))
  problem = performance.Problem(graph, devices_lib.homogeneous(3), objective=objective,
                                memory_limit=limit)
  population = np.random.default_rng(0).random((8, problem.layout.size)).astype(np.float32)
  values = {}
  for engine in ("native", "jax"):
    engine_problem = dataclasses.replace(problem, engine=engine)
    values[engine] = np.asarray(performance.make_fitness_fn(engine_problem)(population))
  np.testing.assert_array_equal(values["native"], values["jax"])


def test_engine_choice():
  graph = synthetic.generate(np.random.default_rng(5))
  devices = devices_lib.homogeneous(2)
  expected = "native" if jax.default_backend() == "cpu" else "jax"
  assert performance.scoring_engine(performance.Problem(graph, devices)) == expected
  assert performance.scoring_engine(performance.Problem(graph, devices, model="sync")) == expected
  assert performance.scoring_engine(performance.Problem(graph, devices, engine="jax")) == "jax"
  with pytest.raises(errors.ConfigError, match="unknown engine 'gpu'"):
    performance.Problem(graph, devices, engine="gpu")
  with pytest.raises(errors.ConfigError, match="scores the sync model in float32"):
    performance.Problem(graph, devices, model="sync", engine="native", dtype=np.float64)
  with pytest.raises(errors.ConfigError, match="native engine only"):
    performance.Problem(graph, devices, model="doppler", engine="jax")
  assert performance.scoring_engine(performance.Problem(graph, devices, model="delay")) == expected
  assert performance.scoring_engine(performance.Problem(graph, devices, model="doppler")) == (
      "native")



def test_channels_start_in_source_order_when_one_frees_as_another_gets_work():
  # At t=2 op b's end queues tensor b on channel 1->2 just before channel 0->2 frees with a2
  # waiting: both start then, and device 2's memory must add them in (src, dst) order, as
  # the reference does. In float32 the order shows: 1 + 2^24 + 1 = 2^24, 1 + 1 + 2^24 =
  # 2^24 + 2.
  graph = Graph(op_names=["a", "b", "c"], op_types=["", "", ""], compute_cost=[1.0, 2.0, 1.0],
                extra_memory=[0.0, 0.0, 0.0], tensor_producer=[0, 0, 1],
                tensor_size=[1.0, 2.0 ** 24, 1.0], data_edge_tensor=[0, 1, 2],
                data_edge_consumer=[2, 2, 2], control_edge_src=[], control_edge_dst=[])
  devices = devices_lib.homogeneous(3)
  devices = dataclasses.replace(devices, latency=np.zeros((3, 3)), bandwidth=np.ones((3, 3)))
  transfer = np.full((1, 3, 3), 0.5, np.float32)
  transfer[0, 0, 2], transfer[0, 1, 2] = 0.9, 0.1  # a1 leaves before a2.
  inputs = (np.array([[0, 1, 2]]), np.full((1, 3), 0.5, np.float32), transfer)
  assert_matches_reference(graph, devices, inputs)
  _, peak = native_wc.simulate(native_wc.build_native_graph(graph, devices), *inputs)
  assert peak[0, 2] == np.float32(2.0 ** 24)


def test_channels_that_end_together_release_in_source_order():
  # Device 0 sends a (2^24 + 2 bytes, from t=1) to device 2 and then b (2^24 - 1, from t=2) to
  # device 1; both land at t=3 and device 0 releases them then. In (src, dst) order
  # 2^25 - b - a = -2 in float32, in start order -1; op c then allocates 2^25 + 4 on device
  # 0, so the peak is 2^25 in the right order and 2^25 + 4 in the wrong one.
  graph = Graph(op_names=["a", "b", "c", "d1", "d2"], op_types=[""] * 5,
                compute_cost=[1.0] * 5, extra_memory=[0.0, 0.0, 2.0 ** 25 + 4, 0.0, 0.0],
                tensor_producer=[0, 1], tensor_size=[2.0 ** 24 + 2, 2.0 ** 24 - 1],
                data_edge_tensor=[0, 1], data_edge_consumer=[4, 3], control_edge_src=[3],
                control_edge_dst=[2])
  bandwidth = np.ones((3, 3))
  bandwidth[0, 1], bandwidth[0, 2] = 2.0 ** 24 - 1, 2.0 ** 23 + 1  # Both take until t=3.
  devices = dataclasses.replace(devices_lib.homogeneous(3), latency=np.zeros((3, 3)),
                                bandwidth=bandwidth)
  priority = np.float32([[0.9, 0.5, 0.1, 0.5, 0.5]])  # a before b before c on device 0.
  inputs = (np.array([[0, 0, 0, 1, 2]]), priority, np.full((1, 2, 3), 0.5, np.float32))
  assert_matches_reference(graph, devices, inputs)
  _, peak = native_wc.simulate(native_wc.build_native_graph(graph, devices), *inputs)
  assert peak[0, 0] == np.float32(2.0 ** 25)


@settings(max_examples=20, deadline=None)
@given(dags(max_ops=10, max_outputs=2), device_sets, st.integers(0, 2**31))
def test_the_search_score_is_the_objective_plus_the_tie_breaker(graph, devices, seed):
  """The native search scores WC runtime by makespan + TIE_BREAK * mean op completion (the
  reference's op ends); the memory objectives, the JAX engine and the other models search the
  objective itself."""
  placement, priority, transfer = random_inputs(np.random.default_rng(seed), graph, devices, 3)
  problem = performance.Problem(graph, devices, model="wc")
  score = performance.host_scorer(problem, tie_break=True)(placement, priority, transfer)
  plain = performance.host_scorer(problem)(placement, priority, transfer)
  for p in range(len(placement)):
    ref = wc_reference.simulate_wc(graph, devices, placement[p], priority[p], transfer[p],
                                   dtype=np.float32)
    expected = np.float32(ref.makespan + performance.TIE_BREAK * np.mean(
        np.asarray(ref.op_end, np.float64)))
    assert score[p] == expected and plain[p] == ref.makespan
    # Mean completion <= makespan, so the score is at most makespan * (1 + TIE_BREAK), up to
    # float32 rounding: one op alone makes the bound tight (7 + 0.01 * 7 rounds above 7 * 1.01).
    bound = np.float32(plain[p] * (1 + performance.TIE_BREAK))
    assert plain[p] <= score[p] <= np.nextafter(bound, np.float32(np.inf))
  for other in (dataclasses.replace(problem, objective="memory"),
                dataclasses.replace(problem, objective="runtime_under_memory",
                                    memory_limit=1.0),
                dataclasses.replace(problem, model="delay")):
    assert not performance.breaks_ties(other)
    np.testing.assert_array_equal(
        performance.host_scorer(other, tie_break=True)(placement, priority, transfer),
        performance.host_scorer(other)(placement, priority, transfer))
  assert not performance.breaks_ties(dataclasses.replace(problem, engine="jax"))
