"""The consumer decoder (`regal.scoring.consumer_transfers`): transfer priorities read off the
readers' op priorities, the compiled loop equal to the readable reference, and every scoring
path scoring what the reference model gives for the derived schedule."""
import jax.numpy as jnp
import numpy as np
from graph_strategies import dags, device_sets
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import devices as devices_lib
from regal_datasets import sharded
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import consumer_transfers, performance
from regal.scoring.wc import reference as wc_reference


@settings(max_examples=40, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.integers(0, 2**31))
def test_compiled_equals_reference(graph, devices, seed):
  rng = np.random.default_rng(seed)
  placement = rng.integers(0, devices.num_devices, (3, graph.num_ops))
  # Coarse priorities: readers of one tensor on one device often tie.
  priority = (np.round(rng.random((3, graph.num_ops)) * 3) / 3).astype(np.float32)
  derived = consumer_transfers.transfer_priorities(consumer_transfers.readers(graph), placement,
                                                   priority, devices.num_devices)
  for p in range(3):
    expected = consumer_transfers.transfer_priorities_reference(graph, placement[p], priority[p],
                                                                devices.num_devices)
    np.testing.assert_array_equal(derived[p], expected)


@settings(max_examples=30, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.integers(0, 3), st.booleans(),
       st.integers(0, 2**31))
def test_bucket_decoder_equals_decoding_the_unpadded_chromosomes(graph, devices, extra_ops,
                                                                 transfer_genes, seed):
  """The one-pass decode of padded chromosomes gives the arrays of copying them back to the
  graph's layout and decoding (coarse affinities: ties go to the lowest device, as argmax)."""
  rng = np.random.default_rng(seed)
  own = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, devices.num_devices)
  bucket = chromosome_lib.Layout(graph.num_ops + extra_ops,
                                 (graph.num_tensors + 1) if transfer_genes else 0,
                                 devices.num_devices)
  chromosomes = (np.round(rng.random((4, bucket.size)) * 3) / 3).astype(np.float32)
  got = consumer_transfers.bucket_decoder(graph, own, bucket)(chromosomes)
  expected = consumer_transfers.decoder(graph, own)(
      chromosome_lib.from_bucket_batch(own, bucket, chromosomes))
  for name in ("placement", "op_priority", "transfer_priority"):
    np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)


def test_reference_on_a_small_graph():
  """Tensor 0 (op 0's output) is read by ops 1 and 2; tensor 1 (op 1's) by op 2."""
  from regal_datasets.graph import GraphBuilder
  builder = GraphBuilder("fork")
  a = builder.add_op("a", 1.0)
  t0 = builder.add_tensor(a, 4.0)
  b = builder.add_op("b", 1.0)
  builder.add_data_edge(t0, b)
  t1 = builder.add_tensor(b, 4.0)
  c = builder.add_op("c", 1.0)
  builder.add_data_edge(t0, c)
  builder.add_data_edge(t1, c)
  builder.add_tensor(c, 4.0)
  graph = builder.build()
  priority = np.array([0.9, 0.2, 0.7], np.float32)
  # b and c on device 1: tensor 0 goes there with c's priority, the larger of its readers'.
  got = consumer_transfers.transfer_priorities_reference(graph, np.array([0, 1, 1]), priority, 2)
  np.testing.assert_array_equal(got, np.array([[0.0, 0.7], [0.0, 0.7], [0.0, 0.0]], np.float32))
  # b on device 0, c on device 1: tensor 0 to device 1 takes c's only.
  got = consumer_transfers.transfer_priorities_reference(graph, np.array([0, 0, 1]), priority, 2)
  np.testing.assert_array_equal(got, np.array([[0.2, 0.7], [0.0, 0.7], [0.0, 0.0]], np.float32))


def _problem():
  return performance.Problem(sharded.generate("chain_mm", 4, grid_style="2d", size=512),
                             devices_lib.nvlink_two_groups(2), model="wc")


def test_fitness_scores_the_derived_schedule_and_ignores_transfer_genes():
  problem = _problem()
  layout = problem.layout
  chromosomes = np.random.default_rng(1).random((5, layout.size)).astype(np.float32)
  fitness = np.asarray(performance.make_fitness_fn(problem, "consumer")(jnp.asarray(chromosomes)))
  host = performance.host_decoder(problem, "consumer")(chromosomes)  # The bucketed search's.
  for k in range(5):
    direct = chromosome_lib.decode(chromosomes[k], layout)
    transfer = consumer_transfers.transfer_priorities_reference(
        problem.graph, direct.placement, direct.op_priority, layout.num_devices)
    np.testing.assert_array_equal(host.placement[k], direct.placement)
    np.testing.assert_array_equal(host.op_priority[k], direct.op_priority)
    np.testing.assert_array_equal(host.transfer_priority[k], transfer)
    expected = wc_reference.simulate_wc(problem.graph, problem.devices, direct.placement,
                                        direct.op_priority, transfer, dtype=np.float32).makespan
    assert fitness[k] == expected, k
  # The transfer genes are read by nothing: new ones leave every score as it was.
  shuffled = chromosomes.copy()
  shuffled[:, layout.transfer_slice] = np.random.default_rng(2).random(
      (5, layout.transfer_slice.stop - layout.transfer_slice.start))
  np.testing.assert_array_equal(
      np.asarray(performance.make_fitness_fn(problem, "consumer")(jnp.asarray(shuffled))), fitness)
  # ... which the direct decoder reads (the check can fail).
  direct = np.asarray(performance.make_fitness_fn(problem, "direct")(jnp.asarray(chromosomes)))
  assert (direct != fitness).any()
