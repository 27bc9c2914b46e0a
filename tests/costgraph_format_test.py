"""The TensorFlow CostGraphDef (protobuf text) importer and exporter."""
import re

import pytest

from regal_datasets import errors
from regal_datasets import io as graph_io
from regal_datasets.formats import costgraph, pbtxt

# Ports, several outputs, control inputs, a port -1 control dependency, a forward reference,
# temporary memory, and fields the importer ignores (shape, dtype, device, comments).
HAND_MADE = """
# A hand-made graph.
node {
  name: "x"
  id: 10
  output_info { size: 8 alias_input_port: -1 shape { dim { size: 2 } } dtype: DT_FLOAT }
  output_info { size: 16 }
  compute_cost: 3
  device: "/cpu:0"
}
node {
  name: "y"
  id: 11
  input_info { preceding_node: 10 preceding_port: 1 }
  input_info { preceding_node: 10 }
  input_info { preceding_node: 12 preceding_port: -1 }
  output_info { size: 4 }
  compute_cost: 5
  temporary_memory_size: 100
}
node {
  name: "z"
  id: 12
  control_input: 10
  compute_cost: 1
}
node {
  name: "w"
  id: 13
  input_info { preceding_node: 11 preceding_port: 0 }
  input_info: { preceding_node: 10, preceding_port: 1 }
  control_input: [12, 11]
}
"""


def test_hand_made_costgraph():
  graph = costgraph.parse(HAND_MADE, "hand.pbtxt")
  assert graph.op_names == ("x", "y", "z", "w")
  assert graph.metadata["costgraph_ids"] == [10, 11, 12, 13]
  assert graph.compute_cost.tolist() == [3, 5, 1, 0]
  assert graph.extra_memory.tolist() == [0, 100, 0, 0]
  assert graph.tensor_producer.tolist() == [0, 0, 1]
  assert graph.tensor_size.tolist() == [8, 16, 4]
  assert graph.tensor_port.tolist() == [0, 1, 0]
  assert list(zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist())) == [
      (1, 1), (0, 1), (2, 3), (1, 3)]
  assert sorted(zip(graph.control_edge_src.tolist(), graph.control_edge_dst.tolist())) == [
      (0, 2), (1, 3), (2, 1), (2, 3)]
  assert graph.topological_order.tolist() == [0, 2, 1, 3]


def test_costgraph_round_trip():
  graph = costgraph.parse(HAND_MADE, "hand.pbtxt")
  again = costgraph.parse(costgraph.write_text(graph), "hand.pbtxt")
  # A port -1 input comes back as a control_input: same dependency, maybe another position.
  assert again.replace(control_edge_src=graph.control_edge_src,
                       control_edge_dst=graph.control_edge_dst) == graph
  assert sorted(zip(again.control_edge_src, again.control_edge_dst)) == sorted(
      zip(graph.control_edge_src, graph.control_edge_dst))


def test_regal_readme_example(shared_graphs):
  graph = graph_io.load_graph(str(shared_graphs / "costgraph" / "regal_readme_example.pbtxt"))
  assert graph.op_names == ("_SOURCE", "node_0", "node_1", "node_2", "node_3")
  assert graph.compute_cost.tolist() == [0, 0, 58, 47, 58]
  assert graph.tensor_size.tolist() == [70, 52, 55]
  assert graph.tensor_producer.tolist() == [2, 3, 4]
  # node_3 reads port 0 of the node with id 2 (node_1).
  assert graph.data_edge_tensor.tolist() == [0] and graph.data_edge_consumer.tolist() == [4]
  assert graph.control_edge_src.tolist() == [0, 0, 0, 0]
  assert graph.control_edge_dst.tolist() == [1, 2, 3, 4]
  assert costgraph.parse(costgraph.write_text(graph), "again").replace(
      name=graph.name) == graph


@pytest.mark.parametrize("text, error, message", [
    ('node { name: "a" id: 1 input_info { preceding_node: 7 } }', errors.UnknownNodeError,
     "node 'a' refers to unknown node id 7"),
    ('node { name: "a" id: 1 output_info { size: 3 } } node { name: "b" id: 2 '
     'input_info { preceding_node: 1 preceding_port: 2 } }', errors.UnknownNodeError,
     "reads port 2 of node 'a', which has 1 outputs"),
    ('node { name: "a" id: 1 } node { name: "b" id: 1 }', errors.DuplicateNameError,
     "duplicate node id 1"),
    ('node { name: "a" id: 1 } node { name: "a" id: 2 }', errors.DuplicateNameError,
     "duplicate op name 'a'"),
    ('node { name: "a" id: 1 control_input: 2 } node { name: "b" id: 2 control_input: 1 }',
     errors.CycleError, "has a cycle: 'a' -> 'b' -> 'a'"),
    ('node { name: "a" compute_cost: -5 }', errors.InvalidCostError,
     "op 'a' has compute cost -5.0"),
    ('node { name: "a" output_info { size: nan } }', errors.InvalidCostError, "tensor size nan"),
    ('node { name: "a" compute_cost: "fast" }', errors.FormatError,
     "field 'compute_cost' should be float"),
    ('node { name: "a" ', errors.FormatError, "missing '}' at end of file"),
    ('node { name: "a" } }', errors.FormatError, "expected a field name, found '}'"),
    ('node { name: "a" @ }', errors.FormatError, "unexpected text '@ }'"),
    ('version: 3', errors.EmptyGraphError, "no 'node' entries"),
])
def test_malformed_costgraph(text, error, message):
  with pytest.raises(error, match=re.escape(message)):
    costgraph.parse(text, "bad.pbtxt")


def test_pbtxt_scalars_and_nesting():
  parsed = pbtxt.parse('a: 1 b: -2.5e1 c: "q\\"uote" d: true e: DT_FLOAT f < g: 0x1F > '
                       'h: [1, 2] s: "ab" "cd"')
  assert parsed == {"a": [1], "b": [-25.0], "c": ['q"uote'], "d": [True], "e": ["DT_FLOAT"],
                    "f": [{"g": [31]}], "h": [1, 2], "s": ["abcd"]}
  assert pbtxt.parse(pbtxt.format_message(parsed)) == parsed


def test_export_needs_integers():
  graph = costgraph.parse('node { name: "a" compute_cost: 2 }')
  with pytest.raises(errors.FormatError, match="not an integer"):
    costgraph.write_text(graph.replace(compute_cost=[2.5]))
