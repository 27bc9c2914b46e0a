"""Lower bounds (regal.scoring.bounds): never above any schedule's reference score, never above
a proven optimum, and in every result with its gap."""
from __future__ import annotations

import numpy as np
import pytest
from graph_strategies import dags
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import benchmarks
from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal.app import methods, optimize_lib
from regal.scoring import bounds, performance


def _memory_need_by_loops(graph) -> float:
  """Per op, written out: its extra memory, its outputs and each distinct tensor it reads."""
  best = 0.0
  for op in range(graph.num_ops):
    need = float(graph.extra_memory[op])
    need += sum(float(size) for tensor, size in enumerate(graph.tensor_size)
                if graph.tensor_producer[tensor] == op)
    read = {int(t) for t, c in zip(graph.data_edge_tensor, graph.data_edge_consumer) if c == op}
    need += sum(float(graph.tensor_size[t]) for t in read)
    best = max(best, need)
  return best


@settings(max_examples=30, deadline=None)
@given(dags(max_ops=9), st.integers(1, 3), st.sampled_from(["wc", "sync"]),
       st.integers(0, 2**31))
def test_no_schedule_needs_less_memory_than_the_bound(graph, num_devices, model, seed):
  assert bounds.memory_lower_bound(graph) == _memory_need_by_loops(graph)
  problem = performance.Problem(graph, devices_lib.homogeneous(num_devices), model=model,
                                objective="memory", dtype=np.float64)
  bound = bounds.structural_lower_bound(problem)
  rng = np.random.default_rng(seed)
  for _ in range(6):
    objective, _ = performance.score_reference(problem, rng.random(problem.layout.size))
    assert bound <= objective


@settings(max_examples=30, deadline=None)
@given(dags(max_ops=9), st.integers(1, 3),
       st.sampled_from([("wc", "runtime"), ("sync", "runtime"), ("delay", "runtime"),
                        ("doppler", "runtime"), ("wc", "runtime_under_memory"),
                        ("sync", "memory")]),
       st.integers(0, 2**31))
def test_the_bound_of_a_result_is_below_every_schedule(graph, num_devices, model_objective,
                                                       seed):
  """In float32, as the product scores: the bound of any answer stays below every schedule's
  score (the float32 rounding allowance only ever lowers it)."""
  model, objective = model_objective
  problem = performance.Problem(graph, devices_lib.homogeneous(num_devices), model=model,
                                objective=objective,
                                memory_limit=40.0 if objective == "runtime_under_memory" else None)
  rng = np.random.default_rng(seed)
  scores = [performance.score_reference(problem, rng.random(problem.layout.size))[0]
            for _ in range(6)]
  best = min(scores)
  bound, source = bounds.lower_bound(problem, best)
  assert source == "structure" and bound <= best
  assert bounds.proven_optimal(best, bound) == (best <= bound)
  gap = bounds.gap(best, bound)
  assert gap is None or gap >= 0


# A spread of Sinnen's graphs (10 tasks, every CCR, 2-8 processors) with proven optima.
_SINNEN = [i for i in benchmarks.stratified(
    [i for i in benchmarks.sinnen_instances(benchmarks.SHARED_GRAPHS) if i["tasks"] == 10], 12)]


@pytest.mark.parametrize("method", ["cpsat", "critical_path"])
def test_result_bounds_never_exceed_a_proven_optimum(method):
  proven = 0
  for instance in _SINNEN:
    graph = graph_io.load_graph(instance["path"])
    report = optimize_lib.run(graph, devices_lib.homogeneous(instance["processors"]),
                              methods.RunConfig(model="delay", method=method, time_limit=5))
    d = report.result
    assert d.lower_bound <= instance["optimum"] + 1e-9, instance["file"]
    assert d.objective >= instance["optimum"] - 1e-9, instance["file"]
    assert d.proven_optimal == (d.objective <= d.lower_bound)
    if d.gap is not None:
      assert d.gap == pytest.approx(d.objective / d.lower_bound - 1)
    proven += d.proven_optimal
    if method == "cpsat":
      assert d.bound_source == "solver" or d.lower_bound == d.objective
  if method == "cpsat":  # The solver proves these small graphs optimal.
    assert proven == len(_SINNEN)


def test_proven_means_within_one_tolerance_of_the_bound():
  """One rule for every method and model: within `PROVEN_TOLERANCE` (relative) of a lower
  bound is proven, beyond it is not; the gap is then 0."""
  for bound in (4.69987, 76417.910, 1e-3):
    at = bounds.target(bound)
    assert bounds.meets(at, bound) and bounds.proven_optimal(at, bound)
    assert bounds.gap(at, bound) == 0.0
    beyond = bound * (1 + 2 * bounds.PROVEN_TOLERANCE)
    assert not bounds.meets(beyond, bound) and bounds.gap(beyond, bound) > 0
  assert bounds.meets(76417.914, 76417.910) and bounds.meets(4.7, 4.69987)


@pytest.mark.parametrize("engine", ["native", "jax"])
def test_the_search_stops_when_its_best_meets_the_bound(engine):
  """Four independent ops (1, 1, 2, 2) on two devices: 3 is the bound and the heuristic seeds
  reach it, so the search stops at its first generation boundary, proven."""
  from regal_datasets.graph import GraphBuilder
  builder = GraphBuilder("pair")
  for name, cost in (("a", 1.0), ("b", 1.0), ("c", 2.0), ("d", 2.0)):
    builder.add_op(name, cost)
  result = optimize_lib.run(builder.build(), devices_lib.homogeneous(2), methods.RunConfig(
      evals=100_000, setup=methods.Setup(engine=engine))).result
  assert result.proven_optimal and result.objective == 3.0
  assert result.details["stopped"]["reason"] == "bound"
  assert result.evaluations < 1000
