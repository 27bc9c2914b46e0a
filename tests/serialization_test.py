"""regal's JSON graph format and the compact dataset store."""
import json
import re

import numpy as np
import pytest
from graph_strategies import dags
from hypothesis import given
from hypothesis import strategies as st

from regal_datasets import errors
from regal_datasets import io as graph_io
from regal_datasets import serialization


@given(dags(integer=False))
def test_json_round_trip_is_exact(graph):
  assert serialization.graph_from_json(serialization.graph_to_json(graph)) == graph


@given(st.lists(dags(max_ops=8), min_size=0, max_size=4))
def test_store_round_trip_is_exact(tmp_path_factory, graphs):
  path = tmp_path_factory.mktemp("store") / "graphs.npz"
  serialization.save_graphs(str(path), graphs)
  assert serialization.load_graphs(str(path)) == graphs


def _document(**changes):
  doc = {"format": "regal.graph", "version": 1, "name": "g",
         "ops": [{"name": "a", "compute_cost": 1}, {"name": "b", "compute_cost": 2}],
         "tensors": [{"producer": "a", "size": 4}],
         "data_edges": [{"tensor": 0, "consumer": "b"}], "control_edges": []}
  doc.update(changes)
  return json.dumps(doc)


def test_json_minimal_document_defaults():
  graph = serialization.graph_from_json(_document())
  assert graph.op_types == ("", "") and graph.extra_memory.tolist() == [0, 0]
  assert graph.edge_src.tolist() == [0] and graph.edge_dst.tolist() == [1]


@pytest.mark.parametrize("text, error, message", [
    ("{", errors.FormatError, "not valid JSON"),
    ('{"ops": []}', errors.FormatError, 'not a regal graph (expected "format"'),
    (_document(version=9), errors.FormatError, "unsupported regal graph version 9"),
    (_document(tensors=[{"producer": "zz", "size": 1}]), errors.UnknownNodeError,
     "tensors[0]: graph 'g': unknown op 'zz'"),
    (_document(control_edges=[{"src": "b", "dst": "q"}]), errors.UnknownNodeError,
     "unknown op 'q'"),
    (_document(data_edges=[{"tensor": 5, "consumer": "b"}]), errors.UnknownNodeError,
     "unknown tensor 5"),
    (_document(control_edges=[{"src": "b", "dst": "a"}]), errors.CycleError,
     "has a cycle: 'a' -> 'b' -> 'a'"),
    (_document(ops=[{"name": "a", "compute_cost": -1}, {"name": "b"}]),
     errors.InvalidCostError, "op 'a' has compute cost -1.0"),
    (_document(ops=[{"name": "a", "compute_cost": "NaN"}, {"name": "b"}]), errors.FormatError,
     "ops[0]: expected a number, got 'NaN'"),
    (_document(ops=[{"name": "a", "compute_cost": float("nan")}, {"name": "b"}]),
     errors.InvalidCostError, "compute cost nan"),
    (_document(tensors=[{"producer": "a"}]), errors.FormatError,
     "tensors[0] lacks the key 'size'"),
    (_document(ops=[]), errors.UnknownNodeError, "unknown op 'a'"),
    (_document(ops=[], tensors=[], data_edges=[]), errors.EmptyGraphError, "has no ops"),
    (_document(ops={"a": 1}), errors.FormatError, "'ops' must be a list of objects"),
])
def test_malformed_json(text, error, message):
  with pytest.raises(error, match=re.escape(message)):
    serialization.graph_from_json(text, "bad.json")


def test_store_rejects_other_files(tmp_path):
  path = tmp_path / "junk.npz"
  path.write_bytes(b"not a zip")
  with pytest.raises(errors.FormatError, match="not a regal dataset file"):
    serialization.load_graphs(str(path))


def _one_output_per_op():
  """A graph every format can express."""
  return serialization.graph_from_json(_document(
      tensors=[{"producer": "a", "size": 4}, {"producer": "b", "size": 0}]))


def test_format_sniffing_and_override(tmp_path):
  graph = _one_output_per_op()
  for fmt in ("json", "costgraph", "doppler"):
    path = tmp_path / f"graph.{fmt}.data"  # An extension that says nothing.
    path.write_text(graph_io.graph_to_text(graph, fmt))
    assert graph_io.sniff_format(path.read_text()) == fmt
    loaded = graph_io.load_graph(str(path))
    assert loaded.edge_src.tolist() == [0] and loaded.compute_cost.tolist() == [1, 2]
    assert graph_io.load_graph(str(path), format=fmt).num_ops == 2
  assert graph_io.format_from_extension("x.pb.txt") == "costgraph"
  assert graph_io.format_from_extension("x.TXT") == "doppler"
  with pytest.raises(errors.FormatError, match="cannot tell the graph format"):
    graph_io.parse_graph("hello", "mystery.bin")
  with pytest.raises(errors.FormatError, match="unknown graph format 'onnx'"):
    graph_io.load_graph(str(tmp_path / "graph.json.data"), format="onnx")
  with pytest.raises(errors.FormatError, match="no such file"):
    graph_io.load_graph(str(tmp_path / "missing.json"))


def test_save_is_atomic_and_leaves_no_partial_file(tmp_path):
  graph = _one_output_per_op()
  target = tmp_path / "out.txt"
  with pytest.raises(errors.FormatError):
    graph_io.save_graph(graph.replace(compute_cost=np.array([0.5, 1.0])), str(target))
  assert list(tmp_path.iterdir()) == []
  graph_io.save_graph(graph, str(target))
  assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_tensors_consumers_are_its_data_edges():
  """The shorthand for hand-written files reads as the written form does."""
  from regal_datasets import serialization
  ops = [{"name": name, "compute_cost": 1.0} for name in "abc"]
  short = {"format": "regal.graph", "version": 1, "ops": ops,
           "tensors": [{"producer": "a", "size": 2.0, "consumers": ["b", "c"]}]}
  long = {"format": "regal.graph", "version": 1, "ops": ops,
          "tensors": [{"producer": "a", "size": 2.0}],
          "data_edges": [{"tensor": 0, "consumer": "b"}, {"tensor": 0, "consumer": "c"}]}
  assert serialization.graph_to_json(serialization.graph_from_json_dict(short)) == \
      serialization.graph_to_json(serialization.graph_from_json_dict(long))


@pytest.mark.parametrize("where, key", [("tensors", "consumer"), ("ops", "computecost"),
                                        ("top", "edges")])
def test_a_key_the_format_lacks_is_refused_not_dropped(where, key):
  """A misspelt key once vanished: `"consumer"` on a tensor gave a graph without its edges,
  and a confident plan for the wrong graph."""
  from regal_datasets import errors, serialization
  data = {"format": "regal.graph", "version": 1,
          "ops": [{"name": "a", "compute_cost": 1.0}, {"name": "b", "compute_cost": 1.0}],
          "tensors": [{"producer": "a", "size": 2.0}]}
  record = data if where == "top" else data[where][0]
  record[key] = ["b"]
  with pytest.raises(errors.FormatError, match=f"has the key '{key}', which the format does "
                                               f"not have"):
    serialization.graph_from_json_dict(data, "g.json")
