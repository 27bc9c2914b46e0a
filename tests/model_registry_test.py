"""The model registry: a model added here, through `models.register` alone (its functions in
this file, no other edit), is checked, scored and optimized by `regal.optimize`'s code path."""
import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets import errors, synthetic
from regal.app import methods, optimize_lib
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import models, performance
from regal.scoring.schedule import Schedule

HOP = 7.5  # Every edge between two devices costs this, whatever its size.


def _priority_order(graph, op_priority) -> list[int]:
  """Ready ops, highest priority first (ties: lower id): a readable list scheduler."""
  preds = [set() for _ in range(graph.num_ops)]
  for src, dst in zip(graph.edge_src, graph.edge_dst):
    preds[int(dst)].add(int(src))
  done: list[int] = []
  while len(done) < graph.num_ops:
    ready = [v for v in range(graph.num_ops) if v not in done and preds[v] <= set(done)]
    done.append(min(ready, key=lambda v: (-op_priority[v], v)))
  return done


def hop_delay(graph, devices, placement, op_priority, transfer_priority=None, dtype=np.float64
              ) -> Schedule:
  """The delay model with a constant latency per crossing edge, in plain Python."""
  del transfer_priority
  end = np.zeros(graph.num_ops)
  start = np.zeros(graph.num_ops)
  free = np.zeros(devices.num_devices)
  for op in _priority_order(graph, op_priority):
    device = int(placement[op])
    ready = 0.0
    for src, dst in zip(graph.edge_src, graph.edge_dst):
      if int(dst) == op:
        ready = max(ready, end[src] + (HOP if int(placement[src]) != device else 0.0))
    start[op] = max(ready, free[device])
    end[op] = start[op] + graph.compute_cost[op] / devices.speed[device]
    free[device] = end[op]
  makespan = dtype(end.max(initial=0.0))
  unsent = np.full((graph.num_tensors, devices.num_devices), np.nan)
  return Schedule(makespan=makespan, peak_memory=np.zeros(devices.num_devices), op_start=start,
                  op_end=end, transfer_start=unsent, transfer_end=unsent)


def hop_delay_host(graph, devices, memory):
  """The batched host scorer: the reference row by row (a toy needs no compiled loop)."""
  del memory

  def simulate(placement, op_priority, transfer_priority):
    makespans = [hop_delay(graph, devices, p, o).makespan for p, o in zip(placement, op_priority)]
    return np.asarray(makespans, np.float32), None
  return simulate


@pytest.fixture(scope="module")
def hop_model():
  model = models.register(models.Model(
      "hop_delay_test", "the delay model with a constant latency per crossing edge",
      reference=hop_delay, native=hop_delay_host))
  yield model
  models.unregister(model.name)


@pytest.fixture(scope="module")
def graph():
  return synthetic.generate(np.random.default_rng(3),
                            synthetic.SyntheticSpec(min_nodes=12, max_nodes=12))


def test_a_registered_model_is_optimized_by_regal_optimize(hop_model, graph):
  devices = devices_lib.homogeneous(2)
  report = optimize_lib.run(
      graph, devices, methods.RunConfig(model=hop_model.name, method="brkga", evals=600, seed=0))
  placement = np.array([p["device"] for p in report.result.placement])
  index = {name: i for i, name in enumerate(graph.op_names)}
  order = np.array([index[name] for name in report.result.schedule])
  priority = chromosome_lib.order_priorities(order)
  expected = hop_delay(graph, devices, placement, priority).makespan
  assert report.result.objective == pytest.approx(expected, rel=1e-6)
  one_device = graph.compute_cost.sum()
  assert report.result.objective <= one_device  # The search starts from one device.
  # Scored by the registered host function: an answer that crosses devices pays HOP.
  problem = performance.Problem(graph, devices, model=hop_model.name)
  assert performance.scoring_engine(problem) == "native"
  split = chromosome_lib.encode(np.arange(graph.num_ops) % 2, graph.topological_order,
                                problem.layout)
  fitness = np.asarray(performance.make_fitness_fn(problem)(split[None]))[0]
  assert fitness == pytest.approx(performance.score_reference(problem, split)[0], rel=1e-6)


def test_the_registry_refuses_what_the_model_cannot_do(hop_model, graph):
  devices = devices_lib.homogeneous(2)
  with pytest.raises(errors.ConfigError, match="hop_delay_test model has no memory"):
    performance.Problem(graph, devices, model=hop_model.name, objective="memory")
  with pytest.raises(errors.ConfigError, match="scored by the native engine only"):
    performance.Problem(graph, devices, model=hop_model.name, engine="jax")
  with pytest.raises(errors.ConfigError, match="unknown model 'nope'; known: wc, sync"):
    performance.Problem(graph, devices, model="nope")
  with pytest.raises(ValueError, match="registered already"):
    models.register(hop_model)


def test_split_models_are_entries_of_the_same_registry():
  """--objective throughput and --model blocks are the registry's split models: what
  `regal.optimize` splits with, kept apart from the schedule models' dispatch."""
  from regal.baselines import pipeline_methods
  assert set(models.split_names()) == {"throughput", "blocks"}
  assert not set(models.split_names()) & set(models.names())
  assert pipeline_methods.OBJECTIVES == {"throughput": models.get_split("throughput"),
                                         "latency": models.get_split("blocks")}
  with pytest.raises(errors.ConfigError, match="scores a profiled workload's split"):
    models.get("blocks")
  with pytest.raises(errors.ConfigError, match="unknown split model 'wc'"):
    models.get_split("wc")
