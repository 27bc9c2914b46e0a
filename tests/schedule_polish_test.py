"""regal.search.schedule_polish: its scorer is the delay model bit for bit (a moved op too), a
settled descent leaves no improving insertion of a critical op (checked by enumerating every
insertion on the readable reference), the polish never worsens its start and stops at a
proven optimum, and `regal.optimize`'s delay runs report it (or not, with polish off)."""
import time

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

import graph_strategies
from regal_datasets import analysis, constructed, errors
from regal_datasets import devices as devices_lib
from regal.app import methods, optimize_lib
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.delay import reference as delay_reference
from regal.scoring.delay.native import build_native_delay_graph
from regal.search import schedule_polish, window_solve


def _reference(graph, devices, placement, order):
  """(makespan, sum of ends) by the readable delay model, float32."""
  schedule = delay_reference.simulate_delay(graph, devices, placement,
                                            chromosome_lib.order_priorities(order), np.float32)
  return float(schedule.makespan), float(np.sum(schedule.op_end, dtype=np.float64)), schedule


def _inserted(order, op, at):
  """The order with op taken out and put just before order[at] (at the end: len(order))."""
  before = [v for v in order[:at] if v != op]
  after = [v for v in order[at:] if v != op]
  return np.array(before + [op] + after, np.int64)


def _topological(graph, order) -> bool:
  position = np.empty(len(order), np.int64)
  position[order] = np.arange(len(order))
  return bool(np.all(position[graph.edge_src] < position[graph.edge_dst]))


def _random_schedule(graph, num_devices, rng):
  order = np.asarray(delay_reference.priority_topological_order(
      graph, rng.random(graph.num_ops)), np.int64)
  return rng.integers(0, num_devices, graph.num_ops), order


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(graph_strategies.dags(min_ops=2, max_ops=14), st.integers(2, 4),
                  st.integers(0, 10 ** 6))
def test_score_is_the_delay_model_bit_for_bit_with_a_moved_op(graph, num_devices, seed):
  rng = np.random.default_rng(seed)
  devices = devices_lib.homogeneous(num_devices)
  native = build_native_delay_graph(graph, devices)
  placement, order = _random_schedule(graph, num_devices, rng)
  makespan, start, end = schedule_polish.score(native, placement, order)
  expected, _, schedule = _reference(graph, devices, placement, order)
  assert makespan == expected
  np.testing.assert_array_equal(end, schedule.op_end.astype(np.float32))
  # Every insertion the moves may score: any op, device and index of its window.
  op = int(rng.integers(graph.num_ops))
  position = np.empty(graph.num_ops, np.int64)
  position[order] = np.arange(graph.num_ops)
  lo = max([position[p] for p in graph.edge_src[graph.edge_dst == op]], default=-1)
  hi = min([position[s] for s in graph.edge_dst[graph.edge_src == op]], default=graph.num_ops)
  for at in range(lo + 1, hi + 1):
    device = int(rng.integers(num_devices))
    s, e = np.zeros(graph.num_ops, np.float32), np.zeros(graph.num_ops, np.float32)
    trial, total = schedule_polish._score(order, placement, op, device, at, native.cost,
                                          native.preds_ptr, native.preds, native.pred_bytes,
                                          native.speed, native.bandwidth, native.latency, s, e,
                                          np.zeros(num_devices, np.float32))
    moved = placement.copy()
    moved[op] = device
    new_order = _inserted(order.tolist(), op, at)
    assert _topological(graph, new_order)
    assert (float(trial), float(total)) == _reference(graph, devices, moved, new_order)[:2]


def _critical_reference(graph, devices, placement, order, schedule) -> set[int]:
  """Ops with start + the longest path to the end (dependencies with their transfers, and
  the next op that occupies the same device) = the makespan; readable."""
  start, end = schedule.op_start.astype(np.float32), schedule.op_end.astype(np.float32)
  dependencies = analysis.Dependencies.of(graph)
  readers = {}  # op -> {reader: the largest tensor it reads from op (or CONTROL_ONLY)}
  for reader in range(graph.num_ops):
    for src, size in zip(dependencies.preds[reader], dependencies.pred_bytes[reader]):
      readers.setdefault(int(src), {})[reader] = size
  tail = {}
  busy = [v for v in order if end[v] > start[v]]
  for op in reversed(list(order)):
    longest = np.float32(0)
    mine = [v for v in busy if placement[v] == placement[op]]
    if end[op] > start[op] and mine.index(op) + 1 < len(mine):
      longest = tail[mine[mine.index(op) + 1]]
    for succ, size in readers.get(op, {}).items():
      delay = analysis.transfer_time(devices, size, int(placement[op]), int(placement[succ]),
                                     np.float32)
      longest = max(longest, delay + tail[succ])
    tail[op] = np.float32(end[op] - start[op]) + longest
  makespan = np.float32(schedule.makespan)
  return {v for v in range(graph.num_ops) if start[v] + tail[v] >= makespan * np.float32(1 - 1e-6)}


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(graph_strategies.dags(min_ops=3, max_ops=10), st.integers(2, 3),
                  st.integers(0, 10 ** 6))
def test_a_settled_descent_leaves_no_improving_insertion_of_a_critical_op(graph, num_devices,
                                                                           seed):
  rng = np.random.default_rng(seed)
  devices = devices_lib.homogeneous(num_devices)
  native = build_native_delay_graph(graph, devices)
  placement, order = _random_schedule(graph, num_devices, rng)
  position = np.empty(graph.num_ops, np.int64)
  position[order] = np.arange(graph.num_ops)
  n, d = graph.num_ops, num_devices
  schedule_polish._seed(seed)
  makespan, total, _, _, settled = schedule_polish._descend(
      order, position, placement, 10 ** 7, native.cost, native.preds_ptr, native.preds,
      native.pred_bytes, native.succs_ptr, native.succs, native.speed, native.bandwidth,
      native.latency, np.float32(-1), np.zeros(n, np.float32), np.zeros(n, np.float32),
      np.zeros(d, np.float32), np.zeros(n, np.float32), np.zeros(n, np.int64),
      np.zeros(d, np.int64))
  assert settled and _topological(graph, order)
  got_makespan, got_total, schedule = _reference(graph, devices, placement, order)
  assert (float(makespan), float(total)) == (got_makespan, got_total)
  for op in _critical_reference(graph, devices, placement, order, schedule):
    for at in range(n + 1):
      new_order = _inserted(order.tolist(), op, at)
      if not _topological(graph, new_order):
        continue
      for device in range(d):
        moved = placement.copy()
        moved[op] = device
        trial = _reference(graph, devices, moved, new_order)[:2]
        assert not (trial[0] < got_makespan or (trial[0] == got_makespan and
                                                trial[1] < got_total)), (op, at, device)


def test_the_polish_never_worsens_its_start_and_its_answer_is_the_reference_makespan():
  instance = constructed.generate(60, 4, 1.0, seed=3)
  graph, devices = instance.graph(), devices_lib.homogeneous(4)
  problem = performance.Problem(graph, devices, model="delay")
  rng = np.random.default_rng(0)
  placement, order = _random_schedule(graph, 4, rng)
  result = schedule_polish.polish(problem, placement, order, seed=1, evals=20_000)
  assert result.makespan <= result.start_makespan == _reference(graph, devices, placement,
                                                                order)[0]
  assert result.makespan < result.start_makespan and result.moves > 0 and result.kicks > 0
  assert result.evaluations <= 20_000 and result.stop_reason in ("budget", "bound")
  assert _topological(graph, result.order)
  assert result.makespan == _reference(graph, devices, result.placement, result.order)[0]
  decoded = chromosome_lib.assignment(result.chromosome(problem.layout), problem.layout)
  assert _reference(graph, devices, *decoded)[0] == result.makespan


def test_the_polish_stops_at_the_bound_from_near_the_optimum():
  instance = constructed.generate(120, 4, 1.0, seed=5)
  graph, devices = instance.graph(), devices_lib.homogeneous(4)
  problem = performance.Problem(graph, devices, model="delay")
  order = np.lexsort((np.arange(graph.num_ops), instance.start))
  placement = instance.placement.copy()
  placement[[10, 40]] = (placement[[10, 40]] + 1) % 4  # Two ops off their optimal device.
  result = schedule_polish.polish(problem, placement, order, evals=10 ** 7)
  assert result.start_makespan > instance.optimum
  assert result.makespan == instance.optimum and result.stop_reason == "bound"


def test_the_polish_stops_at_its_deadline_and_when_asked():
  instance = constructed.generate(200, 8, 2.0, seed=0)
  problem = performance.Problem(instance.graph(), devices_lib.homogeneous(8), model="delay")
  placement, order = _random_schedule(problem.graph, 8, np.random.default_rng(0))
  started = time.perf_counter()
  timed = schedule_polish.polish(problem, placement, order, evals=10 ** 9,
                                 deadline=started + 0.5)
  assert timed.stop_reason == "time" and time.perf_counter() - started < 3.0
  asked = schedule_polish.polish(problem, placement, order, evals=10 ** 9,
                                 should_stop=lambda: True)
  assert asked.stop_reason == "stopped" and asked.evaluations == 0


def test_delay_runs_report_the_polish_and_polish_off_skips_it():
  instance = constructed.generate(100, 8, 2.0, seed=0)
  graph, devices = instance.graph(), devices_lib.homogeneous(8)
  config = methods.RunConfig(model="delay", evals=3000, seed=0)
  polished = optimize_lib.run(graph, devices, config).result
  details = polished.details["polish"]
  assert details["evaluations"] == 3000 or details["stop_reason"] == "bound"
  searched = polished.details["stopped"]["evaluations"]
  assert polished.evaluations == searched + details["evaluations"]
  assert polished.objective <= details["start_makespan"]
  assert details["answer"] == (details["makespan"] < details["start_makespan"])
  plain = optimize_lib.run(graph, devices, methods.RunConfig(
      model="delay", evals=3000, seed=0, brkga=methods.BrkgaOptions(polish="off"))).result
  assert "polish" not in plain.details and plain.objective >= polished.objective
  wc = optimize_lib.run(graph, devices, methods.RunConfig(model="wc", evals=1000, seed=0)).result
  assert "polish" not in wc.details


def test_a_bad_polish_setting_is_one_error():
  with pytest.raises(errors.ConfigError, match="polish must be one of " + ", ".join(methods.POLISH)):
    methods.RunConfig(brkga=methods.BrkgaOptions(polish="on")).validate()


# ----- the exact window move ------------------------------------------------------------
def _certificate(tasks, processors, ratio, seed):
  instance = constructed.generate(tasks, processors, ratio, seed=seed)
  devices = devices_lib.homogeneous(processors)
  native = build_native_delay_graph(instance.graph(), devices)
  order = np.lexsort((np.arange(tasks), instance.start)).astype(np.int64)
  return instance, devices, native, order


def test_a_window_resolve_repairs_misplaced_ops_inside_it():
  instance, devices, native, order = _certificate(150, 8, 2.0, seed=7)
  assert window_solve.applies(native)
  placement = instance.placement.copy()
  centre = int(order[75])
  free = window_solve.window(order, centre, 40)
  assert free.sum() == 40 and free[centre]
  misplaced = np.flatnonzero(free)[[5, 20, 30]]
  placement[misplaced] = (placement[misplaced] + 3) % 8
  makespan, start, end = schedule_polish.score(native, placement, order)
  assert makespan > instance.optimum
  by_start = order[np.argsort(start[order], kind="stable")]
  incumbent = window_solve.Incumbent(placement, by_start, start, end)
  resolved = window_solve.resolve(native, incumbent, free, 5.0)
  assert resolved is not None
  new_placement, new_order, planned = resolved
  assert _topological(instance.graph(), new_order)
  np.testing.assert_array_equal(new_placement[~free], placement[~free])  # Only the window moves.
  got = _reference(instance.graph(), devices, new_placement, new_order)[0]
  # The delay model starts every op as early as it can: never later than CP-SAT planned.
  assert instance.optimum <= got <= planned < makespan


def test_a_two_device_resolve_keeps_every_other_op_and_its_ops_on_the_pair():
  """Ops swapped between devices 2 and 5 of an optimum: re-solving those two devices' ops over
  the whole horizon, every other op fixed, repairs them, and no freed op leaves the pair."""
  instance, devices, native, order = _certificate(120, 6, 2.0, seed=4)
  placement = instance.placement.copy()
  pair = np.array([2, 5])
  on_pair = np.flatnonzero(np.isin(placement, pair))
  swapped = on_pair[[3, 10, 17]]
  placement[swapped] = np.where(placement[swapped] == 2, 5, 2)
  makespan, start, end = schedule_polish.score(native, placement, order)
  assert makespan > instance.optimum
  by_start = order[np.argsort(start[order], kind="stable")]
  free = np.isin(placement, pair)
  incumbent = window_solve.Incumbent(placement, by_start, start, end)
  resolved = window_solve.resolve(native, incumbent, free, 10.0, devices=pair)
  assert resolved is not None
  new_placement, new_order, planned = resolved
  assert _topological(instance.graph(), new_order)
  np.testing.assert_array_equal(new_placement[~free], placement[~free])
  assert np.isin(new_placement[free], pair).all()
  got = _reference(instance.graph(), devices, new_placement, new_order)[0]
  assert instance.optimum <= got <= planned < makespan


def test_the_critical_pair_is_two_devices_one_of_them_running_a_critical_op():
  instance, _, native, order = _certificate(120, 6, 2.0, seed=4)
  rng = np.random.default_rng(0)
  placement = rng.integers(0, 6, 120)
  makespan, start, end = schedule_polish.score(native, placement, order)
  critical = schedule_polish._critical_of(native, order, placement, start, end, makespan)
  for _ in range(20):
    a, b = schedule_polish.critical_pair(native, placement, critical, rng)
    assert 0 <= a < 6 and 0 <= b < 6 and a != b
    assert {a, b} & set(placement[critical].tolist())


def test_the_pairs_polish_takes_turns_with_windows_and_never_worsens(monkeypatch):
  calls = []
  moves = dict(schedule_polish._EXACT_MOVES)
  for name, move in moves.items():
    monkeypatch.setitem(schedule_polish._EXACT_MOVES, name,
                        lambda *args, name=name, move=move: calls.append(name) or move(*args))
  monkeypatch.setattr(schedule_polish, "WINDOW_AFTER_KICKS", 0)  # Every settled descent.
  instance = constructed.generate(200, 8, 2.0, seed=0)
  problem = performance.Problem(instance.graph(), devices_lib.homogeneous(8), model="delay")
  placement, order = _random_schedule(problem.graph, 8, np.random.default_rng(1))
  polished = schedule_polish.polish(problem, placement, order, evals=10 ** 9,
                                    deadline=time.perf_counter() + 3.0,
                                    exact=schedule_polish.MOVE_SETS["pairs"])
  assert len(calls) == polished.windows >= 3
  assert calls[:3] == ["window", "pair", "window"]
  assert polished.makespan <= polished.start_makespan
  assert polished.makespan == _reference(problem.graph, devices_lib.homogeneous(8),
                                         polished.placement, polished.order)[0]


def test_a_compact_resolve_is_better_by_makespan_then_sum_of_ends():
  """With `compact`, a re-solve lowers (makespan, sum of op ends) lexicographically by the
  delay model, never raising the makespan; at the optimum the sum can still fall."""
  instance, devices, native, order = _certificate(80, 4, 1.0, seed=2)
  rng = np.random.default_rng(3)
  placement, order = _random_schedule(instance.graph(), 4, rng)
  found = 0
  for centre in order[[10, 40, 70]].tolist():
    makespan, start, end = schedule_polish.score(native, placement, order)
    by_start = order[np.argsort(start[order], kind="stable")]
    free = window_solve.window(by_start, int(centre), 12)
    incumbent = window_solve.Incumbent(placement, by_start, start, end)
    resolved = window_solve.resolve(native, incumbent, free, 5.0, compact=True)
    if resolved is None:
      continue
    found += 1
    new_makespan, _, new_end = schedule_polish.score(native, resolved[0], resolved[1])
    assert new_makespan <= makespan
    assert (new_makespan, new_end.sum()) < (makespan, end.sum())
    assert schedule_polish.improves(new_makespan, new_end, makespan, end, compact=True)
    placement, order = resolved[0], resolved[1]
  assert found >= 2
  _, _, native, order = _certificate(80, 4, 1.0, seed=2)  # The optimum: the sum alone may fall.
  makespan, start, end = schedule_polish.score(native, instance.placement, order)
  free = window_solve.window(order, int(order[30]), 12)
  incumbent = window_solve.Incumbent(instance.placement, order, start, end)
  resolved = window_solve.resolve(native, incumbent, free, 5.0, compact=True)
  if resolved is not None:
    new_makespan, _, new_end = schedule_polish.score(native, resolved[0], resolved[1])
    assert new_makespan == makespan and new_end.sum() < end.sum()
  assert not schedule_polish.improves(5.0, np.array([1.0]), 5.0, np.array([2.0]), False)
  assert schedule_polish.improves(5.0, np.array([1.0]), 5.0, np.array([2.0]), True)
  assert not schedule_polish.improves(6.0, np.array([1.0]), 5.0, np.array([2.0]), True)


def test_a_window_at_the_optimum_finds_nothing_better():
  instance, _, native, order = _certificate(80, 4, 1.0, seed=2)
  makespan, start, end = schedule_polish.score(native, instance.placement, order)
  assert makespan == instance.optimum
  free = window_solve.window(order, int(order[40]), 30)
  incumbent = window_solve.Incumbent(instance.placement, order, start, end)
  assert window_solve.resolve(native, incumbent, free, 5.0) is None


def test_the_window_move_applies_only_to_integer_times_on_alike_links():
  graph = constructed.generate(30, 4, 1.0, seed=0).graph()
  assert window_solve.applies(build_native_delay_graph(graph, devices_lib.homogeneous(4)))
  assert not window_solve.applies(build_native_delay_graph(graph,
                                                           devices_lib.nvlink_two_groups(2)))
  halves = graph.replace(compute_cost=graph.compute_cost + 0.5)
  assert not window_solve.applies(build_native_delay_graph(halves, devices_lib.homogeneous(4)))
  assert not window_solve.applies(build_native_delay_graph(graph, devices_lib.homogeneous(1)))


def test_the_polish_tries_windows_only_with_a_deadline():
  instance = constructed.generate(200, 8, 2.0, seed=0)
  problem = performance.Problem(instance.graph(), devices_lib.homogeneous(8), model="delay")
  placement, order = _random_schedule(problem.graph, 8, np.random.default_rng(0))
  budgeted = schedule_polish.polish(problem, placement, order, evals=200_000)
  assert budgeted.windows == 0
  timed = schedule_polish.polish(problem, placement, order, evals=10 ** 9,
                                 deadline=time.perf_counter() + 3.0)
  assert timed.windows > 0 and timed.improving_windows <= timed.windows
  assert timed.makespan == _reference(problem.graph, devices_lib.homogeneous(8),
                                      timed.placement, timed.order)[0]
