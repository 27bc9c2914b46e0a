"""regal.baselines: CP-SAT against brute force, every method valid and re-scorable, fusion
acyclic, the critical path against the Doppler repository's figures."""

import json

import graph_strategies
import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

from regal_datasets import analysis
from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets.graph import Graph
from regal import baselines
from regal.app import methods
from regal.baselines import enumerative, exact, fusion, list_scheduling, partition
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.doppler import reference as doppler_sim
from regal.scoring.schedule import validate_placement
from regal_datasets import coarsen

FAST_METHODS = ("critical_path", "critical_path_doppler", "heft", "gp_dfs", "enumerative",
                "cpsat", "quickp")


def _graph(costs, edges, sizes=None, name="g", metadata=None) -> Graph:
  """One output tensor per op (size `sizes[i]`, default 1); edges (producer, consumer)."""
  sizes = [1.0] * len(costs) if sizes is None else sizes
  return Graph(op_names=[f"op{i}" for i in range(len(costs))], op_types=[""] * len(costs),
               compute_cost=costs, extra_memory=np.zeros(len(costs)),
               tensor_producer=np.arange(len(costs)), tensor_size=sizes,
               data_edge_tensor=[a for a, _ in edges], data_edge_consumer=[b for _, b in edges],
               control_edge_src=[], control_edge_dst=[], name=name, metadata=metadata or {})


# ----- the slow reference: every placement and every order under the delay model -----------
def brute_force_delay_optimum(graph: Graph, devices) -> float:
  """Depth-first over (next op, its device) with each op started as early as its device and
  inputs allow (an op of zero time needs no device slot); exhaustive but for pruning
  branches already no better than the best."""
  preds = {op: [] for op in range(graph.num_ops)}
  for src, dst, is_control, size in zip(graph.edge_src, graph.edge_dst, graph.edge_is_control,
                                        graph.edge_bytes):
    preds[int(dst)].append((int(src), None if is_control else float(size)))
  best = [np.inf]

  def arrival(src, size, src_device, device, end):
    if size is None or src_device == device:
      return end[src]
    return end[src] + devices.latency[src_device, device] + size / devices.bandwidth[
        src_device, device]

  def extend(done, placement, end, free, span):
    if span >= best[0]:
      return
    if len(done) == graph.num_ops:
      best[0] = span
      return
    for op in range(graph.num_ops):
      if op in done or any(src not in done for src, _ in preds[op]):
        continue
      for device in range(devices.num_devices):
        duration = graph.compute_cost[op] / devices.speed[device]
        ready = max([0.0] + [arrival(src, size, placement[src], device, end)
                             for src, size in preds[op]])
        start = max(free[device], ready) if duration > 0 else ready  # Zero time: no slot.
        finish = start + duration
        busy = finish if duration > 0 else free[device]
        extend(done | {op}, {**placement, op: device}, {**end, op: finish},
               free[:device] + (busy,) + free[device + 1:], max(span, finish))

  extend(frozenset(), {}, {}, (0.0,) * devices.num_devices, 0.0)
  return best[0]


def _device_sets():
  # Identical devices exercise CP-SAT's symmetry breaking and its redundant constraints.
  return st.sampled_from([
      devices_lib.homogeneous(2), devices_lib.homogeneous(3, bandwidth=0.5),
      devices_lib.DeviceSpec(memory_capacity=np.inf, speed=[1.0, 2.0], bandwidth=1.0,
                             latency=1.0),
      devices_lib.DeviceSpec(memory_capacity=np.inf, speed=[1.0, 1.0],
                             bandwidth=[[1, 2], [0.5, 1]], latency=0.0)])


@hypothesis.settings(max_examples=25)
@hypothesis.given(graph=graph_strategies.dags(max_ops=6), devices=_device_sets())
def test_cpsat_optimum_equals_brute_force(graph, devices):
  problem = performance.Problem(graph, devices, model="doppler")
  result = exact.cpsat(problem, time_limit=30, workers=1)
  optimum = brute_force_delay_optimum(graph, devices)
  assert result.details["status"] == "OPTIMAL"
  assert result.details["planned_makespan"] == pytest.approx(optimum)
  # The bound is rounded down to the solver's integer time unit (e.g. 0.4999995 for 0.5).
  assert result.details["lower_bound"] <= optimum + 1e-9
  assert result.details["lower_bound"] == pytest.approx(optimum, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("devices", [devices_lib.homogeneous(2),
                                     devices_lib.DeviceSpec(memory_capacity=np.inf,
                                                            speed=[1.0, 3.0], bandwidth=1.0,
                                                            latency=0.5)])
def test_cpsat_optimum_on_eight_ops(devices):
  # A diamond of two chains that merge, plus a side branch: 8 ops.
  graph = _graph([3, 4, 2, 5, 1, 3, 2, 4],
                 [(0, 1), (1, 2), (0, 3), (3, 4), (2, 5), (4, 5), (0, 6), (6, 7), (5, 7)],
                 sizes=[2, 1, 3, 1, 2, 1, 1, 1])
  result = exact.cpsat(performance.Problem(graph, devices), time_limit=60, workers=1)
  assert result.details["status"] == "OPTIMAL"
  assert result.details["planned_makespan"] == pytest.approx(
      brute_force_delay_optimum(graph, devices))


@pytest.mark.parametrize("shape", ["join", "fork"])
def test_cpsat_bound_is_tight_where_relatives_split_over_devices(shape):
  """A join (three sources into a sink) and its mirror, the fork: the optimum splits the
  sources (sinks) over both devices and pays one transfer. The bound's transfer term for
  relatives on another device is exactly one cheapest transfer: anything more would put the
  bound above the optimum."""
  costs, arcs = [4, 3, 3, 1], [(0, 3), (1, 3), (2, 3)]
  if shape == "fork":
    costs, arcs = [1, 4, 3, 3], [(0, 1), (0, 2), (0, 3)]
  graph = _graph(costs, arcs, sizes=[2, 2, 2, 2])
  devices = devices_lib.homogeneous(2)
  result = exact.cpsat(performance.Problem(graph, devices), time_limit=30, workers=1)
  optimum = brute_force_delay_optimum(graph, devices)
  assert optimum < sum(costs)  # Splitting pays, so the transfer term is exercised.
  assert result.details["status"] == "OPTIMAL"
  assert result.details["lower_bound"] == pytest.approx(optimum)


def test_cpsat_bound_holds_for_every_model():
  graph = _graph([3, 4, 2, 5, 1, 3], [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (3, 5)],
                 sizes=[2, 2, 2, 1, 1, 1])
  devices = devices_lib.homogeneous(2)
  bound = exact.cpsat(performance.Problem(graph, devices), time_limit=30,
                      workers=1).details["lower_bound"]
  rng = np.random.default_rng(0)
  for model in performance.MODELS:
    problem = performance.Problem(graph, devices, model=model)
    for _ in range(20):
      placement = rng.integers(0, 2, graph.num_ops)
      order = rng.permutation(graph.num_ops)
      assert baselines.score(problem, placement, order)[0] >= bound - 1e-9


# ----- every method: valid, and its reported objective is what the model says -------------
def _assert_valid(result, problem):
  graph = problem.graph
  validate_placement(result.placement, graph.num_ops, problem.devices.num_devices)
  assert sorted(result.order.tolist()) == list(range(graph.num_ops))
  # The answer is its chromosome: placement and order, and the transfer priorities that the
  # wc and sync models read (a random search's are random, not encode's 0.5).
  placement, order = chromosome_lib.assignment(result.chromosome, problem.layout)
  assert placement.tolist() == result.placement.tolist()
  assert order.tolist() == result.order.tolist()
  assert performance.score_reference(problem, result.chromosome)[0] == result.objective
  assert np.isfinite(result.objective) and result.wall_seconds >= 0


@hypothesis.settings(max_examples=30)
@hypothesis.given(graph=graph_strategies.dags(max_ops=10), devices=_device_sets(),
                  model=st.sampled_from(performance.MODELS))
def test_every_fast_method_is_valid_and_rescores(graph, devices, model):
  problem = performance.Problem(graph, devices, model=model)
  for method in FAST_METHODS:
    result = methods.run_method(method, problem, time_limit=2)
    assert result.method == method
    _assert_valid(result, problem)


@hypothesis.settings(max_examples=4)
@hypothesis.given(graph=graph_strategies.dags(max_ops=8), devices=_device_sets(),
                  model=st.sampled_from(performance.MODELS),
                  method=st.sampled_from(["local_search", "random", "hill_climb"]))
def test_search_methods_are_valid_on_random_graphs(graph, devices, model, method):
  problem = performance.Problem(graph, devices, model=model)
  result = methods.run_method(method, problem, evals=40)
  _assert_valid(result, problem)
  assert result.evaluations == 40


@pytest.fixture(scope="module")
def small_problem():
  graph = _graph([3, 4, 2, 5, 1, 3, 2, 2, 6, 1],
                 [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (3, 5), (5, 6), (4, 7), (6, 8),
                  (7, 9), (8, 9)], sizes=[2, 1, 2, 1, 3, 1, 2, 1, 1, 1])
  return performance.Problem(graph, devices_lib.homogeneous(2), model="sync")


@pytest.mark.parametrize("method", ["local_search", "random", "hill_climb"])
def test_search_methods_spend_the_budget_and_rescore(small_problem, method):
  result = methods.run_method(method, small_problem, evals=300, seed=1)
  _assert_valid(result, small_problem)
  assert result.evaluations == 300
  single = baselines.score(small_problem, np.zeros(10, int), np.arange(10))[0]
  assert result.objective <= single


def test_hill_climb_starts_from_the_best_seed_and_climbs_on_the_exact_model():
  """Sinnen-style task graph under the delay model: the best heuristic is the start, the climb
  ends no worse, and on this graph it finds strictly better (checked by brute force)."""
  from regal_datasets.formats import dot
  graph = dot.parse("digraph { n0 [Weight=3]; n1 [Weight=3]; n2 [Weight=1]; n3 [Weight=5]; "
                    "n4 [Weight=4]; n5 [Weight=5]; n0 -> n3 [Weight=6]; n1 -> n2 [Weight=2]; "
                    "n2 -> n4 [Weight=6]; n3 -> n4 [Weight=4]; }", "g.dot")
  problem = performance.Problem(graph, devices_lib.homogeneous(2), model="delay")
  from regal.baselines import heuristics
  seeds = heuristics.assignments(problem)
  seed_values = {name: baselines.score(problem, p, o)[0] for name, (p, o) in seeds.items()}
  result = methods.run_method("hill_climb", problem, evals=400, seed=0)
  _assert_valid(result, problem)
  assert result.evaluations == 400
  assert result.details["seed_objective"] == min(seed_values.values())
  assert seed_values[result.details["start_seed"]] == min(seed_values.values())
  assert result.objective == result.details["searched_objective"] <= min(seed_values.values())
  json.loads(json.dumps(result.details))  # What --out writes.
  optimum = brute_force_delay_optimum(graph, problem.devices)
  assert result.objective == optimum < min(seed_values.values())


def test_climb_from_starts_at_the_best_start_and_stops_when_told(small_problem):
  """Every start scored by the readable reference, the climb from the best of them (the
  first of ties) ends where the reference scores its answer, never worse, after exactly the
  budget; told to stop, it makes no move."""
  from regal.baselines import local_search
  graph = small_problem.graph
  rng = np.random.default_rng(5)
  assignments = {f"random{k}": (rng.integers(0, 2, graph.num_ops), rng.permutation(graph.num_ops))
                 for k in range(4)}
  starts = {name: chromosome_lib.encode(p, o, small_problem.layout)
            for name, (p, o) in assignments.items()}
  reference = {name: baselines.score(small_problem, p, o)[0]
               for name, (p, o) in assignments.items()}
  best = min(reference, key=reference.get)
  climb = local_search.climb_from(small_problem, starts, 200, seed=3, batch_size=2)
  assert climb.start_objectives == pytest.approx(reference, rel=0, abs=0)
  assert climb.start == best and climb.start_objective == reference[best]
  assert climb.evaluations == 200 and 0 < climb.accepted
  answer = baselines.score(small_problem, *climb.assignment(small_problem.layout))[0]
  assert answer == climb.objective < reference[best]
  calls = []
  stopped = local_search.climb_from(small_problem, starts, 200, seed=3, batch_size=2,
                                    should_stop=lambda: calls.append(1) or True)
  assert stopped.evaluations == len(starts) and len(calls) == 1
  assert stopped.objective == reference[best] and stopped.accepted == 0
  np.testing.assert_array_equal(stopped.chromosome, starts[best].astype(np.float32))


def test_unknown_method_and_memory_objective_are_refused(small_problem):
  from regal_datasets import errors
  with pytest.raises(errors.ConfigError, match="unknown method"):
    methods.run_method("nope", small_problem)
  memory = performance.Problem(small_problem.graph, small_problem.devices, model="sync",
                               objective="memory")
  with pytest.raises(errors.ConfigError, match="minimizes the makespan"):
    methods.run_method("cpsat", memory)


# ----- method-specific behaviour ----------------------------------------------------------
def test_heft_uses_the_faster_device():
  graph = _graph([6, 6, 1], [(0, 2), (1, 2)], sizes=[0.0, 0.0, 0.0])
  devices = devices_lib.DeviceSpec(memory_capacity=np.inf, speed=[1.0, 3.0], bandwidth=1.0,
                                   latency=0.0)
  placement, _ = list_scheduling.heft_assignment(graph, devices)
  # Both 6-cost ops fit better on the 3x device (2 + 2 = 4 < 6), and so does the join.
  assert placement.tolist() == [1, 1, 1]


def _slow_earliest_gap(intervals, ready, duration):
  """The first time >= ready at which [t, t + duration] overlaps no busy interval (one of zero
  length is an instant an op holds), tried at ready and at every interval's end (where a gap
  can open)."""
  for t in sorted({ready} | {e for _, e in intervals if e >= ready}):
    if all(t + duration <= s or t >= e for s, e in intervals):
      return t
  raise AssertionError("the last end always fits")


def _scan_earliest_gap(intervals, ready, duration):
  """HEFT's insertion slot as the textbook scans for it: every busy interval in order."""
  candidate = ready
  for busy_start, busy_end in intervals:
    if candidate + duration <= busy_start:
      return candidate
    candidate = max(candidate, busy_end)
  return candidate


@hypothesis.settings(max_examples=300)
@hypothesis.given(pieces=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=8),
                  ready=st.integers(0, 30), duration=st.integers(0, 4), scale=st.sampled_from(
                      [1.0, 0.1, 1 / 3]))
def test_heft_gap_search_matches_a_scan_and_a_slow_search(pieces, ready, duration, scale):
  """HEFT's insertion slot (busy intervals as HEFT keeps them: sorted, touching at most, some
  of zero length), searched from the first interval that ends after `ready` with array
  operations, is bit for bit the scan of every interval, and the first fitting time a slow
  search finds."""
  intervals, now = [], 0.0
  for gap, length in pieces:
    intervals.append((now + gap * scale, now + gap * scale + length * scale))
    now = intervals[-1][1]
  ready, duration = ready * scale, duration * scale
  found = list_scheduling._earliest_gap(np.array([s for s, _ in intervals]),
                                        np.array([e for _, e in intervals]), ready, duration)
  assert found == _scan_earliest_gap(intervals, ready, duration)
  assert found == _slow_earliest_gap(intervals, ready, duration)
  assert type(found) is float


def test_gp_dfs_splits_two_independent_chains():
  graph = _graph([5, 5, 5, 5, 5, 5], [(0, 1), (1, 2), (3, 4), (4, 5)], sizes=[9] * 6)
  placement = partition.balanced_partition(graph, 2)
  assert placement[0] == placement[1] == placement[2] != placement[3] == placement[4] == \
      placement[5]
  order = partition.depth_first_order(graph)
  assert order.tolist() == [0, 1, 2, 3, 4, 5]  # A chain runs to its end first.


def test_enumerative_uses_meta_ops_when_present():
  # Two shards of one matmul, one reduce: the shards should go to different devices.
  meta = {"meta_op": ["mm", "mm", "add"], "meta_op_role": ["shard", "shard", "reduce"]}
  graph = _graph([10, 10, 1], [(0, 2), (1, 2)], sizes=[1, 1, 1], metadata=meta)
  placement, order, details = enumerative.enumerative_assignment(
      graph, devices_lib.homogeneous(2))
  assert details["grouping"] == "meta_op" and details["groups"] == 2
  assert placement[0] != placement[1]
  plain = _graph([10, 10, 1], [(0, 2), (1, 2)])
  assert enumerative.meta_op_groups(plain)[1] == "topological level"


def _is_acyclic(num_nodes, edges) -> bool:
  indegree = np.zeros(num_nodes, int)
  succ = [[] for _ in range(num_nodes)]
  for a, b, _ in edges:
    succ[a].append(b)
    indegree[b] += 1
  ready = [n for n in range(num_nodes) if indegree[n] == 0]
  seen = 0
  while ready:
    node = ready.pop()
    seen += 1
    for nxt in succ[node]:
      indegree[nxt] -= 1
      if indegree[nxt] == 0:
        ready.append(nxt)
  return seen == num_nodes


@hypothesis.settings(max_examples=60)
@hypothesis.given(graph=graph_strategies.dags(max_ops=25),
                  alpha=st.one_of(st.none(), st.floats(0, 200)))
def test_fusion_never_creates_a_cycle(graph, alpha):
  fused = fusion.fuse(graph, alpha)
  assert sorted(op for members in fused.members for op in members) == list(
      range(graph.num_ops))
  assert _is_acyclic(len(fused.members), fused.edges)
  assert np.isclose(fused.cost.sum(), graph.compute_cost.sum())


@hypothesis.settings(max_examples=60)
@hypothesis.given(graph=graph_strategies.dags(min_ops=2, max_ops=12), data=st.data())
def test_fusion_theorem_other_path_iff_cycle(graph, data):
  """Contracting u -> v creates a cycle exactly when another u ~> v path exists."""
  deps = analysis.Dependencies.of(graph)
  edges = [(u, v) for u in range(graph.num_ops) for v in deps.succs[u]]
  hypothesis.assume(edges)
  u, v = data.draw(st.sampled_from(edges))
  succ = {op: set(deps.succs[op]) for op in range(graph.num_ops)}
  contracted = [(u if a == v else a, u if b == v else b, 0.0)
                for a in range(graph.num_ops) for b in deps.succs[a]
                if {a, b} != {u, v}]
  relabel = {old: new for new, old in enumerate(op for op in range(graph.num_ops) if op != v)}
  contracted = [(relabel[a], relabel[b], 0.0) for a, b, _ in contracted]
  creates_cycle = not _is_acyclic(graph.num_ops - 1, contracted)
  assert coarsen.has_other_path(succ, u, v) == creates_cycle
  # Pruned by top levels (nodes starting after v cannot lead to it), the answer stays.
  top = dict(enumerate(analysis.top_levels(graph, graph.compute_cost).tolist()))
  assert coarsen.has_other_path(succ, u, v, top) == creates_cycle


# ----- the Doppler graphs: the repository's critical path, reproduced ----------------------
DOPPLER_ANCHORS = {"chain_mm_112nodes.txt": 1200.13, "ffnn_192nodes.txt": 84.184,
                   "transformer_block_215nodes.txt": 247.152,
                   "full_transformer_layer_261nodes.txt": 230.903}


@pytest.mark.parametrize("file_name", sorted(DOPPLER_ANCHORS))
def test_critical_path_matches_the_doppler_repository(shared_graphs, file_name):
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / file_name))
  problem = performance.Problem(graph, devices_lib.homogeneous(4), model="doppler")
  repository = list_scheduling.critical_path_doppler(problem)
  assert float(doppler_sim.doppler_units(repository.objective)) == pytest.approx(
      DOPPLER_ANCHORS[file_name], abs=5e-4)
  ours = list_scheduling.critical_path(problem)
  assert abs(doppler_sim.doppler_units(ours.objective) / DOPPLER_ANCHORS[file_name] - 1) < 0.1
