"""regal.scoring.doppler.native: the compiled Doppler simulator equals the SimPy model bit for bit,
tie order included, and it is the batched fitness of `--model doppler`."""
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets.graph import Graph
from regal.baselines import list_scheduling, partition
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.doppler import reference as doppler_sim
from regal.scoring.doppler import native as native_doppler

DOPPLER_FILES = ("chain_mm_112nodes.txt", "ffnn_192nodes.txt", "transformer_block_215nodes.txt",
                 "full_transformer_layer_261nodes.txt")


def assert_same_as_simpy(graph, devices, placements):
  makespan, start, end = native_doppler.simulate(
      native_doppler.build_doppler_graph(graph, devices), placements, record_times=True)
  for k, placement in enumerate(placements):
    reference = doppler_sim.simulate_doppler(graph, devices, placement)
    assert makespan[k] == reference.makespan, k
    np.testing.assert_array_equal(start[k], reference.op_start)
    np.testing.assert_array_equal(end[k], reference.op_end)


@pytest.mark.parametrize("file_name", DOPPLER_FILES)
def test_equals_simpy_on_the_doppler_graphs(shared_graphs, file_name):
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / file_name))
  devices = devices_lib.homogeneous(4)
  rng = np.random.default_rng(len(file_name))
  problem = performance.Problem(graph, devices, model="doppler")
  heuristic = [list_scheduling.critical_path_assignment(graph, devices)[0],
               list_scheduling.critical_path_assignment(graph, devices, True)[0],
               list_scheduling.heft_assignment(graph, devices)[0],
               partition.gp_dfs(problem).placement, np.zeros(graph.num_ops, np.int64)]
  # Random placements, and heuristic ones with a few ops moved (near-ties of good schedules).
  perturbed = []
  for base in heuristic[:3]:
    for _ in range(5):
      moved = base.copy()
      ops = rng.choice(graph.num_ops, 3, replace=False)
      moved[ops] = rng.integers(0, 4, 3)
      perturbed.append(moved)
  placements = np.concatenate([np.stack(heuristic), np.stack(perturbed),
                               rng.integers(0, 4, (15, graph.num_ops))])
  assert_same_as_simpy(graph, devices, placements)


@st.composite
def tied_graphs(draw):
  """Small DAGs whose costs are 0, 1 or 2 (ties everywhere), repeated (source, target) pairs
  and control edges included, in the order the edges were drawn (not sorted)."""
  num_ops = draw(st.integers(1, 10))
  compute = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=num_ops,
                          max_size=num_ops))
  pairs = draw(st.lists(st.tuples(st.integers(0, num_ops - 1), st.integers(0, num_ops - 1)),
                        max_size=3 * num_ops))
  pairs = [(a, b) for a, b in pairs if a < b]
  sizes = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=len(pairs),
                        max_size=len(pairs)))
  is_control = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
  data = [(a, b, s) for (a, b), s, c in zip(pairs, sizes, is_control) if not c]
  control = [(a, b) for (a, b), c in zip(pairs, is_control) if c]
  return Graph(op_names=[f"n{i}" for i in range(num_ops)], op_types=[""] * num_ops,
               compute_cost=compute, extra_memory=[0.0] * num_ops,
               tensor_producer=[a for a, _, _ in data], tensor_size=[s for _, _, s in data],
               data_edge_tensor=list(range(len(data))),
               data_edge_consumer=[b for _, b, _ in data],
               control_edge_src=[a for a, _ in control], control_edge_dst=[b for _, b in control])


@settings(max_examples=150, deadline=None)
@given(tied_graphs(), st.sampled_from([1, 2, 3]), st.sampled_from([0.0, 1.0]),
       st.integers(0, 2**31))
def test_equals_simpy_on_graphs_with_heavy_ties(graph, num_devices, latency, seed):
  devices = devices_lib.DeviceSpec(
      memory_capacity=np.inf, speed=np.ones(num_devices),
      bandwidth=np.ones((num_devices, num_devices)),
      latency=np.full((num_devices, num_devices), latency))
  placements = np.random.default_rng(seed).integers(0, num_devices, (4, graph.num_ops))
  assert_same_as_simpy(graph, devices, placements)


def test_doppler_fitness_is_the_exact_model(shared_graphs):
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / "ffnn_192nodes.txt"))
  problem = performance.Problem(graph, devices_lib.homogeneous(4), model="doppler")
  assert performance.scoring_engine(problem) == "native"
  rng = np.random.default_rng(0)
  chromosomes = rng.random((6, problem.layout.size)).astype(np.float32)
  placement, order = list_scheduling.critical_path_assignment(graph, problem.devices)
  chromosomes[0] = chromosome_lib.encode(placement, order, problem.layout)
  batched = np.asarray(performance.make_fitness_fn(problem)(jnp.asarray(chromosomes)))
  exact = [performance.score_reference(problem, c)[0] for c in chromosomes]
  np.testing.assert_array_equal(batched, np.float32(exact))


def test_brkga_history_is_in_the_exact_models_units(shared_graphs):
  from regal import search
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / "chain_mm_112nodes.txt"))
  problem = performance.Problem(graph, devices_lib.homogeneous(4), model="doppler")
  result = search.optimize(performance.Evaluator.of(problem), evals=600, seed=0)
  exact, _ = performance.score_reference(problem, result.best_chromosome)
  assert result.history[-1] == np.float32(exact)
  assert np.all(np.diff(result.history) <= 0)


def test_a_repeated_pairs_late_tensor_sets_the_makespan():
  # a -> b twice: b waits only for the last-created transfer (1 byte); the first (10 bytes)
  # arrives after b ends and no op waits on it, yet SimPy's clock runs until it lands.
  graph = Graph(op_names=["a", "b"], op_types=["", ""], compute_cost=[1.0, 1.0],
                extra_memory=[0.0, 0.0], tensor_producer=[0, 0], tensor_size=[10.0, 1.0],
                data_edge_tensor=[0, 1], data_edge_consumer=[1, 1], control_edge_src=[],
                control_edge_dst=[])
  devices = devices_lib.DeviceSpec(memory_capacity=np.inf, speed=np.ones(2),
                                   bandwidth=np.ones((2, 2)), latency=np.zeros((2, 2)))
  placements = np.array([[0, 1], [0, 0]])
  assert_same_as_simpy(graph, devices, placements)
  makespan = native_doppler.simulate(native_doppler.build_doppler_graph(graph, devices),
                                     placements)
  assert makespan.tolist() == [11.0, 2.0]  # a ends at 1, + 10; on one device: 1 + 1.
