"""regal.execute: correctness on 4 host devices (in a subprocess, see multidevice_checks.py),
bad placements refused before anything runs, the fits and statistics against hand-made data,
and the calibration CLI."""
import json
import os
import pathlib
import subprocess
import sys

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from regal_datasets import errors, sharded
from regal_datasets.graph import GraphBuilder
from regal.execute import calibrate_lib, choose_program, executor
from regal.execute import program as program_lib
from regal.execute.sharded_program import sharded_program

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
  out = tmp_path_factory.mktemp("multidevice") / "facts.json"
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  result = subprocess.run([sys.executable, str(HERE / "multidevice_checks.py"), str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(out.read_text())


@pytest.mark.parametrize("workload", ["chain_mm", "ffnn", "llama_block"])
def test_sharded_results_do_not_depend_on_placement(facts, workload):
  result = facts["sharded"][workload]
  assert set(result["placements"]) == {"spread", "random0", "random1", "random2"}
  for name, run in result["placements"].items():
    assert run["max_abs_difference"] <= 1e-5, name
    assert run["ops_on_named_device"], name
  assert result["placements"]["spread"]["devices_used"] == 4
  assert result["one_device_seconds"] > 0 and result["spread_seconds"] > 0


@pytest.mark.parametrize("workload", ["chain_mm", "ffnn"])
def test_sharded_blocks_compute_the_unsharded_operation(facts, workload):
  result = facts["sharded"][workload]
  assert result["dense_max_abs_error"] <= 1e-5 * max(result["dense_scale"], 1.0)


def test_imported_jax_function_computes_itself_on_any_placement(facts):
  assert facts["jax"]["max_abs_difference"] <= 1e-5
  assert facts["jax"]["ops_on_named_device"]


def test_standin_kernels_run_cost_only_graphs(facts):
  standin = facts["standin"]
  assert standin["kind"] == "standin" and standin["ops_on_named_device"]
  assert standin["seconds"] > 0 and standin["one_device_seconds"] > 0


def test_calibration_fits_each_device_and_link_from_its_own_samples(facts):
  """The calibrated spec is the least-squares fit of the timings taken on each device and
  link (checked with numpy's polynomial fit, not the library's solver)."""
  cal = facts["calibration"]
  samples = np.array(cal["op_samples"])  # rows: device, cost, seconds
  for device, speed in enumerate(cal["speed"]):
    mine = samples[samples[:, 0] == device]
    assert len(mine) > 0
    (inverse,), *_ = np.linalg.lstsq(mine[:, 1:2], mine[:, 2], rcond=None)  # Through 0.
    assert speed == pytest.approx(1.0 / inverse, rel=1e-6)
  links = np.array(cal["link_samples"])  # rows: src, dst, bytes, seconds
  for src, dst in {(int(a), int(b)) for a, b in links[:, :2]}:
    pair = links[(links[:, 0] == src) & (links[:, 1] == dst)]
    slope, intercept = np.polyfit(pair[:, 2], pair[:, 3], 1)
    assert cal["latency"][src][dst] == pytest.approx(max(intercept, 0.0), rel=1e-6, abs=1e-12)
    expected = 1.0 / slope if slope > 0 else 1e15
    assert cal["bandwidth"][src][dst] == pytest.approx(expected, rel=1e-6)
  assert cal["rows"] == 5 and -1.0 <= cal["pearson"] <= 1.0


def test_measured_reward_caches_by_assignment(facts):
  measured = facts["measured"]
  assert measured["executions"] == 3 and measured["evaluations"] == 6
  assert measured["again"] == measured["first"][::-1]
  assert all(s > 0 for s in measured["first"])


# ----- in-process: one device is enough ---------------------------------------------------
class _Counting:
  calls = 0

  def __call__(self, *args):
    _Counting.calls += 1
    return args[:1]


def _chain_with_counting_kernels():
  builder = GraphBuilder("chain")
  first = builder.add_op("a", 0.0, "input")
  tensor = builder.add_tensor(first, 16.0)
  second = builder.add_op("b", 1.0, "f")
  builder.add_data_edge(tensor, second)
  builder.add_tensor(second, 16.0)
  graph = builder.build()
  program = program_lib.Program(
      (program_lib.Kernel(inputs=(), value=(np.ones(4, np.float32),)),
       program_lib.Kernel(inputs=(tensor,), fn=_Counting())), "test", (1,))
  return graph, program


@pytest.mark.parametrize("placement, order, message", [
    ([0], None, "placement has 1 entries, the graph 2 ops"),
    ([0, 7], None, "op 1 is placed on device 7, but there are"),
    ([0, -1], None, "op 1 is placed on device -1"),
    ([0.0, 0.0], None, "integer device ids"),
    ([0, 0], [1, 1], "each of the 2 ops exactly once"),
])
def test_bad_placements_are_refused_before_anything_runs(placement, order, message):
  graph, program = _chain_with_counting_kernels()
  _Counting.calls = 0
  with pytest.raises(errors.ConfigError, match=message) as raised:
    executor.execute(graph, program, np.array(placement), order)
  assert "\n" not in str(raised.value)
  assert _Counting.calls == 0


def test_one_device_run_reads_the_kernel_result():
  graph, program = _chain_with_counting_kernels()
  measured = executor.execute(graph, program, np.array([0, 0]), repeats=2, warmup=0)
  np.testing.assert_array_equal(measured.outputs[1], np.ones(4))
  assert len(measured.seconds) == 2 and measured.op_devices.tolist() == [0, 0]


def test_too_many_devices_named_in_one_line():
  with pytest.raises(errors.DeviceSpecError, match="xla_force_host_platform_device_count=64"):
    executor.available_devices(64)


def test_graph_without_semantics_gets_standins_or_a_clear_error():
  graph, _ = _chain_with_counting_kernels()
  with pytest.raises(errors.ConfigError, match="no per-op semantics"):
    sharded_program(graph)
  assert choose_program.program_for(graph, standin_seconds=0.01).kind == "standin"
  assert choose_program.program_for(sharded.generate("chain_mm", 2, size=16)).kind == "sharded"


def test_program_of_another_graph_is_refused():
  graph, program = _chain_with_counting_kernels()
  other = sharded.generate("chain_mm", 2, size=16)
  with pytest.raises(errors.ConfigError, match="kernels"):
    executor.Executor(other, program)


def test_fits_recover_known_parameters():
  costs = np.array([1.0, 2.0, 5.0, 10.0])
  speed, r2 = calibrate_lib.fit_speed(costs, costs / 4.0)
  assert speed == pytest.approx(4.0) and r2 == pytest.approx(1.0)
  sizes = np.array([1e3, 1e4, 1e5, 1e6])
  latency, bandwidth = calibrate_lib.fit_link(sizes, 2e-5 + sizes / 3e9)
  assert latency == pytest.approx(2e-5, rel=1e-6) and bandwidth == pytest.approx(3e9, rel=1e-6)


def _naive_ranks(values):
  """Rank = number of smaller values + (number of equal others) / 2."""
  return np.array([sum(w < v for w in values) + (sum(w == v for w in values) - 1) / 2
                   for v in values])


@hypothesis.given(st.lists(st.integers(0, 5), min_size=2, max_size=12))
def test_ranks_match_the_definition(values):
  np.testing.assert_allclose(calibrate_lib.ranks(values), _naive_ranks(values))


def test_spearman_of_a_monotone_map_is_one():
  x = np.array([0.3, 0.1, 0.9, 0.5])
  assert calibrate_lib.spearman(x, np.exp(x)) == pytest.approx(1.0)
  assert calibrate_lib.pearson(x, 2 * x + 1) == pytest.approx(1.0)


def test_random_placements_span_one_device_to_all():
  pairs = calibrate_lib.random_placements(30, 4, 40, seed=0)
  used = {len(np.unique(p)) for p, _ in pairs}
  assert 1 in used and 4 in used
  assert all(sorted(o) == list(range(30)) for _, o in pairs)


def test_calibrate_cli(tmp_path):
  from cli_test import run
  report = tmp_path / "cal.json"
  spec = tmp_path / "spec.json"
  result = run("regal.execute.calibrate", "--devices", "2", "--placements", "3", "--size", "32",
               "--repeats", "1", "--report", str(report), "--spec_out", str(spec),
               "--plot", str(tmp_path / "cal.png"))
  assert result.returncode == 0, result.stderr[-2000:]
  assert "Pearson" in result.stdout and "Spearman" in result.stdout
  data = json.loads(report.read_text())
  assert data["placements"] == 3 and len(data["rows"]) == 3
  from regal_datasets import devices
  assert devices.load(str(spec)).num_devices == 2
  assert (tmp_path / "cal.png").stat().st_size > 0
  bad = run("regal.execute.calibrate", "--devices", "0")
  assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0


def test_optimize_executes_and_runs_stage_three(tmp_path):
  """One CLI run: Doppler with a measured stage III, then --execute of the winner and the
  single-device baseline on 2 host devices."""
  from cli_test import run
  graph = tmp_path / "ffnn.json"
  assert run("regal_datasets.sharded", "--workload", "ffnn", "--devices", "2", "--ffnn_batch", "32",
             "--ffnn_width", "32", "--out", str(graph)).returncode == 0
  out = tmp_path / "result.json"
  result = run("regal.optimize", "--graph", str(graph), "--devices", "2", "--method", "doppler",
               "--reward", "measured", "--stage3_steps", "1", "--evals", "32", "--execute",
               "--execute_repeats", "2", "--out", str(out))
  assert result.returncode == 0, result.stderr[-2000:]
  data = json.loads(out.read_text())
  stage3 = data["details"]["stage3"]
  assert stage3["episodes"] == 32 and stage3["best_seconds"] <= stage3["critical_path_seconds"]
  execution = data["execution"]
  assert execution["program"] == "sharded" and len(execution["devices"]) == 2
  assert {"best", "single_device"} <= set(execution["assignments"])
  for row in execution["assignments"].values():
    assert row["ops_on_named_device"] and row["median_seconds"] > 0
  assert "measured" in result.stdout


def test_measured_reward_needs_doppler():
  from cli_test import assert_one_line_error, run
  assert_one_line_error(run("regal.optimize", "--reward", "measured", "--devices", "2"),
                        "--method doppler")


def test_an_op_without_inputs_that_costs_time_runs_first():
  """Input ops with a compute cost (every op of a Doppler file's first layer) wait for
  nothing; the executor stalled on them, as only an arrival ever made an op ready."""
  builder = GraphBuilder("costly_inputs")
  builder.add_op("load", 5.0)  # No inputs, a cost: a kernel ready at the start.
  builder.add_op("free", 0.0)  # No inputs, no cost: a source, present before the clock.
  builder.add_op("use", 1.0)
  builder.add_data_edge(builder.add_tensor("load", 64.0), "use")
  builder.add_data_edge(builder.add_tensor("free", 64.0), "use")
  graph = builder.build()
  program = choose_program.program_for(graph, standin_seconds=0.01)
  assert not program.kernels[0].is_source and program.kernels[1].is_source
  measured = executor.execute(graph, program, np.array([1, 0, 0]), repeats=1, warmup=0)
  assert measured.op_devices.tolist() == [1, 0, 0]


def test_cost_only_graphs_execute_from_the_cli(tmp_path, shared_graphs):
  """`regal.optimize --execute` on a Doppler file, a DOT task graph and a JSON graph (stand-in
  kernels), in one process."""
  from bad_input_test import run_module
  from regal_datasets import io as graph_io
  from regal_datasets.synthetic import sized_graph
  graph_io.save_graph(sized_graph(12, seed=1), str(tmp_path / "g.json"))
  graphs = {"doppler": str(shared_graphs / "doppler" / "chain_mm_112nodes.txt"),
            "dot": str(next((shared_graphs / "sinnen").glob("*Nodes_10_*.dot"))),
            "json": str(tmp_path / "g.json")}
  cases = [(name, ["--graph", path, "--devices", "2", "--method", "heft", "--execute",
                   "--execute_repeats", "1", "--out", str(tmp_path / f"{name}.out.json")])
           for name, path in graphs.items()]
  results = run_module("regal.optimize", cases, tmp_path)
  for name in graphs:
    assert results[name]["code"] == 0, results[name]
    execution = json.loads((tmp_path / f"{name}.out.json").read_text())["execution"]
    assert execution["program"] == "standin", name
    for row in execution["assignments"].values():
      assert row["ops_on_named_device"] and row["median_seconds"] > 0, name


def test_a_cost_only_graph_calibrates_in_the_units_it_ran(shared_graphs):
  """The predictions read the bytes the stand-ins moved: the Doppler file's own sizes are ~1e12
  and made every prediction ~1e5 times too long."""
  from regal_datasets import io as graph_io
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / "chain_mm_112nodes.txt"))
  program = choose_program.program_for(graph, standin_seconds=0.05)
  devices = executor.available_devices(2)
  fit = calibrate_lib.calibrate(graph, program, devices, repeats=1)
  report = calibrate_lib.prediction_report(graph, program, fit.spec, devices, placements=3,
                                           repeats=1)
  assert 0.01 < report["median_measured_over_predicted"] < 100
