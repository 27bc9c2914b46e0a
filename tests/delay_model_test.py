"""The ordered delay model: the readable reference, the JAX version and the compiled one agree
bit for bit; topological priorities give the placement-only model of the list schedulers."""
import jax
import jax.numpy as jnp
import numpy as np
from graph_strategies import dags, device_sets
from hypothesis import given, settings
from hypothesis import strategies as st

from regal.baselines import list_scheduling
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.delay import batched as delay_model
from regal.scoring.delay import native as native_delay
from regal.scoring.delay import reference as delay_reference


def priority_order_by_hand(graph, priority):
  """The priority-driven topological order, written as plainly as possible: scan every op
  each step."""
  preds = [set() for _ in range(graph.num_ops)]
  for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    preds[dst].add(src)
  order, taken = [], set()
  while len(order) < graph.num_ops:
    ready = [v for v in range(graph.num_ops) if v not in taken and preds[v] <= taken]
    best = max(ready, key=lambda v: (priority[v], -v))
    order.append(best)
    taken.add(best)
  return order


@settings(max_examples=25, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.integers(0, 2**31))
def test_three_delay_models_agree_bit_for_bit(graph, devices, seed):
  rng = np.random.default_rng(seed)
  placements = rng.integers(0, devices.num_devices, (6, graph.num_ops))
  priorities = rng.random((6, graph.num_ops)).astype(np.float32)
  priorities[:3] = np.floor(priorities[:3] * 3) / 3  # Heavy ties: broken by op id.
  jax_graph = jax.tree_util.tree_map(jnp.asarray, delay_model.build_delay_graph(graph, devices))
  jax_makespans = np.asarray(delay_model.makespan_batch(
      jax_graph, jnp.asarray(placements, jnp.int32), jnp.asarray(priorities)))
  native_makespans, native_ends = native_delay.simulate(
      native_delay.build_native_delay_graph(graph, devices), placements, priorities,
      record_times=True)
  for k in range(len(placements)):
    order = delay_reference.priority_topological_order(graph, priorities[k])
    assert order == priority_order_by_hand(graph, priorities[k])
    reference = delay_reference.simulate_delay(graph, devices, placements[k], priorities[k],
                                               dtype=np.float32)
    assert reference.makespan == jax_makespans[k] == native_makespans[k]
    np.testing.assert_array_equal(reference.op_end, native_ends[k])
    _, _, end = list_scheduling.simulate_in_order(graph, devices, placements[k], order)
    np.testing.assert_allclose(delay_reference.simulate_delay(graph, devices, placements[k],
                                                              priorities[k]).op_end, end)


@settings(max_examples=25, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.integers(0, 2**31))
def test_topological_priorities_reproduce_the_placement_only_model(graph, devices, seed):
  placements = np.random.default_rng(seed).integers(0, devices.num_devices, (3, graph.num_ops))
  topological = chromosome_lib.order_priorities(graph.topological_order).astype(np.float32)
  native = native_delay.simulate(native_delay.build_native_delay_graph(graph, devices),
                                 placements, np.tile(topological, (3, 1)))
  for placement, makespan in zip(placements, native):
    unordered = delay_reference.simulate_delay(graph, devices, placement, dtype=np.float32)
    assert unordered.makespan == makespan
    planned, _, _ = list_scheduling.simulate_in_order(graph, devices, placement,
                                                      graph.topological_order)
    np.testing.assert_allclose(makespan, planned, rtol=1e-5)


def test_op_order_changes_the_makespan():
  """Two independent ops on one device, then a consumer of the first on another device: the
  order on the shared device decides when the consumer can start."""
  from regal_datasets import devices as devices_lib
  from regal_datasets.graph import Graph
  graph = Graph(op_names=["a", "b", "c"], op_types=["", "", ""], compute_cost=[1.0, 5.0, 1.0],
                extra_memory=[0.0] * 3, tensor_producer=[0], tensor_size=[0.0],
                data_edge_tensor=[0], data_edge_consumer=[2], control_edge_src=[],
                control_edge_dst=[])
  devices = devices_lib.homogeneous(2)
  placement = np.array([0, 0, 1])
  a_first = delay_reference.simulate_delay(graph, devices, placement, np.array([3.0, 2.0, 1.0]))
  b_first = delay_reference.simulate_delay(graph, devices, placement, np.array([2.0, 3.0, 1.0]))
  assert a_first.makespan == 6 and b_first.makespan == 7


def test_fitness_scores_the_delay_model_with_priorities_on_both_engines():
  from regal_datasets import devices as devices_lib
  from regal_datasets import synthetic
  rng = np.random.default_rng(3)
  graph = synthetic.generate(np.random.default_rng(0), synthetic.SyntheticSpec(
      min_nodes=30, max_nodes=30))
  devices = devices_lib.homogeneous(3)
  layout = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, 3)
  chromosomes = rng.random((8, layout.size)).astype(np.float32)
  values = {}
  for engine in ("jax", "native"):
    problem = performance.Problem(graph, devices, model="delay", engine=engine)
    values[engine] = np.asarray(performance.make_fitness_fn(problem)(jnp.asarray(chromosomes)))
  reference = [performance.score_reference(problem, c)[0] for c in chromosomes]
  np.testing.assert_array_equal(values["jax"], values["native"])
  np.testing.assert_array_equal(values["native"], np.float32(reference))


@settings(max_examples=60, deadline=None)
@given(dags(max_ops=30), st.integers(0, 2 ** 31 - 1), st.booleans())
def test_native_priority_order_is_the_references(graph, seed, ties):
  """The compiled priority-driven topological order (the learned prior's features) is the
  readable reference's, ties (to the lower id) and repeated edges included."""
  priority = np.random.default_rng(seed).random(graph.num_ops)
  if ties:
    priority = np.round(priority * 2) / 2
  assert list(native_delay.priority_topological_order(graph, priority)) == \
      delay_reference.priority_topological_order(graph, priority)
