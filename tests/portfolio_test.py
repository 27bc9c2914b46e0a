"""The exact solver beside the search (regal.search.portfolio) in regal.optimize's default run."""
from __future__ import annotations

import numpy as np
import pytest

from regal_datasets import analysis, benchmarks
from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets.synthetic import sized_graph
from regal.app import methods, optimize_lib
from regal.scoring import performance
from regal.search import portfolio

# Small Sinnen graphs on 4 processors (one compile of the search serves them all) whose optimum
# lies above the structural bound: only a solver's proof can show them optimal.
_ABOVE_THE_BOUND = []
for _instance in benchmarks.stratified(
    [i for i in benchmarks.sinnen_instances(benchmarks.SHARED_GRAPHS)
     if i["tasks"] == 10 and i["processors"] == 4], 40):
  _graph = graph_io.load_graph(_instance["path"])
  _bound = analysis.makespan_lower_bound(_graph, devices_lib.homogeneous(4))
  if _bound < _instance["optimum"] - 1e-9:
    _ABOVE_THE_BOUND.append((_instance, _graph))
  if len(_ABOVE_THE_BOUND) == 3:
    break


def test_the_solvers_proof_ends_the_search(monkeypatch):
  """With no head start the search runs beside the solver, and the proof stops it."""
  monkeypatch.setattr(portfolio, "HEAD_START", 0.0)
  assert len(_ABOVE_THE_BOUND) == 3
  budget = 10 ** 7  # Far more than the search could spend in the test's time.
  for instance, graph in _ABOVE_THE_BOUND[:2]:
    devices = devices_lib.homogeneous(instance["processors"])
    d = optimize_lib.run(graph, devices, methods.RunConfig(model="delay", evals=budget,
                                                           time_limit=300)).result
    assert d.details["solver"]["status"] == "OPTIMAL" and "search" not in d.details
    assert d.objective == instance["optimum"]
    assert d.proven_optimal and d.gap == 0.0 and d.bound_source == "solver"
    assert d.lower_bound == instance["optimum"]
    # The proof ended the search long before its budget (and its guarding time limit).
    assert d.settings["brkga"]["stopped_early"] and d.evaluations < budget
    assert d.wall_seconds["search"] < 60


def test_a_proof_within_the_head_start_makes_the_search_unnecessary():
  for instance, graph in _ABOVE_THE_BOUND:
    devices = devices_lib.homogeneous(instance["processors"])
    d = optimize_lib.run(graph, devices, methods.RunConfig(model="delay")).result
    assert d.details["search"].startswith("skipped")
    assert d.evaluations == d.details["arm_evaluations"]
    assert d.objective == d.search_objective == instance["optimum"]
    assert d.proven_optimal and d.bound_source == "solver"


def test_off_is_the_search_alone():
  instance, graph = _ABOVE_THE_BOUND[0]
  devices = devices_lib.homogeneous(instance["processors"])
  d = optimize_lib.run(graph, devices, methods.RunConfig(
      model="delay", evals=200, brkga=methods.BrkgaOptions(
          arms=("single_device",), exact_solver="off", polish="off"))).result
  assert "solver" not in d.details and "polish" not in d.details
  assert d.bound_source == "structure"
  assert d.lower_bound == analysis.makespan_lower_bound(graph, devices)
  assert not d.proven_optimal
  assert d.evaluations <= 200 and not d.settings["brkga"]["stopped_early"]


def test_the_solver_starts_only_where_its_model_is_the_problems():
  graph, devices = sized_graph(20, seed=1), devices_lib.homogeneous(2)
  for model, objective, expected in (("delay", "runtime", True), ("wc", "runtime", False),
                                     ("sync", "memory", False)):
    problem = performance.Problem(graph, devices, model=model, objective=objective)
    assert portfolio.worth_starting(problem) == expected
  assert not portfolio.worth_starting(performance.Problem(graph, devices_lib.homogeneous(1),
                                                          model="delay"))
  big = sized_graph(portfolio.MAX_OPS + 1, seed=1)
  assert not portfolio.worth_starting(performance.Problem(big, devices, model="delay"))


def test_the_solvers_answer_is_a_candidate_scored_by_the_reference(monkeypatch):
  """The search with a budget too small to find the optimum: the solver's answer is chosen,
  as scored by the reference model, and the summary says it is proven optimal."""
  monkeypatch.setattr(portfolio, "HEAD_START", 0.0)
  instance, graph = _ABOVE_THE_BOUND[1]
  devices = devices_lib.homogeneous(instance["processors"])
  report = optimize_lib.run(graph, devices, methods.RunConfig(
      model="delay", evals=200, brkga=methods.BrkgaOptions(arms=("single_device",))))
  d = report.result
  assert "cpsat" in report.assignments or d.chosen == "cpsat"
  problem = performance.Problem(graph, devices, model="delay")
  placement = np.array([p["device"] for p in d.placement])
  order = [graph.op_names.index(name) for name in d.schedule]
  from regal.scoring import chromosome as chromosome_lib
  assert performance.score_reference(problem, chromosome_lib.encode(
      placement, np.array(order), problem.layout))[0] == d.objective == instance["optimum"]
  from regal.app import report as report_lib
  summary = report_lib.summary(report)
  assert "PROVEN OPTIMAL" in summary
  if d.chosen == "cpsat":  # Never called a seed: it is the solver's own answer.
    assert "the exact solver's answer" in summary and "cpsat seed" not in summary


def test_devices_at_a_ratio_set_the_communication_they_name():
  """What the threshold experiment's training graphs run on."""
  graph = sized_graph(20, seed=2)
  for ccr in (0.1, 1.0, 10.0):
    devices = benchmarks.devices_at_ccr(graph, 3, ccr)
    mean_transfer = np.mean([analysis.transfer_time(devices, float(s), 0, 1)
                             for s in graph.tensor_size])
    assert mean_transfer / np.mean(graph.compute_cost) == pytest.approx(ccr)
  free = benchmarks.devices_at_ccr(graph, 3, 0.0)
  assert analysis.transfer_time(free, float(graph.tensor_size.max()), 0, 2) == 0.0
