"""The native sync model equals the readable reference bit for bit (float32), and the sync
model's fitness is the same through the native engine as through the JAX one."""
import dataclasses

import numpy as np
from graph_strategies import dags, device_sets
from hypothesis import given, settings
from hypothesis import strategies as st
from native_wc_test import random_inputs

from regal_datasets import devices as devices_lib
from regal_datasets import synthetic
from regal.scoring import performance
from regal.scoring.sync import native as native_sync
from regal.scoring.wc import native as native_wc
from regal.scoring.sync import reference as sync_reference


def assert_matches_reference(graph, devices, inputs, memory=True):
  makespan, peak = native_sync.simulate(
      native_wc.build_native_graph(graph, devices, memory=memory), *inputs)
  for p in range(inputs[0].shape[0]):
    ref = sync_reference.simulate_synchronous(graph, devices, *(x[p] for x in inputs),
                                              dtype=np.float32)
    assert makespan[p] == ref.makespan, p
    if memory:
      np.testing.assert_array_equal(peak[p], ref.peak_memory)
    else:
      assert np.isnan(peak[p]).all()


@settings(max_examples=60, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.booleans(), st.booleans(),
       st.integers(0, 2**31))
def test_random_graphs_and_devices(graph, devices, memory, coarse, seed):
  inputs = random_inputs(np.random.default_rng(seed), graph, devices, 4, coarse=coarse)
  assert_matches_reference(graph, devices, inputs, memory=memory)


def test_synthetic_graphs():
  rng = np.random.default_rng(3)
  devices = devices_lib.homogeneous(3, latency=1.0)
  for coarse in (False, True):
    graph = synthetic.generate(rng)
    assert_matches_reference(graph, devices, random_inputs(rng, graph, devices, 3, coarse))


def test_native_and_jax_fitness_agree():
  rng = np.random.default_rng(7)
  graph = synthetic.generate(rng)
  devices = devices_lib.homogeneous(2, latency=0.5)
  population = rng.random((6, performance.Problem(graph, devices).layout.size),
                          ).astype(np.float32)
  for objective in ("runtime", "memory"):
    problem = performance.Problem(graph, devices, model="sync", objective=objective)
    values = {engine: np.asarray(performance.make_fitness_fn(
        dataclasses.replace(problem, engine=engine))(population))
        for engine in ("native", "jax")}
    np.testing.assert_array_equal(values["native"], values["jax"])
