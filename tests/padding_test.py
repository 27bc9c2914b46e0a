"""Padding graphs to size buckets for JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

from datasets import padding
from graph_strategies import dags


@given(st.integers(1, 100_000))
def test_bucket_is_the_smallest_fitting_size(count):
  size = padding.bucket_size(count)
  assert size >= count and size >= padding.MIN_BUCKET
  assert size <= max(padding.MIN_BUCKET, 1.25 * count + 1)
  # Four buckets per doubling: m * 2**k with m in 4..7.
  mantissa = size
  while mantissa >= 8:
    mantissa //= 2
  assert mantissa in (4, 5, 6, 7) or size == padding.MIN_BUCKET


def test_bucket_examples():
  assert [padding.bucket_size(n) for n in (1, 8, 9, 17, 100, 202, 1000)] == [
      8, 8, 10, 20, 112, 224, 1024]


@given(dags(max_ops=20))
def test_padded_arrays_hold_the_graph(graph):
  padded = padding.pad_graph(graph)
  n = graph.num_ops
  assert padded.op_mask.sum() == n and padded.op_mask[:n].all()
  np.testing.assert_array_equal(padded.compute_cost[:n], graph.compute_cost)
  assert (padded.compute_cost[n:] == 0).all()
  np.testing.assert_array_equal(padded.topological_order[:n], graph.topological_order)
  assert sorted(padded.topological_order.tolist()) == list(range(padded.shape[0]))
  m = graph.num_edges
  np.testing.assert_array_equal(padded.edge_src[:m], graph.edge_src)
  np.testing.assert_array_equal(padded.edge_dst[:m], graph.edge_dst)
  np.testing.assert_array_equal(padded.edge_bytes[:m], graph.edge_bytes)
  assert not padded.edge_mask[m:].any() and (padded.edge_bytes[m:] == 0).all()
  assert padded.tensor_mask.sum() == graph.num_tensors
  assert int(padded.num_edges) == m


def test_same_bucket_compiles_once():
  from datasets import synthetic
  graphs = [synthetic.generate(np.random.default_rng(i)) for i in range(4)]
  batch = padding.pad_batch(graphs)
  assert batch.op_mask.shape == (4, batch.shape[0])
  traces = []

  @jax.jit
  def total_cost(padded):
    traces.append(1)
    return jnp.sum(jnp.where(padded.op_mask, padded.compute_cost, 0.0))

  shape = batch.shape
  for graph in graphs:
    value = total_cost(padding.pad_graph(graph, shape))
    assert value == pytest.approx(graph.compute_cost.sum(), rel=1e-6)
  assert len(traces) == 1


def test_too_small_shape_is_refused():
  from datasets import synthetic
  graph = synthetic.generate(np.random.default_rng(0))
  with pytest.raises(ValueError, match="cannot pad"):
    padding.pad_graph(graph, (8, 8, 8, 8))
