"""DOT task graphs (Sinnen's set) and Kasahara's STG files: import, export, errors, and the
ordered delay model reproducing their proven optima through CP-SAT."""
import csv

import numpy as np
import pytest
from cli_test import assert_one_line_error, run

from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets.formats import dot
from regal_datasets import io as graph_io
from regal.baselines import exact
from regal.scoring import performance
from regal.scoring.delay import reference as delay_reference

DOT = '''// a comment
digraph "tiny" {
  /* tasks */
  "a" [Weight=3, Shape=box];
  b [Weight=2];
  "c" [Weight=4]
  a -> b [Weight=5, Label="x"];
  "a" -> "c" [Weight=1];
  b -> c [Weight=0];
}
'''


def test_dot_reads_tasks_edges_and_ignores_other_attributes():
  graph = graph_io.parse_graph(DOT, "tiny.dot")
  assert graph.op_names == ("a", "b", "c") and graph.compute_cost.tolist() == [3, 2, 4]
  assert graph.tensor_producer.tolist() == [0, 0, 1]
  assert graph.tensor_size.tolist() == [5, 1, 0]
  assert graph.data_edge_consumer.tolist() == [1, 2, 2] and graph.name == "tiny"
  # Quoted or bare ids are the same task.
  bare = graph_io.parse_graph(DOT.replace('"', ""), "tiny.dot")
  assert bare.op_names == graph.op_names and bare.tensor_size.tolist() == [5, 1, 0]
  devices = devices_lib.homogeneous(2)
  # a on 0, b and c on 1: b waits 3 + 5, c waits for b (8 + 2) and a's tensor (3 + 1).
  schedule = delay_reference.simulate_delay(graph, devices, np.array([0, 1, 1]))
  assert schedule.op_end.tolist() == [3, 10, 14]
  # A name given by the caller replaces the file's graph id, which is still read past.
  named = dot.parse(DOT, "tiny.dot", name="renamed")
  assert named.name == "renamed" and named.op_names == graph.op_names


def test_dot_chains_repeated_edges_and_defaults():
  graph = graph_io.parse_graph('digraph { node [Weight=1]; edge [Weight=2]; x -> y -> z; '
                               'x -> y [Weight=7]; z [Weight=9] }', "g.dot")
  assert graph.compute_cost.tolist() == [1, 1, 9]
  assert graph.tensor_size.tolist() == [2, 2, 7]
  assert graph.tensor_producer.tolist() == [0, 1, 0]


@pytest.mark.parametrize("text, message", [
    ('digraph { a [Weight=1]; b; a -> b [Weight=1]; }', "task 'b' has no Weight"),
    ('digraph { a [Weight=1]; b [Weight=1]; a -> b; }', "edge 'a' -> 'b' has no Weight"),
    ('digraph { a [Weight=-1]; }', "must be a finite non-negative number"),
    ('digraph { a [Weight=x1]; }', "is not a number"),
    ('digraph { a [Weight=1]; b [Weight=1]; a -> b [Weight=1]; b -> a [Weight=1]; }',
     "has a cycle"),
    ('digraph { a [Weight=1]; ', "ends before the graph's closing"),
    ('digraph { subgraph s { a [Weight=1]; } }', "subgraphs are not supported"),
    ('digraph { a [Weight=1]; b [Weight=1]; a -- b [Weight=1]; }', "undirected edge"),
    ('digraph { a [Weight=1]; } extra', "after the graph's closing"),
    ('digraph { }', "has no tasks"),
    ('digraph { a [Weight=1] ! }', "unexpected character '!'"),
])
def test_malformed_dot_files_get_one_line_errors(text, message):
  with pytest.raises(errors.RegalError, match=message) as caught:
    graph_io.parse_graph(text, "bad.dot")
  assert "\n" not in str(caught.value)


STG = """  3
  0  0  0
  1  4  1  0
  2  2  1  0
  3  5  2  1  2
  4  0  1  3
#comment
"""


def test_stg_reads_precedence_only_and_writes_back():
  graph = graph_io.parse_graph(STG, "g.stg")
  assert graph.num_ops == 5 and graph.compute_cost.tolist() == [0, 4, 2, 5, 0]
  assert graph.num_tensors == 0 and graph.num_control_edges == 5
  back = graph_io.parse_graph(graph_io.graph_to_text(graph, "stg"), "back.stg")
  assert back.op_names == graph.op_names
  assert sorted(zip(back.edge_src.tolist(), back.edge_dst.tolist())) == sorted(
      zip(graph.edge_src.tolist(), graph.edge_dst.tolist()))
  # Two devices: 1 and 2 side by side (4), then 3 (5): 9; no communication costs.
  schedule = delay_reference.simulate_delay(graph, devices_lib.homogeneous(2),
                                            np.array([0, 0, 1, 1, 0]))
  assert schedule.makespan == 9


@pytest.mark.parametrize("text, message", [
    ("  3\n  0 0 0\n", "means 5 task lines"),
    ("  1\n  0 0 0\n  1 4 2 0\n  2 0 1 1\n", "says 2 predecessors but lists 1"),
    ("  1\n  0 0 0\n  1 4 1 7\n  2 0 1 1\n", "names predecessor 7"),
    ("  1\n  0 0 0\n  2 4 1 0\n  2 0 1 1\n", "expected task 1, found 2"),
    ("  1\n  0 0 0\n  1 x 1 0\n  2 0 1 1\n", "cost must be a non-negative integer"),
    ("  1\n  0 0 1 2\n  1 4 1 0\n  2 0 1 1\n", "has a cycle"),
])
def test_malformed_stg_files_get_one_line_errors(text, message):
  with pytest.raises(errors.RegalError, match=message):
    graph_io.parse_graph(text, "bad.stg")


def test_formats_are_sniffed_from_content():
  assert graph_io.sniff_format(DOT) == "dot"
  assert graph_io.sniff_format(STG) == "stg"
  assert graph_io.sniff_format("2\n\n0\n1\n1,4\n1,4\n") == "doppler"


def test_convert_dot_to_json_and_back(tmp_path, shared_graphs):
  source = next(iter(sorted((shared_graphs / "sinnen").glob("*.dot"))))
  json_file, dot_file = tmp_path / "g.json", tmp_path / "g.dot"
  assert run("regal_datasets.convert", "--graph", str(source), "--out", str(json_file)).returncode == 0
  result = run("regal_datasets.convert", "--graph", str(json_file), "--out", str(dot_file))
  assert result.returncode == 0, result.stderr
  original, back = graph_io.load_graph(str(source)), graph_io.load_graph(str(dot_file))
  assert back.op_names == original.op_names
  np.testing.assert_array_equal(back.tensor_size, original.tensor_size)
  np.testing.assert_array_equal(back.compute_cost, original.compute_cost)
  bad = tmp_path / "bad.dot"
  bad.write_text("digraph { a [Weight=1]; b [Weight=1]; a -> b; }")
  assert_one_line_error(run("regal_datasets.convert", "--graph", str(bad)), "has no Weight")


def test_every_shared_task_graph_loads(shared_graphs):
  dot_files = sorted((shared_graphs / "sinnen").glob("*.dot"))
  stg_files = sorted((shared_graphs / "stg" / "50").glob("*.stg"))
  assert len(dot_files) == 1118 and len(stg_files) == 180
  for path in dot_files:
    graph = graph_io.load_graph(str(path))
    assert graph.num_ops in (10, 16, 21, 30) and graph.num_control_edges == 0
  for path in stg_files:
    assert graph_io.load_graph(str(path)).num_ops == 52


def optimal_rows(shared_graphs):
  with open(shared_graphs / "sinnen" / "optimal.csv") as f:
    return list(csv.DictReader(f))


def test_cpsat_reproduces_proven_optima_of_ten_task_graphs(shared_graphs):
  """A sample of the 10-task graphs (all of them run in regal_experiments.task_graph_table): CP-SAT,
  run to proven optimality on the ordered delay model, finds exactly the A* optimum."""
  rows = [row for row in optimal_rows(shared_graphs) if row["tasks"] == "10"]
  sample = [rows[k] for k in np.random.default_rng(0).choice(len(rows), 6, replace=False)]
  for row in sample:
    graph = graph_io.load_graph(str(shared_graphs / "sinnen" / row["file"]))
    problem = performance.Problem(graph, devices_lib.homogeneous(int(row["processors"])),
                                  model="delay")
    result = exact.cpsat(problem, time_limit=60)
    assert result.details["status"] == "OPTIMAL", row["file"]
    assert result.objective == float(row["optimal_length"]), row["file"]


def test_writers_refuse_what_their_format_cannot_hold(shared_graphs):
  doppler_graph = graph_io.load_graph(str(shared_graphs / "doppler" / "chain_mm_112nodes.txt"))
  with pytest.raises(errors.FormatError, match="readers; a DOT task graph gives each edge"):
    graph_io.graph_to_text(doppler_graph, "dot")
  with pytest.raises(errors.FormatError, match="no communication costs"):
    graph_io.graph_to_text(doppler_graph, "stg")


@pytest.mark.parametrize("path", ["sinnen", "stg"])
def test_round_trip_through_the_writer_keeps_every_makespan(shared_graphs, path):
  source = (sorted((shared_graphs / "sinnen").glob("*.dot"))[7] if path == "sinnen"
            else sorted((shared_graphs / "stg" / "50").glob("*.stg"))[3])
  graph = graph_io.load_graph(str(source))
  format_name = "dot" if path == "sinnen" else "stg"
  back = graph_io.parse_graph(graph_io.graph_to_text(graph, format_name), f"back.{format_name}")
  rng = np.random.default_rng(0)
  devices = devices_lib.homogeneous(3)
  for _ in range(5):
    placement = rng.integers(0, 3, graph.num_ops)
    priority = rng.random(graph.num_ops)
    by_name = dict(zip(back.op_names, range(back.num_ops)))
    moved = np.empty(back.num_ops, np.int64)
    moved_priority = np.empty(back.num_ops)
    for op, name in enumerate(graph.op_names):
      moved[by_name[name]], moved_priority[by_name[name]] = placement[op], priority[op]
    assert delay_reference.simulate_delay(graph, devices, placement, priority).makespan == \
        delay_reference.simulate_delay(back, devices, moved, moved_priority).makespan
