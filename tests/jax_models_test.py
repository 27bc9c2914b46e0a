"""The JAX WC and synchronous models equal their references, bit for bit in float32."""
import jax
import numpy as np
import pytest
from graph_strategies import dags, device_sets
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets import synthetic
from regal.scoring.sync import reference as sync_reference
from regal.scoring.wc import reference as wc_reference
from regal.scoring.sync import batched as sync_model
from regal.scoring.wc import batched as wc_model
from regal.scoring.sim_graph import build_sim_graph

MODELS = {"wc": (wc_model.simulate_batch, wc_reference.simulate_wc),
          "sync": (sync_model.simulate_batch, sync_reference.simulate_synchronous)}
SMALL_SHAPE = (16, 32, 128, 32, 16)  # With max_outputs=2: one compile per model and device count.


def random_inputs(rng, sim, population):
  ops, tensors = sim.op_mask.shape[0], sim.tensor_size.shape[0]
  devices = sim.num_devices
  return (rng.integers(0, devices, (population, ops)).astype(np.int32),
          rng.random((population, ops)).astype(np.float32),
          rng.random((population, tensors, devices)).astype(np.float32))


def assert_same(graph, devices, model, sim, placement, priority, transfer_priority,
                exact_memory=True, exact_times=True):
  """Integer costs must match exactly. Memory is compared with rtol 1e-5 where byte counts
  exceed float32's exact integers (the two sum in different orders); so are times when
  durations are fractional (XLA may round a fused multiply-add once instead of twice)."""
  jax_sim, reference = MODELS[model]
  result = jax.device_get(jax_sim(sim, placement, priority, transfer_priority))
  o, t = graph.num_ops, graph.num_tensors
  for p in range(placement.shape[0]):
    ref = reference(graph, devices, placement[p, :o], priority[p, :o],
                    transfer_priority[p, :t], dtype=np.float32)
    same = (np.testing.assert_array_equal if exact_times else
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5))
    same(result.op_start[p, :o], ref.op_start)
    same(result.op_end[p, :o], ref.op_end)
    same(result.transfer_start[p, :t], ref.transfer_start)
    same(result.transfer_end[p, :t], ref.transfer_end)
    same(result.makespan[p], ref.makespan)
    if exact_memory:
      np.testing.assert_array_equal(result.peak_memory[p], ref.peak_memory)
    else:
      np.testing.assert_allclose(result.peak_memory[p], ref.peak_memory, rtol=1e-5)


@settings(max_examples=12)  # Each example compiles; CI draws new ones per run.
@given(dags(max_ops=12, max_outputs=2), device_sets, st.sampled_from(["wc", "sync"]),
       st.integers(0, 2**31))
def test_random_graphs_and_devices(graph, devices, model, seed):
  sim = build_sim_graph(graph, devices, shape=SMALL_SHAPE, max_outputs=2)
  rng = np.random.default_rng(seed)
  placement, priority, transfer_priority = random_inputs(rng, sim, 4)
  # Coarse priorities make ties common, which exercises the tie-breaking rules.
  priority = np.round(priority * 3) / 3
  transfer_priority = np.round(transfer_priority * 2) / 2
  assert_same(graph, devices, model, sim, placement, priority, transfer_priority)


@settings(max_examples=15)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.integers(0, 2**31))
def test_wc_without_memory_keeps_every_time(graph, devices, seed):
  """The makespan-only WC graph (no USE/SENDER entries) schedules exactly as the reference."""
  sim = build_sim_graph(graph, devices, shape=SMALL_SHAPE, memory=False, max_outputs=2)
  rng = np.random.default_rng(seed)
  placement, priority, transfer_priority = random_inputs(rng, sim, 4)
  priority = np.round(priority * 3) / 3
  result = jax.device_get(wc_model.simulate_batch(sim, placement, priority, transfer_priority))
  o, t = graph.num_ops, graph.num_tensors
  assert np.isnan(result.peak_memory).all()
  for p in range(placement.shape[0]):
    ref = wc_reference.simulate_wc(graph, devices, placement[p, :o], priority[p, :o],
                                   transfer_priority[p, :t], dtype=np.float32)
    np.testing.assert_array_equal(result.makespan[p], ref.makespan)
    np.testing.assert_array_equal(result.op_start[p, :o], ref.op_start)
    np.testing.assert_array_equal(result.op_end[p, :o], ref.op_end)
    np.testing.assert_array_equal(result.transfer_start[p, :t], ref.transfer_start)
    np.testing.assert_array_equal(result.transfer_end[p, :t], ref.transfer_end)


def test_sync_refuses_a_graph_without_memory():
  graph = synthetic.generate(np.random.default_rng(5))
  devices = devices_lib.homogeneous(2)
  sim = build_sim_graph(graph, devices, memory=False)
  with pytest.raises(ValueError, match="needs a simulation graph built with memory"):
    sync_model.simulate_batch(sim, *random_inputs(np.random.default_rng(0), sim, 2))


@pytest.mark.parametrize("model", ["wc", "sync"])
def test_synthetic_graphs(model):
  rng = np.random.default_rng(7)
  graphs = [synthetic.generate(rng) for _ in range(3)]
  devices = devices_lib.homogeneous(3, latency=1.0)
  for graph in graphs:
    sim = build_sim_graph(graph, devices, shape=(256, 256, 2048, 1024, 512))
    assert_same(graph, devices, model, sim, *random_inputs(rng, sim, 3))


@pytest.mark.parametrize("model", ["wc", "sync"])
def test_doppler_graphs(shared_graphs, model):
  graphs = [graph_io.load_graph(str(p)) for p in sorted((shared_graphs / "doppler").glob("*.txt"))]
  devices = devices_lib.homogeneous(4)
  rng = np.random.default_rng(11)
  for graph in graphs:
    sim = build_sim_graph(graph, devices, shape=(256, 256, 2048, 512, 8))
    # Doppler's costs reach 7e11: integers, but beyond float32's exact range.
    assert_same(graph, devices, model, sim, *random_inputs(rng, sim, 2), exact_memory=False)
