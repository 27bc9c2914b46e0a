"""regal_datasets.constructed: the certificate of a constructed task graph is a feasible schedule (by
the task-graph table's independent checker and by the readable delay reference) that keeps
every processor busy on [0, T], so T = total work / p is optimal; the graph reads back from its
DOT text as written; the command writes both files and refuses bad input with one line."""
import json
import os
import subprocess
import sys

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from regal_datasets import constructed, errors
from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_experiments import task_graph_table
from regal.scoring.delay import reference as delay_reference


def _checked_makespan(instance: constructed.Instance) -> float:
  tasks = {str(t): float(length) for t, length in enumerate(instance.lengths)}
  edges = [(str(u), str(v), float(w)) for u, v, w in instance.edges]
  schedule = {str(t): (int(p), float(s), float(e)) for t, (p, s, e) in
              enumerate(zip(instance.placement, instance.start, instance.end))}
  return task_graph_table.check_schedule(tasks, edges, schedule)


@hypothesis.settings(max_examples=30, deadline=None)
@hypothesis.given(st.integers(1, 8), st.integers(0, 60), st.sampled_from([0.0, 0.5, 1.0, 2.0]),
                  st.integers(0, 10 ** 6))
def test_the_certificate_is_feasible_and_ends_at_total_work_over_processors(
    processors, extra_tasks, ccr, seed):
  instance = constructed.generate(processors + extra_tasks, processors, ccr, seed)
  work = int(instance.lengths.sum())
  assert work == processors * instance.optimum  # No idle time: the work bound is met.
  assert _checked_makespan(instance) == instance.optimum
  assert (instance.lengths >= 1).all() and (np.diff(instance.start) >= 0).all()
  busy = np.bincount(instance.placement, weights=instance.lengths, minlength=processors)
  np.testing.assert_array_equal(busy, instance.optimum)
  graph = instance.graph()
  schedule = delay_reference.simulate_delay(
      graph, devices_lib.homogeneous(processors), instance.placement, -instance.start)
  assert schedule.makespan == instance.optimum
  np.testing.assert_array_equal(schedule.op_start, instance.start)


def test_the_graph_reads_back_as_written_and_edges_are_as_described():
  instance = constructed.generate(200, 8, 1.0, seed=3)
  graph = instance.graph()
  np.testing.assert_array_equal(graph.compute_cost, instance.lengths)
  written = sorted((int(graph.op_names[s]), int(graph.op_names[d]), float(w)) for s, d, w in
                   zip(graph.edge_src, graph.edge_dst, graph.tensor_size[graph.data_edge_tensor]))
  assert written == sorted((u, v, float(w)) for u, v, w in instance.edges)
  reads = np.bincount([v for _, v, _ in instance.edges], minlength=200)
  assert 2.5 <= reads.mean() <= 5.0 and abs(instance.lengths.mean() - 10) < 1.5
  cross = [(u, v, w) for u, v, w in instance.edges
           if instance.placement[u] != instance.placement[v]]
  tight = [w == instance.start[v] - instance.end[u] for u, v, w in cross]
  assert 0.5 <= np.mean(tight) <= 0.9  # Most edges across processors leave no slack.
  inside = [w for u, v, w in instance.edges if instance.placement[u] == instance.placement[v]]
  assert 10 <= min(inside) and max(inside) <= 20  # 1-2 x ccr x the mean task.
  assert constructed.generate(200, 8, 1.0, seed=3).edges == instance.edges
  assert constructed.generate(200, 8, 1.0, seed=4).edges != instance.edges


def test_bad_sizes_are_refused():
  with pytest.raises(errors.ConfigError, match="needs 1 to 64 processors"):
    constructed.generate(3, 4)
  with pytest.raises(errors.ConfigError, match="ccr and reads"):
    constructed.generate(10, 2, ccr=float("nan"))


def test_the_command_writes_the_graph_and_its_certificate(tmp_path):
  out = tmp_path / "g.dot"
  done = subprocess.run([sys.executable, "-m", "regal_datasets.constructed", "--tasks", "60",
                         "--processors", "4", "--seed", "2", "--out", str(out)],
                        capture_output=True, text=True, check=True)
  assert "optimum" in done.stdout
  certificate = json.loads((tmp_path / "g.certificate.json").read_text())
  graph = graph_io.load_graph(str(out))
  assert graph.num_ops == 60 and certificate["processors"] == 4
  assert certificate["optimum"] == constructed.generate(60, 4, seed=2).optimum
  bad = subprocess.run([sys.executable, "-m", "regal_datasets.constructed", "--tasks", "2",
                        "--processors", "4", "--out", str(tmp_path / "h.dot")],
                       capture_output=True, text=True)
  assert bad.returncode == 2 and bad.stderr.strip().startswith("error:")
  assert len(bad.stderr.strip().splitlines()) == 1 and not os.path.exists(tmp_path / "h.dot")
