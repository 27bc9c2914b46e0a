"""Bad input, one case per row: each ends in one `error: ...` line and its exit code, with no
traceback and no file written or clobbered. The command lines of one CLI run in one process
(`tests/cli_cases.py`), so the table stays fast."""
import hashlib
import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO_ROOT

from datasets import io as graph_io
from datasets.graph import GraphBuilder

_TWO_OPS = {"format": "regal.graph", "version": 1,
            "ops": [{"name": "a", "compute_cost": 1.0}, {"name": "b", "compute_cost": 2.0}],
            "tensors": [{"producer": "a", "size": 4.0, "consumers": ["b"]}]}


def _json_graph(**changes) -> str:
  data = json.loads(json.dumps(_TWO_OPS))
  for key, value in changes.items():
    if key == "cost":
      data["ops"][0]["compute_cost"] = value
    elif key == "size":
      data["tensors"][0]["size"] = value
    else:
      data[key] = value
  return json.dumps(data)


def _doppler_text(path) -> str:
  return (path / "doppler" / "chain_mm_112nodes.txt").read_text()


def _inputs(folder, shared_graphs) -> dict[str, str]:
  """Every bad file of the table, by name; the content each must keep is checked after."""
  doppler = _doppler_text(shared_graphs).split("\n")
  big_int, superscript = list(doppler), list(doppler)
  big_int[4] = "9" * 400 + "," + big_int[4].split(",")[1]
  superscript[1] = "0, \u00b2" + superscript[1][1:]
  files = {
      "good.json": json.dumps(_TWO_OPS),
      "four.json": graph_io.graph_to_text(_chain(4), "json"),
      "cost_1e39.json": _json_graph(cost=1e39),
      "cost_1e300.json": _json_graph(cost=1e300),
      "size_1e39.json": _json_graph(size=1e39),
      "metadata_list.json": _json_graph(metadata=[1, 2]),
      "metadata_string.json": _json_graph(metadata="notes"),
      "deep.json": '{"a":' * 100_000 + "1" + "}" * 100_000,
      "deep.pbtxt": 'node { name: "a" ' + "attr { " * 100_000 + "}" * 100_000 + " }",
      "big_int.txt": "\n".join(big_int),
      "big_int.pbtxt": 'node { name: "a" compute_cost: ' + "9" * 400 + " }\n",
      "superscript.txt": "\n".join(superscript),
      "scalar_output_info.pbtxt": 'node { name: "a" compute_cost: 1 output_info: 5 }\n',
      "scalar_input_info.pbtxt": 'node { name: "a" compute_cost: 1 input_info: 5 }\n',
      "devices_1e7.json": json.dumps({"num_devices": 10 ** 7}),
      "truncated_policy/checkpoint.msgpack": "",  # Filled with half a real checkpoint below.
      "a_file": "not a directory",
  }
  for name, text in files.items():
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
  (folder / "existing_dir").mkdir()
  return files


def _chain(num_ops: int):
  builder = GraphBuilder("chain")
  for i in range(num_ops):
    builder.add_op(f"op{i}", 1.0)
    if i:
      builder.add_data_edge(builder.add_tensor(f"op{i - 1}", 1.0), f"op{i}")
  return builder.build()


OPTIMIZE_CASES = [
    # (id, arguments, exit code, what the one line says)
    ("cost_overflows_float32", ["--graph", "cost_1e39.json"], 2, "beyond float32"),
    ("cost_1e300", ["--graph", "cost_1e300.json"], 2, "beyond float32"),
    ("size_overflows_float32", ["--graph", "size_1e39.json"], 2, "beyond float32"),
    ("out_is_the_input", ["--graph", "good.json", "--out", "good.json"], 2,
     "which it would overwrite"),
    ("gantt_is_the_input", ["--graph", "good.json", "--gantt", "good.json"], 2,
     "which it would overwrite"),
    ("gantt_not_a_chart_format", ["--graph", "good.json", "--gantt", "chart.txt"], 2,
     "use one of .png, .pdf, .svg"),
    ("out_under_a_file", ["--graph", "good.json", "--out", "a_file/r.json"], 2,
     "is a file, not a directory"),
    ("out_is_a_directory", ["--graph", "good.json", "--out", "existing_dir"], 2,
     "existing_dir: is a directory"),
    ("devices_beyond_the_ops", ["--graph", "four.json", "--devices", "10000"], 2,
     "device count 10000 is above 1024"),
    ("more_devices_than_ops", ["--graph", "four.json", "--devices", "8"], 2,
     "at most 4 devices can be used"),
    ("devices_1e7_flag", ["--graph", "four.json", "--devices", str(10 ** 7)], 2,
     "device count 10000000 is above 1024"),
    ("devices_1e7_spec", ["--graph", "four.json", "--device_spec", "devices_1e7.json"], 2,
     "device count 10000000 is above 1024"),
    ("evals_zero", ["--graph", "good.json", "--evals", "0"], 2, "--evals must be positive"),
    ("memory_limit_ignored", ["--graph", "good.json", "--memory_limit", "5"], 2,
     "--memory_limit is read by --objective runtime_under_memory only"),
    ("metadata_list", ["--graph", "metadata_list.json"], 2,
     '"metadata" must be a JSON object, got list'),
    ("metadata_string", ["--graph", "metadata_string.json"], 2,
     '"metadata" must be a JSON object, got str'),
    ("json_nested_too_deeply", ["--graph", "deep.json"], 2, "nested too deeply"),
    ("pbtxt_nested_too_deeply", ["--graph", "deep.pbtxt"], 2, "nested too deeply"),
    ("doppler_400_digits", ["--graph", "big_int.txt"], 2, "malformed doppler file"),
    ("pbtxt_400_digits", ["--graph", "big_int.pbtxt"], 2, "malformed costgraph file"),
    ("doppler_superscript_digit", ["--graph", "superscript.txt"], 2, "malformed doppler file"),
    ("pbtxt_scalar_output_info", ["--graph", "scalar_output_info.pbtxt"], 2,
     "malformed costgraph file"),
    ("pbtxt_scalar_input_info", ["--graph", "scalar_input_info.pbtxt"], 2,
     "malformed costgraph file"),
    ("truncated_policy", ["--graph", "good.json", "--policy", "truncated_policy"], 2,
     "checkpoint"),
    ("unknown_method", ["--graph", "good.json", "--method", "foo"], 2,
     "flag --method=foo: value should be one of"),
    ("no_placement_fits_memory", ["--graph", "good.json", "--objective",
                                  "runtime_under_memory", "--memory_limit", "1", "--evals",
                                  "200", "--out", "infeasible.json"], 3,
     "no solution found fits the memory limit"),
]
TRAIN_CASES = [
    ("batch_size_zero", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
                         "--config.batch_size=0"], 2, "config.batch_size must be positive"),
    ("negative_steps", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
                        "--config.num_steps=-1"], 2, "config.num_steps must be non-negative"),
    ("truncated_checkpoint_resumed", [
                                      f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
                                      "--workdir", "truncated_policy"], 2, "checkpoint"),
    # Last: a config file that fails to load leaves the flag parser without its overrides.
    ("unknown_preset", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:nope"], 2,
     "unknown preset 'nope'"),
]
SWEEP_CASES = [
    ("negative_subsample", ["--sweep", "brkga_tuning", "--subsample=-3", "--out", "sweeps"],
     2, "--subsample must be 0 (every trial) or a positive count, got -3"),
]
SHARDED_CASES = [
    ("zero_flops_per_byte", ["--flops_per_byte", "0"], 2, "flops_per_byte must be positive"),
    ("negative_size", ["--size=-5"], 2, "size must be positive, got -5"),
]


def _digests(folder) -> dict[str, str]:
  return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(folder.rglob("*")) if p.is_file()}


def _run_module(module: str, cases, cwd) -> dict:
  payload = json.dumps([{"id": case_id, "args": args, "cwd": str(cwd)}
                        for case_id, args, _, _ in cases])
  result = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "cli_cases.py"), module],
                          input=payload, capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, shared_graphs):
  """Every case's exit code and output, plus the input folder's files before and after."""
  folder = tmp_path_factory.mktemp("bad_input")
  _inputs(folder, shared_graphs)
  # Half of a real checkpoint: what a kill or a full disk leaves.
  from regal.learning import checkpoint
  checkpoint.save(str(folder / "whole.msgpack"), {"w": list(range(100))}, {"step": 1})
  blob = (folder / "whole.msgpack").read_bytes()
  (folder / "truncated_policy" / "checkpoint.msgpack").write_bytes(blob[:len(blob) // 2])
  (folder / "whole.msgpack").unlink()
  before = _digests(folder)
  results = {}
  for module, cases in (("regal.optimize", OPTIMIZE_CASES), ("regal.train", TRAIN_CASES),
                        ("experiments.sweep", SWEEP_CASES)):
    results.update(_run_module(module, cases, folder))
  for case_id, args, _, _ in SHARDED_CASES:
    run = subprocess.run([sys.executable, "-m", "datasets.sharded", *args], cwd=folder,
                         capture_output=True, text=True, timeout=120)
    results[case_id] = {"code": run.returncode, "stdout": run.stdout, "stderr": run.stderr}
  return results, before, _digests(folder), folder


ALL_CASES = OPTIMIZE_CASES + TRAIN_CASES + SWEEP_CASES + SHARDED_CASES


@pytest.mark.parametrize("case_id, args, code, message", ALL_CASES,
                         ids=[case[0] for case in ALL_CASES])
def test_bad_input_gets_one_line(outcomes, case_id, args, code, message):
  results, before, after, _ = outcomes
  result = results[case_id]
  assert result["code"] == code, result
  error_lines = [line for line in result["stderr"].splitlines() if line.startswith("error: ")]
  assert len(error_lines) == 1 and message in error_lines[0], result["stderr"]
  assert "Traceback" not in result["stderr"], result["stderr"]
  # No input changed; what a refused case would have written is absent.
  changed = {name for name in before if after.get(name) != before[name]}
  assert not changed, changed


def test_only_the_infeasible_result_was_written(outcomes):
  """Refused runs wrote nothing; the infeasible one wrote its result, which says so."""
  _, before, after, folder = outcomes
  assert set(after) - set(before) == {"infeasible.json"}
  data = json.loads((folder / "infeasible.json").read_text())
  assert data["feasible"] is False and max(data["memory_excess"]) > 0
  assert data["objective"] > data["makespan"]  # The penalty score, not a runtime.


def test_cli_names_where_results_went_or_that_none_were_saved(outcomes):
  results, _, _, _ = outcomes
  assert "wrote infeasible.json" in results["no_placement_fits_memory"]["stdout"]
  assert "INFEASIBLE" in results["no_placement_fits_memory"]["stdout"]


def test_names_with_control_characters_survive_costgraph_text(tmp_path):
  builder = GraphBuilder("g")
  builder.add_op('carriage\rreturn "quoted" back\\slash\ttab\nnewline', 1.0)
  builder.add_op("plain", 2.0)
  builder.add_control_edge(0, 1)
  graph = builder.build()
  path = str(tmp_path / "g.pbtxt")
  graph_io.save_graph(graph, path)
  assert "\r" not in open(path, newline="").read()
  assert list(graph_io.load_graph(path).op_names) == list(graph.op_names)


def test_a_corrupt_dataset_cache_is_rebuilt(tmp_path):
  from datasets import dataset as dataset_lib
  config = dataset_lib.SyntheticDatasetConfig(num_train=2, num_valid=1, num_test=1)
  first = dataset_lib.load_or_build_synthetic(config, data_dir=str(tmp_path))
  (cache,) = tmp_path.glob("synthetic-*/train.npz")
  cache.write_bytes(cache.read_bytes()[:100])
  again = dataset_lib.load_or_build_synthetic(config, data_dir=str(tmp_path))
  assert again["train"] == first["train"]
  assert dataset_lib.load_or_build_synthetic(config, data_dir=str(tmp_path))["train"] == \
      first["train"]


def _catches_sigterm(pid: int) -> bool:
  with open(f"/proc/{pid}/status") as f:
    caught = next(line for line in f if line.startswith("SigCgt:")).split()[1]
  return bool(int(caught, 16) & (1 << (15 - 1)))


def _interrupted_run(tmp_path, args, signum, after_seconds):
  process = subprocess.Popen([sys.executable, "-m", "regal.optimize", *args], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 120
  while time.time() < deadline and not _catches_sigterm(process.pid):
    time.sleep(0.1)  # Python is still importing: the CLI has not taken the signals yet.
  time.sleep(after_seconds)
  process.send_signal(signum)
  stdout, stderr = process.communicate(timeout=120)
  assert "Traceback" not in stderr, stderr
  errors_printed = [line for line in stderr.splitlines() if line.startswith("error: ")]
  assert len(errors_printed) == 1, (process.returncode, stdout, stderr)
  return process.returncode, stdout, errors_printed[0]


def test_sigint_stops_the_search_and_writes_the_best_so_far(tmp_path):
  graph_io.save_graph(_chain(60), str(tmp_path / "g.json"))
  code, stdout, line = _interrupted_run(
      tmp_path, ["--graph", "g.json", "--evals", "1000000000", "--out", "r.json"],
      signal.SIGINT, 3)
  assert code == 130 and "interrupted by SIGINT: stopped early" in line
  assert "best found so far" in stdout
  result = json.loads((tmp_path / "r.json").read_text())
  assert result["interrupted"] is True and result["evaluations"] < 1000000000


def test_sigterm_outside_the_search_exits_at_once(tmp_path):
  """Random search is not stoppable by generation: SIGTERM ends the process, writing
  nothing."""

  from datasets.synthetic import sized_graph
  graph_io.save_graph(sized_graph(80), str(tmp_path / "g.json"))
  code, _, line = _interrupted_run(
      tmp_path, ["--graph", "g.json", "--devices", "4", "--method", "random", "--evals",
                 "1000000000", "--out", "r.json"], signal.SIGTERM, 3)
  assert code == 143 and line == "error: interrupted by SIGTERM"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]
