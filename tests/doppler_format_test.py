"""The Doppler compute_graph importer and exporter, on the four published files."""
import re

import numpy as np
import pytest

from regal_datasets import errors
from regal_datasets import io as graph_io
from regal_datasets.formats import doppler

# Counts and total compute costs as the Doppler repository's reader yields them
# (simulated nodes, edges, sum of compute costs / 1e10 = the all-on-one-device makespan).
REFERENCE = {
    "chain_mm_112nodes.txt": (76, 80, 4800.28),
    "ffnn_192nodes.txt": (180, 208, 226.783),
    "transformer_block_215nodes.txt": (182, 234, 388.678),
    "full_transformer_layer_261nodes.txt": (229, 284, 388.977),
}


def doppler_reader(text: str):
  """The Doppler repository's reader restated in plain Python (regex digit extraction)."""
  lines = text.splitlines(keepends=True)
  inputs = list(map(int, re.findall(r"\d+", lines[1])))
  sources = list(map(int, re.findall(r"\d+", lines[2])))
  targets = list(map(int, re.findall(r"\d+", lines[3])))
  num_node = int(lines[0]) - len(inputs)
  info = [list(map(int, re.findall(r"\d+", lines[4 + i]))) for i in range(num_node)]
  return num_node, sources, targets, info


@pytest.mark.parametrize("file_name", sorted(REFERENCE))
def test_doppler_files_load_like_the_reference_reader(shared_graphs, file_name):
  path = shared_graphs / "doppler" / file_name
  graph = graph_io.load_graph(str(path))
  num_nodes, num_edges, total_compute = REFERENCE[file_name]
  assert graph.num_ops == num_nodes and graph.num_data_edges == num_edges
  assert graph.num_control_edges == 0
  assert round(graph.compute_cost.sum() / 1e10, 3) == pytest.approx(total_compute, abs=1e-3)
  ref_nodes, ref_sources, ref_targets, ref_info = doppler_reader(path.read_text())
  assert graph.num_ops == ref_nodes
  assert graph.edge_src.tolist() == ref_sources and graph.edge_dst.tolist() == ref_targets
  assert graph.compute_cost.tolist() == [row[0] for row in ref_info]
  assert graph.tensor_size.tolist() == [row[1] for row in ref_info]
  assert graph.op_names == tuple(str(i) for i in range(num_nodes))


@pytest.mark.parametrize("file_name", sorted(REFERENCE))
def test_doppler_files_reexport_to_the_same_graph(shared_graphs, tmp_path, file_name):
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / file_name))
  out = tmp_path / "again.txt"
  graph_io.save_graph(graph, str(out))
  again = graph_io.load_graph(str(out), format="doppler")
  assert again.replace(name=graph.name) == graph  # The name comes from the file name.
  # The written file is the original up to whitespace: same counts, ids, edges and costs.
  original = (shared_graphs / "doppler" / file_name).read_text()
  assert doppler_reader(out.read_text()) == doppler_reader(original)


def test_op_type_words_are_kept():
  text = "4\n0,\n0, 1,\n1, 2,\n5,20 einsummable\n6,24,formation\n7,28\n"
  graph = doppler.parse(text)
  assert graph.op_types == ("einsummable", "formation", "")
  assert graph.metadata["doppler_input_ids"] == [0]
  assert doppler.parse(doppler.write_text(graph)) == graph


@pytest.mark.parametrize("text, error, message", [
    ("3\n\n0,\n1,\n", errors.FormatError, "expects 3 node lines after line 4, found 0"),
    ("x\n\n\n\n", errors.FormatError, ":1: expected the node count"),
    ("2\n\n0, 1\n1\n1,4\n1,4\n", errors.FormatError, "2 edge sources but 1 edge targets"),
    ("2\n\n0\n5\n1,4\n1,4\n", errors.UnknownNodeError, "names node 5"),
    ("2\n\n0, 1\n1, 0\n1,4\n1,4\n", errors.CycleError, "has a cycle: '0' -> '1' -> '0'"),
    ("2\n\n0\n1\n1,4\n-1,4\n", errors.FormatError, ":6: expected 'compute_cost,"),
    ("2\n\n0\n1\n1,4\nnan,4\n", errors.FormatError, ":6: expected 'compute_cost,"),
    ("2\n\n0\nq\n1,4\n1,4\n", errors.FormatError, ":4: expected comma-separated node ids"),
    ("1\n0\n\n\n", errors.EmptyGraphError, "leaves no node"),
    ("2\n\n0\n1\n1,4\n1,4\n7,7\n", errors.FormatError, "unexpected text after the 2 node"),
])
def test_malformed_doppler_text(text, error, message):
  with pytest.raises(error, match=re.escape(message)):
    doppler.parse(text, "bad.txt")


def test_export_refuses_what_the_format_cannot_say():
  graph = doppler.parse("2\n\n0\n1\n1,4\n1,4\n")
  with pytest.raises(errors.FormatError, match="must be integers"):
    doppler.write_text(graph.replace(compute_cost=np.array([1.5, 1.0])))
  with pytest.raises(errors.FormatError, match="control edges"):
    doppler.write_text(graph.replace(control_edge_src=[0], control_edge_dst=[1]))
