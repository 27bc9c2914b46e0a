"""datasets.analysis: the structural lower bound holds for every model and is tight where it
should be."""
import functools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from datasets import analysis
from datasets import devices as devices_lib
from datasets.graph import Graph
from graph_strategies import dags
from regal import performance


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
