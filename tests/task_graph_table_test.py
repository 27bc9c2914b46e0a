"""regal_experiments.task_graph_table's independent checker and file reader: they must catch every
way a schedule can break the delay model, and read the shared files like the importers."""
import numpy as np
import pytest

from regal_datasets import io as graph_io
from regal_experiments import task_graph_table as table

TASKS = {"a": 2.0, "b": 3.0, "c": 1.0}
EDGES = [("a", "b", 4.0), ("a", "c", 1.0)]


def test_a_valid_schedule_passes_with_its_makespan():
  # a on p0 0-2; b on p1 after a's data (2 + 4) 6-9; c on p0 2-3 (same processor: no delay).
  schedule = {"a": (0, 0.0, 2.0), "b": (1, 6.0, 9.0), "c": (0, 2.0, 3.0)}
  assert table.check_schedule(TASKS, EDGES, schedule) == 9.0


@pytest.mark.parametrize("schedule, message", [
    ({"a": (0, 0.0, 2.0), "b": (1, 5.0, 8.0), "c": (0, 2.0, 3.0)}, "before a's data arrives"),
    ({"a": (0, 0.0, 2.0), "b": (0, 1.0, 4.0), "c": (1, 3.0, 4.0)}, "overlap on processor 0"),
    ({"a": (0, 0.0, 2.0), "b": (1, 6.0, 8.0), "c": (0, 2.0, 3.0)}, "runs 2.0, its cost is 3.0"),
    ({"a": (0, 0.0, 2.0), "b": (1, 6.0, 9.0)}, r"tasks not scheduled: \['c'\]"),
    ({"a": (0, -1.0, 1.0), "b": (1, 6.0, 9.0), "c": (0, 2.0, 3.0)}, "starts before 0"),
])
def test_every_violation_is_caught(schedule, message):
  with pytest.raises(AssertionError, match=message):
    table.check_schedule(TASKS, EDGES, schedule)


def test_the_reader_agrees_with_the_importers(shared_graphs):
  paths = (sorted((shared_graphs / "sinnen").glob("*.dot"))[::150]
           + sorted((shared_graphs / "stg" / "50").glob("*.stg"))[::60])
  for path in paths:
    tasks, edges = table.read_task_graph(str(path))
    graph = graph_io.load_graph(str(path))
    assert tasks == dict(zip(graph.op_names, graph.compute_cost.tolist()))
    imported = sorted((graph.op_names[s], graph.op_names[d], float(b)) for s, d, b in zip(
        graph.edge_src, graph.edge_dst, np.where(graph.edge_is_control, 0.0, graph.edge_bytes)))
    assert sorted(edges) == imported


def test_instances_and_stratified_sample(shared_graphs):
  sinnen = table.sinnen_instances(str(shared_graphs))
  stg = table.stg_instances(str(shared_graphs))
  assert len(sinnen) == 1118 and len(stg) == 720
  assert sum(not i["proven"] for i in stg) == 51
  sample = table.stratified(sinnen, 40)
  assert len(sample) == 40 and len({i["file"] + str(i["processors"]) for i in sample}) == 40
  assert {i["tasks"] for i in sample} == {10, 16, 21, 30}
  assert {i["processors"] for i in sample} == {2, 4, 6, 8}


def test_open_instances_proven_are_listed_with_their_published_bounds():
  def row(file, proven, proven_optimal, makespan, optimum, lower=None):
    out = {"set": "stg", "method": "brkga", "file": file, "processors": 4, "tasks": 50,
           "ccr": 0.0, "seconds": 1.0, "proven": proven, "proven_optimal": proven_optimal,
           "makespan": makespan, "optimum": optimum,
           "gap_pct": 100.0 * (makespan / optimum - 1.0)}
    return out if lower is None else {**out, "published_lower": lower}
  rows = [row("a.stg", True, True, 10.0, 10.0), row("b.stg", False, True, 88.0, 88.0, 83.0),
          row("c.stg", False, False, 98.0, 98.0, 94.0)]
  overall = table.summarize(rows, ["brkga"])["stg"]["overall"]["brkga"]
  assert overall["open_instances"] == 2
  assert overall["open_proven"] == [{"file": "b.stg", "processors": 4, "makespan": 88.0,
                                     "published_lower": 83.0, "published_upper": 88.0}]
  text = "\n".join(table.markdown(table.summarize(rows, ["brkga"]), ["brkga"]))
  assert "proved optimal (its makespan meets its own lower bound): 1 of 2:" in text
  assert "- b.stg on 4 processors: 88 (published bounds 83-88)" in text


def test_constructed_sets_are_written_read_back_and_their_certificates_pass(tmp_path):
  """Each split: 60 instances (5 sizes x 4 processor counts x 3 ratios), train and test
  graphs differ, the DOT files read back by the independent reader as generated, and each
  certificate passes the checker at its optimum."""
  from regal_datasets import benchmarks, constructed
  train = benchmarks.constructed_instances(str(tmp_path / "c"), "constructed_train")
  test = benchmarks.constructed_instances(str(tmp_path / "c"), "constructed_test")
  assert len(train) == len(test) == 60 and not {i["file"] for i in train} & {
      i["file"] for i in test}
  for instance in test[::7]:
    tasks, edges = table.read_task_graph(instance["path"])
    seed = benchmarks.CONSTRUCTED_SPLITS["constructed_test"]
    built = constructed.widened(instance["tasks"], instance["processors"], instance["ccr"],
                                seed)
    assert sorted(edges) == sorted((str(u), str(v), float(w)) for u, v, w in built.edges)
    schedule = {str(t): (int(p), float(s), float(e)) for t, (p, s, e) in
                enumerate(zip(built.placement, built.start, built.end))}
    assert table.check_schedule(tasks, edges, schedule) == instance["optimum"]
    assert instance["proven"] and instance["lower"] == instance["optimum"] == built.optimum
