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
                  st.integers(0, 10 ** 6), st.floats(0.0, 6.0), st.floats(0.05, 20.0),
                  st.floats(0.0, 1.0), st.floats(0.0, 2.0), st.floats(0.0, 3.0))
def test_the_certificate_is_feasible_and_ends_at_total_work_over_processors(
    processors, extra_tasks, ccr, seed, reads, reach, tight_share, inside_low, spread):
  """For any edge recipe, not only the default one."""
  instance = constructed.generate(processors + extra_tasks, processors, ccr, seed, reads=reads,
                                  reach=reach, tight_share=tight_share,
                                  inside_weight=(inside_low, inside_low + spread))
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


def _recipe_measures(instance):
  """(share of tight edges across processors, mean gap a reader reaches back, inside weights
  over ccr x the mean task: min, max)."""
  cross = [(u, v, w) for u, v, w in instance.edges
           if instance.placement[u] != instance.placement[v]]
  tight = np.mean([w == instance.start[v] - instance.end[u] for u, v, w in cross])
  reach = np.mean([instance.start[v] - instance.end[u] for u, v, _ in instance.edges])
  inside = [w / 10 for u, v, w in instance.edges if instance.placement[u] == instance.placement[v]]
  return tight, reach, min(inside), max(inside)


def test_the_edge_recipe_shapes_the_edges_as_its_parameters_say():
  base = _recipe_measures(constructed.generate(400, 8, 1.0, seed=3))
  loose = _recipe_measures(constructed.generate(400, 8, 1.0, seed=3, reach=6.0,
                                                tight_share=0.2, inside_weight=(0.0, 0.5)))
  assert base[0] > 0.6 and loose[0] < 0.35  # Tight edges follow tight_share.
  assert loose[1] > 2.5 * base[1]  # Writers further back.
  assert base[2] >= 1.0 and base[3] <= 2.0 and loose[3] <= 0.5 and loose[2] < 0.1
  assert "_r6_t0.2_w0-0.5" in constructed.generate(40, 4, 1.0, seed=3, reach=6.0,
                                                   tight_share=0.2,
                                                   inside_weight=(0.0, 0.5)).name
  assert constructed.generate(40, 4, 1.0, seed=3).name == "constructed_n40_p4_ccr1_s3"


def test_the_widened_family_draws_each_instance_its_own_recipe_within_its_ranges():
  drawn = [constructed.widened(60, 4, 1.0, seed) for seed in range(12)]
  assert len({instance.name for instance in drawn}) == 12
  tights = [_recipe_measures(instance)[0] for instance in drawn]
  assert max(tights) - min(tights) > 0.3  # Not one corner of the recipe.
  for instance in drawn:
    reads, reach, tight, inside = instance.name.split("_")[5:9]
    low, high = (float(w) for w in inside[1:].split("-"))
    assert constructed.WIDE["reads"][0] <= float(reads[1:]) <= constructed.WIDE["reads"][1]
    assert constructed.WIDE["reach"][0] <= float(reach[1:]) <= constructed.WIDE["reach"][1]
    assert constructed.WIDE["tight_share"][0] <= float(tight[1:]) <= 1.0 and low < high
    assert _checked_makespan(instance) == instance.optimum
  assert constructed.widened(60, 4, 1.0, 5).edges == drawn[5].edges


def test_bad_sizes_are_refused():
  with pytest.raises(errors.ConfigError, match="needs 1 to 64 processors"):
    constructed.generate(3, 4)
  with pytest.raises(errors.ConfigError, match="ccr and reads"):
    constructed.generate(10, 2, ccr=float("nan"))
  with pytest.raises(errors.ConfigError, match="tight_share within 0 to 1"):
    constructed.generate(10, 2, tight_share=1.5)
  with pytest.raises(errors.ConfigError, match="low <= high"):
    constructed.generate(10, 2, inside_weight=(2.0, 1.0))


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
  wide = subprocess.run([sys.executable, "-m", "regal_datasets.constructed", "--tasks", "60",
                         "--processors", "4", "--widened", "--out", str(tmp_path / "w.dot")],
                        capture_output=True, text=True, check=True)
  assert "optimum" in wide.stdout and os.path.exists(tmp_path / "w.certificate.json")
  both = subprocess.run([sys.executable, "-m", "regal_datasets.constructed", "--tasks", "60",
                         "--widened", "--reach", "2", "--out", str(tmp_path / "v.dot")],
                        capture_output=True, text=True)
  assert both.returncode == 2 and both.stderr.strip() == (
      "error: --widened draws the edge recipe itself; drop --reach")
