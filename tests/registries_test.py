"""The one kind of registry (`regal_datasets.registry.Registry`): names declared before their
records load, one-line errors. A method, a guide and a learner added from this file alone
(`methods.register`, `guides.register_prior`, `learners.register`, no other edit) run through
`regal.optimize`'s and `regal.train`'s code paths, from the command line too; with the decoder
(`decoder_registry_test.py`) and model (`model_registry_test.py`) registries, every kind of
extension is one record."""
import dataclasses
import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets import errors, synthetic
from regal_datasets import io as graph_io
from regal_datasets.registry import Registry
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
    methods.unregister(method.name)
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
                              methods.RunConfig(evals=400,
                                                brkga=methods.BrkgaOptions(prior="reversed_test")))
    assert "reversed_test" in report.result.details["seed_arms"]
  finally:
    guides.unregister_prior("reversed_test")


def test_a_split_method_is_refused_for_an_objective_its_record_does_not_model():
  """cpsat splits for max-load only: its record's `split_objectives` refuse latency, in one
  line, before any work (the method itself no longer checks)."""
  assert methods.get_split("cpsat", "throughput").name == "cpsat"
  with pytest.raises(errors.ConfigError, match="models the pipeline max-load only"):
    methods.get_split("cpsat", "latency")
  with pytest.raises(errors.ConfigError, match="takes --method"):
    methods.get_split("heft", "throughput")


@dataclasses.dataclass(frozen=True)
class _Toy:
  name: str


def test_declared_names_are_known_before_their_module_loads(tmp_path, monkeypatch):
  (tmp_path / "toy_holder.py").write_text(
      "from regal_datasets.registry import Registry\n"
      "TOYS = Registry('toy')\n"
      "TOYS.declare('toy_records', 'a', 'b')\n")
  (tmp_path / "toy_records.py").write_text(
      "import dataclasses, toy_holder\n"
      "@dataclasses.dataclass(frozen=True)\n"
      "class Toy:\n"
      "  name: str\n"
      "A = toy_holder.TOYS.register(Toy('a'))\n")  # 'b' declared, never registered.
  monkeypatch.syspath_prepend(str(tmp_path))
  import toy_holder
  toys = toy_holder.TOYS
  assert toys.names() == ("a", "b") and "a" in toys
  assert "toy_records" not in sys.modules
  assert toys.get("a").name == "a" and "toy_records" in sys.modules
  with pytest.raises(RuntimeError, match="declares toy 'b' but does not register it"):
    toys.get("b")
  with pytest.raises(errors.ConfigError, match="unknown toy 'c'; known: a, b"):
    toys.get("c")
  with pytest.raises(ValueError, match="toy 'a' is registered already"):
    toys.register(_Toy("a"))
  assert toys.unregister("a").name == "a" and "a" not in toys
  toys.register(_Toy("a"))  # Free again.


def test_a_registry_keeps_the_order_of_declaration_and_registration():
  registry = Registry("thing")
  registry.register(_Toy("z"))
  registry.declare("nowhere", "y")
  registry.register(_Toy("y"))  # A declared name is filled, not refused.
  assert registry.names() == ("z", "y") and [r.name for r in registry.values()] == ["z", "y"]


_LAUNCH = """
import runpy, sys
sys.path.insert(0, {tests!r})
{register}
sys.argv = [{module!r}, *sys.argv[1:]]
runpy.run_module({module!r}, run_name="__main__")
"""


def _launch(tmp_path, module: str, register: str, args: list[str]):
  """`python -m module args` in a process where `register` (this file's code) ran first."""
  script = tmp_path / "launch.py"
  script.write_text(_LAUNCH.format(tests=str(pathlib.Path(__file__).parent), module=module,
                                   register=textwrap.dedent(register)))
  return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                        cwd=tmp_path)


def test_a_prior_registered_from_this_file_is_a_command_line_choice(graph, tmp_path):
  graph_io.save_graph(graph, str(tmp_path / "g.json"))
  register = """
      from registries_test import ReversedTopologicalSeed
      from regal.search import guides
      guides.register_prior("reversed_test", lambda evals: ReversedTopologicalSeed())
  """
  done = _launch(tmp_path, "regal.optimize", register,
                 ["--graph", "g.json", "--devices", "2", "--evals", "400",
                  "--prior", "reversed_test", "--out", "r.json"])
  assert done.returncode == 0, done.stderr[-2000:]
  result = json.loads((tmp_path / "r.json").read_text())
  assert "reversed_test" in result["details"]["seed_arms"]
  refused = _launch(tmp_path, "regal.optimize", "", ["--graph", "g.json", "--prior",
                                                     "reversed_test"])
  assert refused.returncode == 2
  assert refused.stderr.strip().splitlines()[-1] == (
      "error: flag --prior=reversed_test: value should be one of "
      "<none|bottom_level|group_island> (--help lists the flags)")


def test_a_heuristic_registered_from_this_file_is_a_seed_arm_on_the_command_line(graph,
                                                                               tmp_path):
  """`heuristics.register` alone: `--seed_arms` takes the new arm, its seed enters the first
  population (the result names it), and the built-in arms stay the default."""
  graph_io.save_graph(graph, str(tmp_path / "g.json"))
  register = """
      import numpy as np
      from regal.baselines import heuristics
      heuristics.register(heuristics.Heuristic(
          "last_device_test", lambda problem: (
              np.full(problem.graph.num_ops, problem.devices.num_devices - 1),
              problem.graph.topological_order)))
  """
  done = _launch(tmp_path, "regal.optimize", register,
                 ["--graph", "g.json", "--devices", "2", "--evals", "400",
                  "--seed_arms", "last_device_test,heft", "--out", "r.json"])
  assert done.returncode == 0, done.stderr[-2000:]
  arms = json.loads((tmp_path / "r.json").read_text())["details"]["seed_arms"]
  assert {"last_device_test", "heft"} <= set(arms) and "gp_dfs" not in arms
  refused = _launch(tmp_path, "regal.optimize", "", ["--graph", "g.json", "--seed_arms",
                                                     "last_device_test"])
  assert refused.returncode == 2
  assert refused.stderr.strip().splitlines()[-1].startswith(
      "error: unknown seed arm(s) ['last_device_test']; known: single_device, ")


def test_a_learner_registered_from_this_file_is_a_command_line_choice(tmp_path):
  register = """
      import json, os
      from regal.learning import learners

      def train(config, workdir):
        os.makedirs(workdir, exist_ok=True)
        with open(os.path.join(workdir, "report.json"), "w") as f:
          json.dump({"learner": config.learner, "devices": config.num_devices}, f)
        return "test: nothing learned\\nverdict: a toy"
      learners.register(learners.Learner("toy_test", train, ignores=("prior",)))
  """
  config = f"--config={pathlib.Path(__file__).parents[1]}/regal/learning/configs/default.py:test"
  done = _launch(tmp_path, "regal.train", register,
                 [config, "--config.learner=toy_test", "--config.num_devices=3",
                  "--workdir", "run"])
  assert done.returncode == 0, done.stderr[-2000:]
  assert "verdict: a toy" in done.stdout
  assert json.loads((tmp_path / "run" / "report.json").read_text()) == {
      "learner": "toy_test", "devices": 3}
  refused = _launch(tmp_path, "regal.train", register,
                    [config, "--config.learner=toy_test", "--config.prior.steps=3",
                     "--workdir", "run"])
  assert refused.returncode == 2
  assert refused.stderr.strip().splitlines()[-1] == (
      "error: --config.prior.steps would do nothing here: config.learner is toy_test")
