"""regal.delay_model: the batched delay model against the readable reference and the list
schedulers' delay model, and its use as the doppler model's batched surrogate."""
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from datasets import devices as devices_lib
from graph_strategies import dags, device_sets
from regal import chromosome as chromosome_lib
from regal import delay_model, doppler_model, performance
from regal import reference_models as rm
from regal.baselines import batch_problem
from regal.baselines import list_scheduling

@settings(max_examples=25, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.integers(0, 2**31))
def test_batched_delay_model_matches_the_references(graph, devices, seed):
  rng = np.random.default_rng(seed)
  placements = rng.integers(0, devices.num_devices, (4, graph.num_ops))
  g = jax.tree_util.tree_map(jnp.asarray, delay_model.build_delay_graph(graph, devices))
  makespans = np.asarray(delay_model.makespan_batch(g, jnp.asarray(placements, jnp.int32)))
  for placement, makespan in zip(placements, makespans):
    reference = rm.simulate_delay(graph, devices, placement, dtype=np.float32)
    np.testing.assert_allclose(makespan, reference.makespan, rtol=1e-5)
    planned, start, end = list_scheduling.simulate_in_order(graph, devices, placement,
                                                            graph.topological_order)
    np.testing.assert_allclose(rm.simulate_delay(graph, devices, placement).op_end, end)
    np.testing.assert_allclose(reference.makespan, planned, rtol=1e-5)


def test_doppler_problems_are_searched_with_the_delay_model(shared_graphs):
  from datasets import io as graph_io
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / "ffnn_192nodes.txt"))
  problem = performance.Problem(graph, devices_lib.homogeneous(4), model="doppler")
  surrogate = batch_problem(problem)
  assert surrogate.model == "delay"
  placement, order = list_scheduling.critical_path_assignment(graph, problem.devices)
  chromosome = chromosome_lib.encode(placement, order, problem.layout)
  batched = float(performance.make_fitness_fn(surrogate)(jnp.asarray(chromosome[None],
                                                                     jnp.float32))[0])
  delay_value, _ = performance.score_reference(surrogate, chromosome)
  assert abs(batched - delay_value) <= 1e-5 * delay_value
  # Critical path's own plan runs its ops in its order; the surrogate's topological order can
  # only differ from it by the order within a device, and Doppler's FCFS by that too.
  exact = doppler_model.simulate_doppler(graph, problem.devices, placement).makespan
  planned, _, _ = list_scheduling.simulate_in_order(graph, problem.devices, placement, order)
  assert abs(batched - exact) <= 0.25 * exact and abs(batched - planned) <= 0.25 * planned
