"""regal_datasets.coarsen: acyclic groups, QuickP's rules, and coarse solutions that map back."""
import graph_strategies
import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

from regal_datasets import analysis
from regal_datasets import devices as devices_lib
from regal_datasets import errors, synthetic
from regal_datasets.graph import Graph, validate
from regal import baselines
from regal.scoring import performance
from regal.scoring.wc import reference as wc_reference
from regal_datasets import coarsen


def expand_schedule(graph: Graph, devices, coarsening: coarsen.Coarsening,
                    coarse_placement: np.ndarray, op_start: np.ndarray,
                    transfer_start: np.ndarray, transfer_end: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """A coarse graph's timed schedule as one of the original graph: every group's members run
  back to back from the group's start, and every tensor leaving a group travels in its
  message's transfer. Returns (op_start [o], op_end [o], transfer_start [t, D],
  transfer_end [t, D]), NaN where a tensor is not sent; the makespan is the coarse one. The
  coarse graph is a faithful model of its groups when this schedule is valid."""
  starts = np.empty(graph.num_ops)
  ends = np.empty(graph.num_ops)
  # The group's end as the coarse model computes it (summed cost over speed): the members'
  # own sum can round an ulp past it, into the next op on that device.
  group_cost = np.bincount(coarsening.group_of, weights=graph.compute_cost,
                           minlength=coarsening.num_groups)
  for group, members in enumerate(coarsening.members):
    now = float(op_start[group])
    speed = float(devices.speed[coarse_placement[group]])
    group_end = now + group_cost[group] / speed
    for op in members:
      starts[op] = now
      now = min(now + graph.compute_cost[op] / speed, group_end)
      ends[op] = now
    ends[members[-1]] = group_end
  message_of = coarsen.coarse_tensors(graph, coarsening).message_of
  shape = (graph.num_tensors, devices.num_devices)
  sent_start, sent_end = np.full(shape, np.nan), np.full(shape, np.nan)
  crossing = message_of >= 0
  sent_start[crossing] = np.asarray(transfer_start)[message_of[crossing]]
  sent_end[crossing] = np.asarray(transfer_end)[message_of[crossing]]
  return starts, ends, sent_start, sent_end


def _check(graph: Graph, coarsening: coarsen.Coarsening) -> Graph:
  assert sorted(op for group in coarsening.members for op in group) == list(range(graph.num_ops))
  for group, members in enumerate(coarsening.members):
    assert all(coarsening.group_of[op] == group for op in members)
  coarse = coarsen.coarse_graph(graph, coarsening)  # Graph() refuses a cycle.
  validate(coarse)
  assert np.isclose(coarse.compute_cost.sum(), graph.compute_cost.sum())
  return coarse


@hypothesis.settings(max_examples=80)
@hypothesis.given(graph=graph_strategies.dags(max_ops=30),
                  alpha=st.one_of(st.none(), st.floats(0, 100)),
                  target=st.integers(1, 30))
def test_coarsening_never_creates_a_cycle(graph, alpha, target):
  _check(graph, coarsen.quickp_fusion(graph, alpha))
  _check(graph, coarsen.quickp_fusion(graph, alpha, max_group_cost=alpha or 0.0))
  heavy = coarsen.heavy_edge_coarsening(graph, target)
  _check(graph, heavy)
  # Ranked by the critical path too, blocked edges retried: same groups count, still a DAG.
  bounded = coarsen.heavy_edge_coarsening(graph, target, max_critical_path=0.0)
  assert bounded.num_groups == heavy.num_groups or bounded.num_groups <= target
  _check(graph, bounded)
  _check(graph, coarsen.coarsen_to(graph, target, num_devices=2))


def _graph(costs, edges):
  """One tensor per op; edges (producer, consumer)."""
  return Graph(op_names=[f"op{i}" for i in range(len(costs))], op_types=[""] * len(costs),
               compute_cost=costs, extra_memory=np.zeros(len(costs)),
               tensor_producer=np.arange(len(costs)), tensor_size=np.ones(len(costs)),
               data_edge_tensor=[a for a, _ in edges], data_edge_consumer=[b for _, b in edges],
               control_edge_src=[], control_edge_dst=[])


def test_quickp_rules():
  # Every edge of K(2,2) leaves a fan-out and enters a fan-in: nothing fuses, however cheap.
  crossed = _graph([1, 1, 1, 1], [(0, 2), (0, 3), (1, 2), (1, 3)])
  assert coarsen.quickp_fusion(crossed, alpha=1e9).num_groups == 4
  # A straight line fuses whatever it costs.
  chain = _graph([50, 60, 70], [(0, 1), (1, 2)])
  assert coarsen.quickp_fusion(chain, alpha=0.0).num_groups == 1
  # 0 fans out to 1 and 2, and 2 also reads 3: the edge to the cheap 1 fuses; the edges into
  # the costly fan-in 2 do not.
  fork = _graph([50, 1, 60, 40], [(0, 1), (0, 2), (3, 2)])
  fused = coarsen.quickp_fusion(fork, alpha=5.0)
  assert fused.num_groups == 3 and fused.group_of[0] == fused.group_of[1]
  assert coarsen.default_alpha(fork) == pytest.approx(np.percentile([50, 1, 60, 40], 90))


def test_heavy_edges_go_first():
  graph = Graph(op_names=["a", "b", "c"], op_types=[""] * 3, compute_cost=[1, 1, 1],
                extra_memory=np.zeros(3), tensor_producer=[0, 1], tensor_size=[100, 1],
                data_edge_tensor=[0, 1], data_edge_consumer=[1, 2], control_edge_src=[],
                control_edge_dst=[])
  coarsening = coarsen.heavy_edge_coarsening(graph, target=2)
  assert coarsening.group_of.tolist() == [0, 0, 1]
  with pytest.raises(errors.ConfigError, match="at least 1"):
    coarsen.heavy_edge_coarsening(graph, 0)


@hypothesis.settings(max_examples=40)
@hypothesis.given(graph=graph_strategies.dags(max_ops=20), target=st.integers(1, 6),
                  data=st.data())
def test_a_coarse_placement_maps_back(graph, target, data):
  coarsening = coarsen.heavy_edge_coarsening(graph, target)
  coarse = coarsen.coarse_graph(graph, coarsening)
  placement = np.array(data.draw(st.lists(st.integers(0, 1), min_size=coarse.num_ops,
                                          max_size=coarse.num_ops)))
  order = coarse.topological_order
  ops_placement, ops_order = coarsen.expand(coarsening, placement, order)
  assert sorted(ops_order.tolist()) == list(range(graph.num_ops))
  position = np.empty(graph.num_ops, int)
  position[ops_order] = np.arange(graph.num_ops)
  assert all(position[a] < position[b] for a, b in zip(graph.edge_src, graph.edge_dst))
  for op in range(graph.num_ops):
    assert ops_placement[op] == placement[coarsening.group_of[op]]


@hypothesis.settings(max_examples=40)
@hypothesis.given(graph=graph_strategies.dags(max_ops=15), target=st.integers(1, 4))
def test_one_group_per_device_keeps_the_wc_makespan(graph, target):
  """With each device holding one group, its ops run back to back as the group op does
  (transfers inside a group cost nothing): the WC makespans agree when groups are
  independent; otherwise an op may start before its whole predecessor group has finished,
  so the original can only be faster."""
  coarsening = coarsen.heavy_edge_coarsening(graph, target)
  coarse = coarsen.coarse_graph(graph, coarsening)
  hypothesis.assume(coarse.num_ops <= 4)
  devices = devices_lib.homogeneous(coarse.num_ops)
  placement = np.arange(coarse.num_ops)
  order = coarse.topological_order
  coarse_value = baselines.score(performance.Problem(coarse, devices), placement, order)[0]
  ops_placement, ops_order = coarsen.expand(coarsening, placement, order)
  original_value = baselines.score(performance.Problem(graph, devices), ops_placement,
                                   ops_order)[0]
  if coarse.num_edges == 0:
    assert original_value == pytest.approx(coarse_value)
  else:
    assert original_value <= coarse_value + 1e-6


def _check_timed_schedule(graph: Graph, devices, placement, op_start, op_end, transfer_start,
                          transfer_end, tol=1e-9):
  """A readable feasibility check: op durations, one op at a time per device, data and
  control dependencies, and per link one message at a time, long enough for its bytes (the
  tensors sent in one window form one message)."""
  duration = graph.compute_cost / devices.speed[placement]
  assert np.allclose(op_end - op_start, duration, rtol=tol, atol=tol)
  for device in range(devices.num_devices):
    ops = sorted(np.flatnonzero(placement == device), key=lambda op: (op_start[op], op_end[op]))
    for first, second in zip(ops, ops[1:]):
      assert op_end[first] <= op_start[second] + tol
  for src, dst in zip(graph.control_edge_src, graph.control_edge_dst):
    assert op_end[src] <= op_start[dst] + tol
  for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
    producer = graph.tensor_producer[tensor]
    if placement[producer] == placement[consumer]:
      assert op_end[producer] <= op_start[consumer] + tol
    else:
      assert op_end[producer] <= transfer_start[tensor, placement[consumer]] + tol
      assert transfer_end[tensor, placement[consumer]] <= op_start[consumer] + tol
  messages = {}
  for tensor, dst in zip(*np.nonzero(~np.isnan(transfer_start))):
    src = placement[graph.tensor_producer[tensor]]
    assert src != dst
    key = (src, dst, transfer_start[tensor, dst], transfer_end[tensor, dst])
    messages[key] = messages.get(key, 0.0) + graph.tensor_size[tensor]
  for (src, dst, start, end), size in messages.items():
    needed = devices.latency[src, dst] + size / devices.bandwidth[src, dst]
    assert end - start >= needed - tol * max(1.0, needed)
  for channel in {(src, dst) for src, dst, _, _ in messages}:
    windows = sorted((start, end) for src, dst, start, end in messages if (src, dst) == channel)
    for (_, end), (start, _) in zip(windows, windows[1:]):
      assert end <= start + tol


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(graph=graph_strategies.dags(max_ops=20), target=st.integers(1, 8),
                  data=st.data())
def test_a_coarse_schedule_maps_back_with_the_same_makespan(graph, target, data):
  """Simulated on the coarse graph (WC model) and expanded, the schedule is a valid one of
  the original graph on any devices, with the coarse makespan: transfers inside a group cost
  nothing, and a group's members fit back to back in its slot."""
  coarsening = coarsen.coarsen_to(graph, target, num_devices=2)
  coarse = _check(graph, coarsening)
  num_devices = data.draw(st.integers(1, 3))
  rates = st.floats(0.25, 4.0)
  devices = devices_lib.DeviceSpec(
      memory_capacity=np.full(num_devices, np.inf),
      speed=np.array(data.draw(st.lists(rates, min_size=num_devices, max_size=num_devices))),
      bandwidth=np.array(data.draw(st.lists(rates, min_size=num_devices ** 2,
                                            max_size=num_devices ** 2))
                         ).reshape(num_devices, num_devices),
      latency=np.array(data.draw(st.lists(st.floats(0, 3), min_size=num_devices ** 2,
                                          max_size=num_devices ** 2))
                       ).reshape(num_devices, num_devices))
  placement = np.array(data.draw(st.lists(st.integers(0, num_devices - 1),
                                          min_size=coarse.num_ops, max_size=coarse.num_ops)))
  op_priority = np.array(data.draw(st.permutations(range(coarse.num_ops))), float)
  transfer_priority = np.zeros((coarse.num_tensors, num_devices))
  schedule = wc_reference.simulate_wc(coarse, devices, placement, op_priority,
                                      transfer_priority)
  times = expand_schedule(graph, devices, coarsening, placement, schedule.op_start,
                                  schedule.transfer_start, schedule.transfer_end)
  ops_placement, _ = coarsen.expand(coarsening, placement, coarse.topological_order)
  _check_timed_schedule(graph, devices, ops_placement, *times)
  assert np.max(times[1], initial=0.0) == pytest.approx(float(schedule.makespan), rel=1e-9,
                                                        abs=1e-9)


def test_a_group_ends_exactly_where_the_coarse_model_ends_it():
  """1/0.75 + 25/0.75 rounds one ulp above 26/0.75: the group's last (zero-cost) member must
  not start inside the next group on that device (found by the test above)."""
  graph = _graph([0, 0, 0, 0, 1, 0, 1, 25, 0], [(0, 1), (0, 2), (0, 3), (0, 4), (0, 7),
                                                (0, 8)])
  coarsening = coarsen.Coarsening(group_of=np.array([0, 0, 0, 0, 0, 1, 2, 0, 0]),
                                  members=[[0, 1, 2, 3, 4, 7, 8], [5], [6]])
  coarse = _check(graph, coarsening)
  devices = devices_lib.DeviceSpec(memory_capacity=np.full(3, np.inf),
                                   speed=np.array([0.75, 1.0, 1.0]), bandwidth=np.ones((3, 3)),
                                   latency=np.zeros((3, 3)))
  placement = np.zeros(3, np.int64)
  schedule = wc_reference.simulate_wc(coarse, devices, placement, np.array([1.0, 2.0, 0.0]),
                                      np.zeros((coarse.num_tensors, 3)))
  times = expand_schedule(graph, devices, coarsening, placement, schedule.op_start,
                                  schedule.transfer_start, schedule.transfer_end)
  _check_timed_schedule(graph, devices, np.zeros(graph.num_ops, np.int64), *times)


def test_tensors_that_stay_inside_a_group_become_its_memory():
  # 0 -> 1 -> 2 with 0 also feeding 2; 0 and 1 grouped: tensor 0 leaves only for 2, tensor 1
  # too, so both travel as one message of 3 + 5 bytes; the sink's output stays inside.
  graph = Graph(op_names=["a", "b", "c"], op_types=[""] * 3, compute_cost=[1, 1, 1],
                extra_memory=[2, 7, 1], tensor_producer=[0, 1, 2], tensor_size=[3, 5, 11],
                data_edge_tensor=[0, 0, 1], data_edge_consumer=[1, 2, 2],
                control_edge_src=[], control_edge_dst=[])
  coarsening = coarsen.Coarsening(group_of=np.array([0, 0, 1]), members=[[0, 1], [2]])
  coarse = coarsen.coarse_graph(graph, coarsening)
  assert coarse.tensor_size.tolist() == [8.0] and coarse.tensor_producer.tolist() == [0]
  assert coarse.data_edge_consumer.tolist() == [1]
  assert coarse.extra_memory.tolist() == [7.0, 1.0 + 11.0]


@pytest.mark.parametrize("topology", ["barabasi_albert", "erdos_renyi"])
def test_coarsening_for_search_keeps_the_graph_parallel(topology):
  """Bounded (`coarsen_to`), the 32-group graph's critical path stays well under what QuickP
  fusion and heavy edges give unbounded: cheap ops do not snowball into one huge group, and
  merges that would serialize side-by-side work come last."""
  for seed in range(2):
    graph = synthetic.generate(np.random.default_rng(seed),
                               synthetic.SyntheticSpec(min_nodes=200, max_nodes=200),
                               topology=topology)
    bounded = coarsen.coarsen_to(graph, 32, num_devices=4)
    fused = coarsen.quickp_fusion(graph)
    unbounded = coarsen.compose(fused, coarsen.heavy_edge_coarsening(
        coarsen.coarse_graph(graph, fused), 32))
    assert bounded.num_groups == 32 and unbounded.num_groups <= 32
    bounded_path = analysis.longest_compute_path(_check(graph, bounded))
    assert bounded_path <= 0.6 * analysis.longest_compute_path(_check(graph, unbounded))
    assert bounded_path >= analysis.longest_compute_path(graph)


def test_critical_path_matches_a_readable_longest_path():
  graph = _graph([3, 1, 4, 1, 5], [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)])
  assert analysis.longest_compute_path(graph) == 3 + 4 + 1 + 5
  assert analysis.top_levels(graph, graph.compute_cost).tolist() == [0, 3, 3, 7, 8]


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(graph=graph_strategies.dags(max_ops=25), data=st.data())
def test_levels_stay_exact_while_groups_merge(graph, data):
  """The levels `heavy_edge_coarsening` ranks merges by are updated in place after every
  contraction; they must equal the levels of the group graph computed afresh."""
  hypothesis.assume(graph.num_edges > 0)
  quotient = coarsen._Quotient(graph)
  quotient.track_levels()
  edges = data.draw(st.lists(st.integers(0, graph.num_edges - 1), max_size=graph.num_ops))
  for edge in edges:
    quotient.contract(int(graph.edge_src[edge]), int(graph.edge_dst[edge]))
  _assert_levels_are_fresh(graph, quotient)


def test_a_merge_lengthens_the_paths_of_all_ancestors():
  # a -> b -> c -> d and a heavy e -> d: merging e into d makes every ancestor's path longer.
  graph = _graph([1, 1, 1, 1, 10], [(0, 1), (1, 2), (2, 3), (4, 3)])
  quotient = coarsen._Quotient(graph)
  quotient.track_levels()
  assert quotient.contract(4, 3)
  assert quotient.bottom[quotient.find(0)] == 1 + 1 + 1 + 11
  _assert_levels_are_fresh(graph, quotient)


def _assert_levels_are_fresh(graph, quotient):
  coarsening = quotient.result()
  coarse = coarsen.coarse_graph(graph, coarsening)
  tops = analysis.top_levels(coarse, coarse.compute_cost)
  for root, top in quotient.top.items():
    assert top == pytest.approx(tops[coarsening.group_of[root]])
  assert quotient.critical_path == pytest.approx(analysis.longest_compute_path(coarse))
  bottoms = np.zeros(coarse.num_ops)  # The longest path from each group's start, readably.
  for group in coarse.topological_order[::-1].tolist():
    bottoms[group] = coarse.compute_cost[group] + max(
        (bottoms[s] for s in coarse.successors(group).tolist()), default=0.0)
  for root, bottom in quotient.bottom.items():
    assert bottom == pytest.approx(bottoms[coarsening.group_of[root]])
