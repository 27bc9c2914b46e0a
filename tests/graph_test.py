"""The graph model: derived views against networkx, validation errors, builder, equality."""
import math

import networkx as nx
import numpy as np
import pytest
from graph_strategies import dags, shuffled
from hypothesis import given
from hypothesis import strategies as st

from regal_datasets import errors
from regal_datasets.graph import Graph, GraphBuilder, find_cycle


def to_networkx(graph: Graph):
  """A `networkx.MultiDiGraph` over op indices; one edge per data or control edge (the
  independent reference the graph's derived views are checked against).

  Nodes carry `name`, `op_type`, `compute_cost`, `extra_memory`; edges carry `kind`
  ("data" or "control"), `tensor` (index or None) and `bytes`.
  """
  nx_graph = nx.MultiDiGraph(name=graph.name)
  for op in range(graph.num_ops):
    nx_graph.add_node(op, name=graph.op_names[op], op_type=graph.op_types[op],
                      compute_cost=float(graph.compute_cost[op]),
                      extra_memory=float(graph.extra_memory[op]))
  for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
    nx_graph.add_edge(int(graph.tensor_producer[tensor]), int(consumer), kind="data",
                      tensor=int(tensor), bytes=float(graph.tensor_size[tensor]))
  for src, dst in zip(graph.control_edge_src, graph.control_edge_dst):
    nx_graph.add_edge(int(src), int(dst), kind="control", tensor=None, bytes=0.0)
  return nx_graph


def diamond() -> Graph:
  builder = GraphBuilder("diamond")
  for name, cost in (("a", 1), ("b", 2), ("c", 3), ("d", 4)):
    builder.add_op(name, cost, op_type="Op")
  ab = builder.add_tensor("a", 10)
  builder.add_tensor("a", 20)  # A second, unread output of a.
  builder.add_data_edge(ab, "b")
  builder.add_data_edge(ab, "c")
  builder.add_data_edge(ab, "c")  # Multigraph: c reads the same tensor twice.
  bd = builder.add_tensor("b", 5)
  builder.add_data_edge(bd, "d")
  builder.add_control_edge("c", "d")
  return builder.build()


def test_diamond_views():
  g = diamond()
  assert (g.num_ops, g.num_tensors, g.num_data_edges, g.num_control_edges) == (4, 3, 4, 1)
  assert g.tensor_port.tolist() == [0, 1, 0]
  assert g.num_outputs.tolist() == [2, 1, 0, 0]
  assert g.edge_src.tolist() == [0, 0, 0, 1, 2]
  assert g.edge_dst.tolist() == [1, 2, 2, 3, 3]
  assert g.edge_bytes.tolist() == [10, 10, 10, 5, 0]
  assert g.edge_is_control.tolist() == [False] * 4 + [True]
  assert g.predecessors(3).tolist() == [1, 2]
  assert g.predecessors(2).tolist() == [0]  # Repeated edges count once.
  assert g.successors(0).tolist() == [1, 2]
  assert g.in_degree.tolist() == [0, 1, 1, 2]
  assert g.topological_order.tolist() == [0, 1, 2, 3]


def test_networkx_export_keeps_every_edge():
  nx_graph = to_networkx(diamond())
  assert nx_graph.number_of_nodes() == 4 and nx_graph.number_of_edges() == 5
  assert nx_graph.nodes[3]["name"] == "d" and nx_graph.nodes[3]["compute_cost"] == 4.0
  kinds = sorted(data["kind"] for _, _, data in nx_graph.edges(data=True))
  assert kinds == ["control"] + ["data"] * 4
  assert nx_graph.number_of_edges(0, 2) == 2


@given(dags(max_ops=15))
def test_views_agree_with_networkx(graph):
  nx_graph = to_networkx(graph)
  order = graph.topological_order.tolist()
  assert sorted(order) == list(range(graph.num_ops))
  position = {op: i for i, op in enumerate(order)}
  assert all(position[u] < position[v] for u, v in nx_graph.edges())
  # Among ready ops the lowest index goes first: networkx's lexicographic order is the same.
  assert order == list(nx.lexicographical_topological_sort(nx_graph))
  for op in range(graph.num_ops):
    assert graph.predecessors(op).tolist() == sorted(set(nx_graph.predecessors(op)))
    assert graph.successors(op).tolist() == sorted(set(nx_graph.successors(op)))


@given(dags(max_ops=10), st.randoms(use_true_random=False))
def test_relabelled_graph_has_same_structure(graph, random):
  permutation = np.array(random.sample(range(graph.num_ops), graph.num_ops))
  moved = shuffled(graph, permutation)
  assert nx.is_isomorphic(to_networkx(graph), to_networkx(moved))
  assert sorted(moved.edge_bytes.tolist()) == sorted(graph.edge_bytes.tolist())


def test_equality_and_immutability():
  g = diamond()
  assert g == diamond()
  assert g != g.replace(compute_cost=g.compute_cost + 1)
  assert g != g.replace(name="other")
  with pytest.raises(ValueError):
    g.compute_cost[0] = 5.0
  with pytest.raises(AttributeError):
    g.name = "x"  # type: ignore[misc]


# ----- every bad input gets its own one-line error --------------------------------------------
def _graph(**overrides) -> Graph:
  fields = dict(op_names=["a", "b"], op_types=["", ""], compute_cost=[1.0, 2.0],
                extra_memory=[0.0, 0.0], tensor_producer=[0], tensor_size=[3.0],
                data_edge_tensor=[0], data_edge_consumer=[1], control_edge_src=[],
                control_edge_dst=[], name="g")
  fields.update(overrides)
  return Graph(**fields)


@pytest.mark.parametrize("overrides, error, message", [
    (dict(compute_cost=[1.0, math.nan]), errors.InvalidCostError,
     "op 'b' has compute cost nan"),
    (dict(compute_cost=[-1.0, 2.0]), errors.InvalidCostError, "op 'a' has compute cost -1.0"),
    (dict(compute_cost=[math.inf, 2.0]), errors.InvalidCostError, "compute cost inf"),
    (dict(extra_memory=[0.0, -4.0]), errors.InvalidCostError, "op 'b' has extra memory -4.0"),
    (dict(tensor_size=[math.nan]), errors.InvalidCostError,
     "tensor 0 (produced by 'a') has tensor size nan"),
    (dict(op_names=["a", "a"]), errors.DuplicateNameError, "duplicate op name 'a'"),
    (dict(op_names=[], op_types=[], compute_cost=[], extra_memory=[], tensor_producer=[],
          tensor_size=[], data_edge_tensor=[], data_edge_consumer=[]),
     errors.EmptyGraphError, "graph 'g' has no ops"),
    (dict(tensor_producer=[-1]), errors.MissingProducerError, "tensor 0 has no producer"),
    (dict(tensor_producer=[7]), errors.MissingProducerError, "tensor 0 has no producer"),
    (dict(data_edge_consumer=[5]), errors.UnknownNodeError, "data edge 0 names unknown op 5"),
    (dict(data_edge_tensor=[3]), errors.UnknownNodeError, "reads unknown tensor 3"),
    (dict(control_edge_src=[0], control_edge_dst=[9]), errors.UnknownNodeError,
     "control edge 0 names unknown op 9"),
    (dict(control_edge_src=[1], control_edge_dst=[0]), errors.CycleError,
     "graph 'g' has a cycle: 'a' -> 'b' -> 'a'"),
    (dict(control_edge_src=[1], control_edge_dst=[1]), errors.CycleError,
     "has a cycle: 'b' -> 'b'"),
])
def test_bad_graphs_raise_one_line_errors(overrides, error, message):
  with pytest.raises(error) as info:
    _graph(**overrides)
  assert message in str(info.value)
  assert "\n" not in str(info.value)
  assert isinstance(info.value, errors.RegalError)


def test_builder_rejects_unknown_names():
  builder = GraphBuilder("b")
  builder.add_op("a", 1)
  with pytest.raises(errors.UnknownNodeError, match="unknown op 'zz'"):
    builder.add_control_edge("a", "zz")
  with pytest.raises(errors.UnknownNodeError, match="unknown tensor 4"):
    builder.add_data_edge(4, "a")
  with pytest.raises(errors.DuplicateNameError, match="duplicate op name 'a'"):
    builder.add_op("a", 2)


@given(dags(min_ops=2, max_ops=12), st.data())
def test_cycle_error_names_a_real_cycle(graph, data):
  # Close a cycle by adding an edge from a descendant back to an ancestor.
  nx_graph = to_networkx(graph)
  pairs = [(u, v) for u in range(graph.num_ops) for v in nx.descendants(nx_graph, u)]
  u, v = data.draw(st.sampled_from(pairs)) if pairs else (0, 0)
  cyclic = dict(op_names=graph.op_names, op_types=graph.op_types,
                compute_cost=graph.compute_cost, extra_memory=graph.extra_memory,
                tensor_producer=graph.tensor_producer, tensor_size=graph.tensor_size,
                data_edge_tensor=graph.data_edge_tensor,
                data_edge_consumer=graph.data_edge_consumer,
                control_edge_src=np.append(graph.control_edge_src, v),
                control_edge_dst=np.append(graph.control_edge_dst, u))
  with pytest.raises(errors.CycleError) as info:
    Graph(**cyclic)
  names = [part.strip().strip("'") for part in str(info.value).split(": ", 1)[1].split("->")]
  assert names[0] == names[-1]
  index = {name: i for i, name in enumerate(graph.op_names)}
  looped = nx.MultiDiGraph(nx_graph)
  looped.add_edge(v, u)
  for a, b in zip(names, names[1:]):
    assert looped.has_edge(index[a], index[b]), (a, b)


def test_find_cycle_on_dag_is_empty():
  assert find_cycle(diamond()) == []
