"""datasets.coarsen: acyclic groups, QuickP's rules, and coarse solutions that map back."""
import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

import graph_strategies
from datasets import coarsen, errors
from datasets import devices as devices_lib
from datasets.graph import Graph, validate
from regal import baselines, performance


def _check(graph: Graph, coarsening: coarsen.Coarsening) -> Graph:
  assert sorted(op for group in coarsening.members for op in group) == list(range(graph.num_ops))
  for group, members in enumerate(coarsening.members):
    assert all(coarsening.group_of[op] == group for op in members)
  coarse = coarsen.coarse_graph(graph, coarsening)  # Graph() refuses a cycle.
  validate(coarse)
  assert np.isclose(coarse.compute_cost.sum(), graph.compute_cost.sum())
  return coarse


@hypothesis.settings(max_examples=80)
@hypothesis.given(graph=graph_strategies.dags(max_ops=30),
                  alpha=st.one_of(st.none(), st.floats(0, 100)),
                  target=st.integers(1, 30))
def test_coarsening_never_creates_a_cycle(graph, alpha, target):
  _check(graph, coarsen.quickp_fusion(graph, alpha))
  heavy = coarsen.heavy_edge_coarsening(graph, target)
  _check(graph, heavy)


def _graph(costs, edges):
  """One tensor per op; edges (producer, consumer)."""
  return Graph(op_names=[f"op{i}" for i in range(len(costs))], op_types=[""] * len(costs),
               compute_cost=costs, extra_memory=np.zeros(len(costs)),
               tensor_producer=np.arange(len(costs)), tensor_size=np.ones(len(costs)),
               data_edge_tensor=[a for a, _ in edges], data_edge_consumer=[b for _, b in edges],
               control_edge_src=[], control_edge_dst=[])


def test_quickp_rules():
  # Every edge of K(2,2) leaves a fan-out and enters a fan-in: nothing fuses, however cheap.
  crossed = _graph([1, 1, 1, 1], [(0, 2), (0, 3), (1, 2), (1, 3)])
  assert coarsen.quickp_fusion(crossed, alpha=1e9).num_groups == 4
  # A straight line fuses whatever it costs.
  chain = _graph([50, 60, 70], [(0, 1), (1, 2)])
  assert coarsen.quickp_fusion(chain, alpha=0.0).num_groups == 1
  # 0 fans out to 1 and 2, and 2 also reads 3: the edge to the cheap 1 fuses; the edges into
  # the costly fan-in 2 do not.
  fork = _graph([50, 1, 60, 40], [(0, 1), (0, 2), (3, 2)])
  fused = coarsen.quickp_fusion(fork, alpha=5.0)
  assert fused.num_groups == 3 and fused.group_of[0] == fused.group_of[1]
  assert coarsen.default_alpha(fork) == pytest.approx(np.percentile([50, 1, 60, 40], 90))


def test_heavy_edges_go_first():
  graph = Graph(op_names=["a", "b", "c"], op_types=[""] * 3, compute_cost=[1, 1, 1],
                extra_memory=np.zeros(3), tensor_producer=[0, 1], tensor_size=[100, 1],
                data_edge_tensor=[0, 1], data_edge_consumer=[1, 2], control_edge_src=[],
                control_edge_dst=[])
  coarsening = coarsen.heavy_edge_coarsening(graph, target=2)
  assert coarsening.group_of.tolist() == [0, 0, 1]
  with pytest.raises(errors.ConfigError, match="at least 1"):
    coarsen.heavy_edge_coarsening(graph, 0)


@hypothesis.settings(max_examples=40)
@hypothesis.given(graph=graph_strategies.dags(max_ops=20), target=st.integers(1, 6),
                  data=st.data())
def test_a_coarse_placement_maps_back(graph, target, data):
  coarsening = coarsen.heavy_edge_coarsening(graph, target)
  coarse = coarsen.coarse_graph(graph, coarsening)
  placement = np.array(data.draw(st.lists(st.integers(0, 1), min_size=coarse.num_ops,
                                          max_size=coarse.num_ops)))
  order = coarse.topological_order
  ops_placement, ops_order = coarsen.expand(coarsening, placement, order)
  assert sorted(ops_order.tolist()) == list(range(graph.num_ops))
  position = np.empty(graph.num_ops, int)
  position[ops_order] = np.arange(graph.num_ops)
  assert all(position[a] < position[b] for a, b in zip(graph.edge_src, graph.edge_dst))
  for op in range(graph.num_ops):
    assert ops_placement[op] == placement[coarsening.group_of[op]]


@hypothesis.settings(max_examples=40)
@hypothesis.given(graph=graph_strategies.dags(max_ops=15), target=st.integers(1, 4))
def test_one_group_per_device_keeps_the_wc_makespan(graph, target):
  """With each device holding one group, its ops run back to back as the group op does
  (transfers inside a group cost nothing): the WC makespans agree when groups are
  independent; otherwise an op may start before its whole predecessor group has finished,
  so the original can only be faster."""
  coarsening = coarsen.heavy_edge_coarsening(graph, target)
  coarse = coarsen.coarse_graph(graph, coarsening)
  hypothesis.assume(coarse.num_ops <= 4)
  devices = devices_lib.homogeneous(coarse.num_ops)
  placement = np.arange(coarse.num_ops)
  order = coarse.topological_order
  coarse_value = baselines.score(performance.Problem(coarse, devices), placement, order)[0]
  ops_placement, ops_order = coarsen.expand(coarsening, placement, order)
  original_value = baselines.score(performance.Problem(graph, devices), ops_placement,
                                   ops_order)[0]
  if coarse.num_edges == 0:
    assert original_value == pytest.approx(coarse_value)
  else:
    assert original_value <= coarse_value + 1e-6
