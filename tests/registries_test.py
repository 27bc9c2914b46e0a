"""A method and a guide added from this file alone (`methods.register`,
`guides.register_prior`, no other edit) run through `regal.optimize`'s code path; with the
decoder (`decoder_registry_test.py`) and model (`model_registry_test.py`) registries, every
kind of extension is one record."""
import dataclasses

import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets import errors, synthetic
from regal.app import methods, optimize_lib
from regal.baselines import common
from regal.scoring import chromosome as chromosome_lib
from regal.search import guides


@pytest.fixture(scope="module")
def graph():
  return synthetic.generate(np.random.default_rng(5),
                            synthetic.SyntheticSpec(min_nodes=12, max_nodes=12))


def _last_device(problem, config, evals, scores):
  """Every op on the last device, in topological order."""
  del config, evals, scores
  placement = np.full(problem.graph.num_ops, problem.devices.num_devices - 1)
  return common.finish("last_device_test", problem, placement,
                       problem.graph.topological_order, 0.0)


def test_a_registered_method_runs_as_regal_optimize_runs_it(graph):
  method = methods.register(methods.Method("last_device_test", _last_device, frozenset()))
  try:
    report = optimize_lib.run(graph, devices_lib.homogeneous(3),
                              methods.RunConfig(method=method.name))
    assert report.result.settings["method"] == method.name
    assert {row["device"] for row in report.result.placement} <= {2, 0}
    assert report.result.objective == pytest.approx(graph.compute_cost.sum())
    with pytest.raises(ValueError, match="registered already"):
      methods.register(method)
  finally:
    methods._REGISTRY.pop(method.name)
  with pytest.raises(errors.ConfigError, match="unknown method 'last_device_test'"):
    methods.RunConfig(method="last_device_test").validate()


@dataclasses.dataclass(frozen=True)
class ReversedTopologicalSeed:
  """A toy guide: one seed chromosome, every op on device 1 in reversed topological order."""

  def planned_evaluations(self, problem):
    return 0

  def guide(self, problem, seed, before):
    order = problem.graph.topological_order[::-1]
    chromosome = chromosome_lib.encode(np.ones(problem.graph.num_ops, int), order,
                                       problem.layout)
    return dataclasses.replace(before, seeds={**before.seeds, "reversed_test": chromosome})


def test_a_registered_guide_seeds_the_search(graph):
  guides.register_prior("reversed_test", lambda evals: ReversedTopologicalSeed())
  try:
    report = optimize_lib.run(graph, devices_lib.homogeneous(2),
                              methods.RunConfig(prior="reversed_test", evals=400))
    assert "reversed_test" in report.result.details["seed_arms"]
  finally:
    guides.PRIORS.pop("reversed_test")


def test_a_split_method_is_refused_for_an_objective_its_record_does_not_model():
  """cpsat splits for max-load only: its record's `split_objectives` refuse latency, in one
  line, before any work (the method itself no longer checks)."""
  assert methods.get_split("cpsat", "throughput").name == "cpsat"
  with pytest.raises(errors.ConfigError, match="models the pipeline max-load only"):
    methods.get_split("cpsat", "latency")
  with pytest.raises(errors.ConfigError, match="takes --method"):
    methods.get_split("heft", "throughput")
