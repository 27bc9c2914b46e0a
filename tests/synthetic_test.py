"""REGAL's synthetic generator: structure (hypothesis) and distributions (500 graphs)."""
import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import synthetic


@settings(max_examples=60)
@given(st.integers(0, 2**32 - 1), st.sampled_from(synthetic.TOPOLOGIES))
def test_every_graph_is_a_dag_with_one_source_and_one_sink(seed, topology):
  graph = synthetic.generate(np.random.default_rng(seed), topology=topology)
  # Constructing a Graph validates it (acyclic, finite non-negative costs, known ids).
  assert len(graph.topological_order) == graph.num_ops
  assert np.flatnonzero(graph.in_degree == 0).tolist() == [0]
  assert np.flatnonzero(graph.out_degree == 0).tolist() == [graph.num_ops - 1]
  assert graph.compute_cost[0] == 0 and graph.compute_cost[-1] == 0
  assert graph.num_outputs[0] == 0 and graph.num_outputs[-1] == 0
  assert graph.metadata["topology"] == topology
  # Ops are numbered along the random orientation: every edge goes up in index.
  assert (graph.edge_src < graph.edge_dst).all()
  assert (graph.tensor_size >= 1).all() and (graph.tensor_size == np.round(graph.tensor_size)).all()


def test_same_seed_same_graph_and_float_mode():
  assert synthetic.generate(np.random.default_rng(7)) == synthetic.generate(
      np.random.default_rng(7))
  graph = synthetic.generate(np.random.default_rng(7),
                             synthetic.SyntheticSpec(integer=False))
  assert (graph.tensor_size != np.round(graph.tensor_size)).any()


@pytest.fixture(scope="module")
def five_hundred():
  return [synthetic.generate(np.random.default_rng([2020, i])) for i in range(500)]


def test_distributions_match_the_specification(five_hundred):
  graphs = five_hundred
  core = np.array([g.num_ops - 2 for g in graphs])
  # n ~ Uniform{50..200}: mean 125, standard error 43.6 / sqrt(500) = 1.95.
  assert core.min() >= 50 and core.max() <= 200
  assert abs(core.mean() - 125) < 6
  assert core.min() < 60 and core.max() > 190
  assert np.array_equal(core, [g.metadata["core_nodes"] for g in graphs])

  outputs = np.concatenate([g.num_outputs[1:-1] for g in graphs])  # ~63k draws.
  mix = np.bincount(outputs, minlength=3) / len(outputs)
  np.testing.assert_allclose(mix, [0.1, 0.8, 0.1], atol=0.01)

  sizes = np.concatenate([g.tensor_size for g in graphs])
  assert abs(sizes.mean() - 50) < 0.5 and abs(sizes.std() - 10) < 0.5

  # A dependency on an op with outputs is data with probability 0.8; otherwise control.
  from_producer = np.concatenate([g.num_outputs[g.edge_src] > 0 for g in graphs])
  is_data = np.concatenate([~g.edge_is_control for g in graphs])
  assert not is_data[~from_producer].any()
  assert abs(is_data[from_producer].mean() - 0.8) < 0.01

  # Op time = (input + output bytes) x (1 + r), r ~ Normal(0, 0.1), then rounded.
  ratios = []
  for g in graphs:
    touched = (np.bincount(g.data_edge_consumer, g.tensor_size[g.data_edge_tensor], g.num_ops)
               + np.bincount(g.tensor_producer, g.tensor_size, g.num_ops))
    keep = touched[1:-1] > 100  # Large enough that rounding barely moves the ratio.
    ratios.append(g.compute_cost[1:-1][keep] / touched[1:-1][keep])
  ratios = np.concatenate(ratios)
  assert abs(ratios.mean() - 1.0) < 0.01 and abs(ratios.std() - 0.1) < 0.01

  families = collections.Counter(g.metadata["topology"] for g in graphs)
  assert set(families) == set(synthetic.TOPOLOGIES)
  assert all(90 <= count <= 160 for count in families.values())


def test_topology_families_have_their_shape(five_hundred):
  by_family = collections.defaultdict(list)
  for g in five_hundred:
    core_edges = int(np.sum((g.edge_src > 0) & (g.edge_dst < g.num_ops - 1)))
    by_family[g.metadata["topology"]].append((g.num_ops - 2, core_edges))
  # Barabasi-Albert with m = 2 has exactly 2 (n - 2) edges; Watts-Strogatz with k = 4 has 2n.
  assert all(e == 2 * (n - 2) for n, e in by_family["barabasi_albert"])
  assert all(e == 2 * n for n, e in by_family["watts_strogatz"])
  # Erdos-Renyi with p = 0.05 has about 0.05 n (n - 1) / 2 edges.
  expected = sum(0.05 * n * (n - 1) / 2 for n, _ in by_family["erdos_renyi"])
  actual = sum(e for _, e in by_family["erdos_renyi"])
  assert abs(actual / expected - 1) < 0.05


def test_augmentation_scales_each_cost_independently():
  graph = synthetic.generate(np.random.default_rng(3))
  copy = synthetic.augment(graph, np.random.default_rng(4))
  costly = graph.compute_cost > 0
  op_factor = copy.compute_cost[costly] / graph.compute_cost[costly]
  tensor_factor = copy.tensor_size / graph.tensor_size
  for factor in (op_factor, tensor_factor):
    assert factor.min() >= 0.5 and factor.max() <= 1.5
    assert len(np.unique(np.round(factor, 9))) > len(factor) // 2
  assert np.array_equal(copy.edge_src, graph.edge_src)
  assert copy.metadata["augmented_from"] == graph.name
