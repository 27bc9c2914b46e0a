"""regal_datasets.analysis: the structural lower bound holds for every model and is tight where it
should be."""
import functools

import numpy as np
from graph_strategies import dags
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import analysis
from regal_datasets import devices as devices_lib
from regal_datasets.graph import Graph
from regal.scoring import performance


def _longest_path_by_recursion(graph) -> float:
  predecessors = {op: set() for op in range(graph.num_ops)}
  for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    predecessors[dst].add(src)

  @functools.lru_cache(maxsize=None)
  def finish(op: int) -> float:
    return float(graph.compute_cost[op]) + max((finish(p) for p in predecessors[op]),
                                               default=0.0)

  return max((finish(op) for op in range(graph.num_ops)), default=0.0)


@settings(max_examples=25, deadline=None)
@given(dags(max_ops=9), st.integers(1, 4), st.sampled_from(["delay", "wc", "doppler"]),
       st.integers(0, 2**31))
def test_no_placement_beats_the_bound(graph, num_devices, model, seed):
  devices = devices_lib.homogeneous(num_devices)
  bound = analysis.makespan_lower_bound(graph, devices)
  assert bound == max(graph.compute_cost.sum() / num_devices,
                      _longest_path_by_recursion(graph))
  problem = performance.Problem(graph, devices, model=model)
  rng = np.random.default_rng(seed)
  for _ in range(5):
    objective, _ = performance.score_reference(problem, rng.random(problem.layout.size))
    assert objective >= bound * (1 - 1e-9)


def test_a_chain_is_bound_by_its_length_on_the_fastest_device():
  graph = Graph(op_names=list("abc"), op_types=[""] * 3, compute_cost=[2.0, 4.0, 6.0],
                extra_memory=[0.0] * 3, tensor_producer=[0, 1], tensor_size=[1.0, 1.0],
                data_edge_tensor=[0, 1], data_edge_consumer=[1, 2], control_edge_src=[],
                control_edge_dst=[])
  devices = devices_lib.homogeneous(3)
  assert analysis.makespan_lower_bound(graph, devices) == 12.0
  faster = devices_lib.DeviceSpec(memory_capacity=np.full(2, np.inf),
                                  speed=np.array([1.0, 4.0]), bandwidth=np.ones((2, 2)),
                                  latency=np.zeros((2, 2)))
  assert analysis.makespan_lower_bound(graph, faster) == 3.0


def _levels_by_recursion(graph, devices):
  """Mean-time top and bottom levels by memoized recursion over explicit edge lists."""
  mean_time = graph.compute_cost * float(np.mean(1.0 / devices.speed))
  largest = {}
  for src, dst, control, size in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(),
                                     graph.edge_is_control.tolist(), graph.edge_bytes.tolist()):
    largest[(src, dst)] = max(largest.get((src, dst), -1.0), -1.0 if control else size)
  pairs = [(s, d) for s in range(devices.num_devices) for d in range(devices.num_devices)
           if s != d]

  def mean_transfer(size):
    if size < 0 or not pairs:
      return 0.0
    return float(np.mean([devices.latency[s, d] + size / devices.bandwidth[s, d]
                          for s, d in pairs]))

  @functools.lru_cache(maxsize=None)
  def top(op):
    return max((top(u) + mean_time[u] + mean_transfer(size)
                for (u, v), size in largest.items() if v == op), default=0.0)

  @functools.lru_cache(maxsize=None)
  def bottom(op):
    return mean_time[op] + max((mean_transfer(size) + bottom(v)
                                for (u, v), size in largest.items() if u == op), default=0.0)

  return ([top(op) for op in range(graph.num_ops)], [bottom(op) for op in range(graph.num_ops)])


@settings(max_examples=30, deadline=None)
@given(dags(max_ops=10), st.integers(1, 3))
def test_levels_match_a_recursive_reference(graph, num_devices):
  devices = devices_lib.homogeneous(num_devices, latency=0.5, bandwidth=3.0)
  tops, bottoms = _levels_by_recursion(graph, devices)
  top, critical_pred = analysis.mean_top_levels(graph, devices, with_critical_predecessor=True)
  bottom, critical_succ = analysis.mean_bottom_levels(graph, devices, with_critical_successor=True)
  np.testing.assert_allclose(top, tops, rtol=1e-12)
  np.testing.assert_allclose(bottom, bottoms, rtol=1e-12)
  deps = analysis.Dependencies.of(graph)
  for op in range(graph.num_ops):
    # The critical neighbour lies on a longest path: its level accounts for the op's.
    if deps.preds[op]:
      assert critical_pred[op] in deps.preds[op]
    else:
      assert critical_pred[op] == -1
    if deps.succs[op]:
      assert bottom[op] >= bottom[critical_succ[op]] + graph.compute_cost[op] * 0.999999 - 1e-9
    else:
      assert critical_succ[op] == -1
  depth = analysis.top_levels(graph, np.ones(graph.num_ops))
  assert all(depth[v] >= depth[u] + 1 for u, v in zip(graph.edge_src, graph.edge_dst))


def test_transfer_time_scalars_arrays_and_float32():
  devices = devices_lib.homogeneous(3, latency=2.0, bandwidth=4.0)
  assert analysis.transfer_time(devices, 8.0, 0, 1) == 2.0 + 8.0 / 4.0
  assert analysis.transfer_time(devices, 8.0, 2, 2) == 0.0
  assert analysis.transfer_time(devices, analysis.CONTROL_ONLY, 0, 1) == 0.0
  np.testing.assert_array_equal(
      analysis.transfer_time(devices, np.array([4.0, 4.0, -1.0]), [0, 1, 0], [1, 1, 2]),
      [3.0, 0.0, 0.0])
  value = analysis.transfer_time(devices, 1e-3, 0, 1, dtype=np.float32)
  assert value.dtype == np.float32
  assert value == np.float32(np.float32(2.0) + np.float32(1e-3) / np.float32(4.0))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.lists(st.floats(0, 1e9), min_size=1, max_size=6),
       st.sampled_from([np.float32, np.float64]), st.integers(0, 2**31))
def test_transfer_time_scalar_and_array_paths_agree(num_devices, sizes, dtype, seed):
  rng = np.random.default_rng(seed)
  devices = devices_lib.DeviceSpec(
      memory_capacity=np.full(num_devices, np.inf),
      speed=np.ones(num_devices), bandwidth=rng.uniform(0.5, 5.0, (num_devices, num_devices)),
      latency=rng.uniform(0.0, 2.0, (num_devices, num_devices)))
  sizes = np.array(sizes + [analysis.CONTROL_ONLY])
  src = rng.integers(0, num_devices, len(sizes))
  dst = rng.integers(0, num_devices, len(sizes))
  batched = analysis.transfer_time(devices, sizes, src, dst, dtype)
  one_by_one = [analysis.transfer_time(devices, float(s), int(a), int(b), dtype)
                for s, a, b in zip(sizes, src, dst)]
  np.testing.assert_array_equal(batched, np.array(one_by_one, dtype))
