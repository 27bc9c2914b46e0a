"""Bad input, one case per row: each ends in one `error: ...` line and its exit code, with no
traceback and no file written or clobbered. The command lines of one CLI run in one process
(`tests/cli_cases.py`), so the table stays fast."""
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest
from conftest import REPO_ROOT

from regal_datasets import io as graph_io
from regal_datasets.graph import GraphBuilder

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


def _profiled(nodes=None, cap=10.0, fpgas=2, cpus=1, **node_changes) -> str:
  """A profiled workload (msr-fiddle/dnn-partitioning's JSON): a chain of `nodes` ops."""
  nodes = nodes or [{"id": i, "supportedOnFpga": 1, "cpuLatency": 4.0, "fpgaLatency": 1.0,
                     "isBackwardNode": 0, "size": 2.0} for i in range(3)]
  nodes[0].update(node_changes)
  edges = [{"sourceId": a["id"], "destId": b["id"], "cost": 0.5} for a, b in zip(nodes,
                                                                                 nodes[1:])]
  return json.dumps({"maxSizePerFPGA": cap, "maxFPGAs": fpgas, "maxCPUs": cpus,
                     "nodes": [{k: v for k, v in n.items() if v is not None} for n in nodes],
                     "edges": edges})


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
      "tanh_4x6.json": graph_io.graph_to_text(_tanh_4x6(), "json"),
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
      "devices_deep.json": '{"num_devices":' + "[" * 100_000 + "]" * 100_000 + "}",
      "devices_400_digits.json": '{"num_devices": 2, "speed": 1' + "0" * 400 + "}",
      "devices_5000_digits.json": '{"num_devices": 2, "speed": 1' + "0" * 5000 + "}",
      "devices_speed_1e300.json": json.dumps({"num_devices": 2, "speed": 1e300}),
      "sizes_past_float32_memory.json": _json_graph(size=3e38, metadata={
          "note": "one tensor fits float32; with the op's working memory it does not"}),
      "bad_config.py": "def get_config(:\n",
      "truncated_policy/checkpoint.msgpack": "",  # Filled with half a real checkpoint below.
      "truncated_prior/prior.msgpack": "",  # Likewise.
      "a_file": "not a directory",
      "profiled_good.json": _profiled(),
      "devices_unlike.json": json.dumps({"num_devices": 2, "speed": [1.0, 2.0]}),
      "devices_tiny.json": json.dumps({"num_devices": 2, "memory_capacity": 1.0}),
      "devices_one_fast.json": json.dumps({"num_devices": 1, "memory_capacity": 100.0,
                                           "speed": 4.0}),
      "profiled_negative.json": _profiled(fpgaLatency=-1.0),
      "profiled_deep.json": '{"maxSizePerFPGA": 1, "nodes": ' + "[" * 100_000 + "]" * 100_000
                            + "}",
      "profiled_5000_digits.json": _profiled().replace('"maxSizePerFPGA": 10.0',
                                                       '"maxSizePerFPGA": 1' + "0" * 5000),
      "profiled_400_digits.json": _profiled().replace('"maxSizePerFPGA": 10.0',
                                                      '"maxSizePerFPGA": 1' + "0" * 400),
      "profiled_fpgas_1e300.json": _profiled(fpgas=1e300),
      "profiled_fpgas_1e9.json": _profiled(fpgas=10 ** 9),
      "profiled_costs_1e308.json": _profiled().replace('"cost": 0.5', '"cost": 1e308'),
      "profiled_cpu_latencies_1e308.json": _profiled(nodes=[
          {"id": i, "supportedOnFpga": 1, "cpuLatency": 1e308, "fpgaLatency": 1.0,
           "isBackwardNode": 0, "size": 2.0} for i in range(3)]),
      "devices_speed_1e-308.json": json.dumps({"num_devices": 2, "speed": 1e-308}),
      "profiled_missing.json": _profiled(cpuLatency=None),
      "profiled_class_over_cap.json": _profiled(size=11.0),
      "profiled_needs_more.json": _profiled(cpus=0, fpgas=1, size=9.0),
      # Three 6-byte ops, two accelerators of 10 bytes, no CPU: 18 bytes fit 20 in total, but
      # no two ops share an accelerator.
      "profiled_unpackable.json": _profiled(cpus=0, size=6.0, nodes=[
          {"id": i, "supportedOnFpga": 1, "cpuLatency": 4.0, "fpgaLatency": 1.0,
           "isBackwardNode": 0, "size": 6.0} for i in range(3)]),
  }
  for name, text in files.items():
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
  (folder / "devices_binary.json").write_bytes(bytes(range(256)) * 4)
  (folder / "not_onnx.onnx").write_bytes(bytes(range(256)) * 4)
  data = json.loads(files["sizes_past_float32_memory.json"])
  data["ops"][1]["extra_memory"] = 3e38
  (folder / "sizes_past_float32_memory.json").write_text(json.dumps(data))
  (folder / "existing_dir").mkdir()
  (folder / "link_target.json").write_text("to be replaced by a result")
  (folder / "link.json").symlink_to("link_target.json")
  return files


def _tanh_4x6():
  """An imported function whose only dimensions are 4 and 6."""
  import jax
  import jax.numpy as jnp

  from regal_datasets import jax_import
  return jax_import.trace_graph(jnp.tanh, jax.ShapeDtypeStruct((4, 6), jnp.float32))


def _chain(num_ops: int):
  builder = GraphBuilder("chain")
  for i in range(num_ops):
    builder.add_op(f"op{i}", 1.0)
    if i:
      builder.add_data_edge(builder.add_tensor(f"op{i - 1}", 1.0), f"op{i}")
  return builder.build()


OPTIMIZE_CASES = [
    # (id, arguments, exit code, what the one line says)
    ("graph_missing", ["--graph", "nonexistent.json", "--out", "refused.json"], 2,
     "no such file"),
    ("graph_and_dataset", ["--graph", "good.json", "--dataset", "synthetic", "--out",
                           "refused.json"], 2, "only one of --graph and --dataset"),
    ("dataset_evals_zero", ["--dataset", "synthetic", "--evals", "0", "--out", "refused.json"],
     2, "--evals must be between 1 and"),
    ("cpsat_for_memory", ["--dataset", "synthetic", "--method", "cpsat", "--objective", "memory",
                          "--model", "sync", "--out", "refused.json"], 2,
     "minimizes the makespan"),
    ("time_limit_zero", ["--dataset", "synthetic", "--time_limit", "0", "--out", "refused.json"],
     2, "--time_limit must be a positive finite number"),
    ("coarsen_many", ["--dataset", "synthetic", "--coarsen", "many", "--out", "refused.json"], 2,
     "--coarsen takes off, auto or"),
    ("devices_zero", ["--graph", "good.json", "--devices", "0", "--out", "refused.json"], 2,
     "device count must be an integer >= 1, got 0"),
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
    ("evals_zero", ["--graph", "good.json", "--evals", "0"], 2,
     "--evals must be between 1 and 1,000,000,000, got 0"),
    ("memory_limit_ignored", ["--graph", "good.json", "--memory_limit", "5"], 2,
     "--memory_limit would do nothing here: only --objective runtime_under_memory reads it"),
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
    # Flags that the other flags make do nothing.
    ("evals_with_heft", ["--graph", "good.json", "--method", "heft", "--evals", "7"], 2,
     "--evals would do nothing here: only --method brkga, doppler, local_search"),
    ("time_limit_with_heft", ["--graph", "good.json", "--method", "heft", "--time_limit", "3"],
     2, "--time_limit would do nothing here: only --method brkga, cpsat, quickp read it (here: "
     "--method heft)"),
    ("seed_arms_with_heft", ["--graph", "good.json", "--method", "heft", "--seed_arms", "heft"],
     2, "--seed_arms would do nothing here"),
    ("exact_solver_with_heft", ["--graph", "good.json", "--method", "heft", "--model", "delay",
                                "--exact_solver", "off"], 2,
     "--exact_solver would do nothing here"),
    ("exact_solver_on_wc", ["--graph", "good.json", "--exact_solver", "off"], 2,
     "--exact_solver would do nothing here"),
    ("consumer_decoder_on_doppler", ["--graph", "good.json", "--model", "doppler",
                                     "--decoder", "consumer"], 2,
     "--decoder consumer orders transfers, which the doppler model does not read"),
    ("seed_with_heft", ["--graph", "good.json", "--method", "heft", "--seed", "3"], 2,
     "--seed would do nothing here: only --method brkga"),
    ("engine_with_heft", ["--graph", "good.json", "--method", "heft", "--engine", "jax"], 2,
     "--engine would do nothing here"),
    ("doppler_save_without_doppler", ["--graph", "good.json", "--doppler_save", "p.msgpack"], 2,
     "--doppler_save would do nothing here"),
    ("reward_without_doppler", ["--graph", "good.json", "--reward", "model"], 2,
     "--reward would do nothing here"),
    ("missing_doppler_checkpoint", ["--graph", "good.json", "--method", "doppler",
                                    "--doppler_checkpoint", "missing.msgpack"], 2,
     "--doppler_checkpoint missing.msgpack: no such file"),
    ("missing_policy", ["--graph", "good.json", "--policy", "no_such_run"], 2,
     "--policy no_such_run: no such directory"),
    ("no_shipped_policy", ["--graph", "good.json", "--devices", "3", "--policy", "default"], 2,
     "--policy default: no shipped policy for the wc model on 3 devices (runtime); shipped: "),
    ("policy_on_unlike_devices", ["--graph", "good.json", "--device_spec", "devices_unlike.json",
                                  "--policy", "default"], 2,
     "trained on identical devices, every pair linked alike; these 2 devices are of different "
     "speeds"),
    ("prior_without_brkga", ["--graph", "good.json", "--method", "heft", "--prior",
                             "bottom_level"], 2, "--prior steers BRKGA's fresh keys"),
    ("prior_unknown", ["--graph", "good.json", "--prior", "oracle"], 2,
     "flag --prior=oracle: value should be one of <none|bottom_level|group_island>"),
    ("group_island_on_one_group", ["--graph", "good.json", "--prior", "group_island"], 2,
     "--prior group_island splits the ops among link groups, but these 2 devices form one"),
    ("doppler_checkpoint_without_doppler", ["--graph", "good.json", "--doppler_checkpoint",
                                            "truncated_policy/checkpoint.msgpack"], 2,
     "--doppler_checkpoint would do nothing here"),
    ("doppler_evals_without_the_arm", ["--graph", "good.json", "--doppler_evals", "64"], 2,
     "--doppler_evals would do nothing here"),
    ("doppler_samples_without_the_arm", ["--graph", "good.json", "--doppler_samples", "3"], 2,
     "--doppler_samples would do nothing here"),
    ("index_with_graph", ["--graph", "good.json", "--index", "3"], 2,
     "--index would do nothing here: only a dataset's graph (no --graph) reads it"),
    ("split_with_graph", ["--graph", "good.json", "--split", "train"], 2,
     "--split would do nothing here"),
    ("data_dir_with_graph", ["--graph", "good.json", "--data_dir", "existing_dir"], 2,
     "--data_dir would do nothing here"),
    ("format_without_graph", ["--format", "json"], 2, "--format would do nothing here"),
    ("execute_mode_without_execute", ["--graph", "good.json", "--execute_mode", "strict"], 2,
     "--execute_mode would do nothing here"),
    ("execute_repeats_without_execute", ["--graph", "good.json", "--execute_repeats", "2"], 2,
     "--execute_repeats would do nothing here"),
    ("stage3_steps_without_measured", ["--graph", "good.json", "--method", "doppler",
                                       "--stage3_steps", "3"], 2,
     "--stage3_steps would do nothing here"),
    ("devices_with_a_device_spec", ["--graph", "four.json", "--device_spec",
                                    "devices_unlike.json", "--devices", "3"], 2,
     "--devices would do nothing here"),
    # Values past float32, JSON or what the search can count.
    ("speed_1e300", ["--graph", "good.json", "--device_spec", "devices_speed_1e300.json"], 2,
     "below float32's smallest normal number"),
    ("memory_past_float32", ["--graph", "sizes_past_float32_memory.json"], 2,
     "in which the models track peak memory"),
    ("time_limit_inf", ["--graph", "good.json", "--time_limit", "inf"], 2,
     "--time_limit must be a finite number, got inf"),
    ("memory_limit_inf", ["--graph", "good.json", "--objective", "runtime_under_memory",
                          "--memory_limit", "inf"], 2,
     "--memory_limit must be a finite number, got inf"),
    ("seed_2_to_the_64", ["--graph", "good.json", "--seed", str(2 ** 64)], 2,
     "is not an integer in the range [0, 4294967295]"),
    ("evals_1e30", ["--graph", "good.json", "--evals", "1e30"], 2, "flag --evals=1e30"),
    ("evals_past_the_counters", ["--graph", "good.json", "--evals", str(10 ** 20)], 2,
     "--evals must be between 1 and 1,000,000,000"),
    ("doppler_samples_1e8", ["--graph", "good.json", "--seed_arms", "doppler",
                             "--doppler_samples", "100000000"], 2,
     "is not an integer in the range [0, 1024]"),
    ("not_onnx", ["--graph", "not_onnx.onnx"], 2, "not an ONNX model"),
    # Sharding and accelerator presets (issue 70).
    ("shard_word", ["--graph", "tanh_4x6.json", "--shard", "many"], 2,
     "--shard must be auto, off or a shard count, got 'many'"),
    ("shard_not_imported", ["--graph", "four.json", "--shard", "auto"], 2,
     "records no op shapes"),
    ("shard_divides_no_dimension", ["--graph", "tanh_4x6.json", "--shard", "5"], 2,
     "--shard 5 divides no splittable dimension"),
    ("shard_zero", ["--graph", "tanh_4x6.json", "--method", "data_parallel", "--shard", "0"],
     2, "--shard must be between 1 and 1024, got 0"),
    ("data_parallel_not_imported", ["--graph", "four.json", "--method", "data_parallel"], 2,
     "records no op shapes"),
    ("preset_unknown", ["--graph", "tanh_4x6.json", "--device_preset", "h200"], 2,
     "--device_preset"),
    ("preset_on_abstract_costs", ["--graph", "four.json", "--device_preset", "h100"], 2,
     "records no FLOPs"),
    # Device descriptions that are not ones.
    ("devices_binary", ["--graph", "four.json", "--device_spec", "devices_binary.json"], 2,
     "not a text file (binary content)"),
    ("devices_nested_100k_deep", ["--graph", "four.json", "--device_spec", "devices_deep.json"],
     2, "nested too deeply"),
    ("devices_400_digits", ["--graph", "four.json", "--device_spec",
                            "devices_400_digits.json"], 2, "beyond float64's range"),
    ("devices_5000_digits", ["--graph", "four.json", "--device_spec",
                             "devices_5000_digits.json"], 2,
     "a number has more digits than Python reads"),
    # Refused before the work they would have come after.
    ("doppler_arm_budget", ["--graph", "good.json", "--seed_arms", "doppler", "--evals",
                            "200"], 2, "after the guides spend 1026"),
    ("compare_unguided_without_a_policy", ["--graph", "good.json", "--compare_unguided"], 2,
     "--compare_unguided would do nothing here"),
    ("out_and_gantt_on_one_file", ["--graph", "good.json", "--out", "r.png", "--gantt",
                                   "r.png"], 2, "--out, --gantt must name different files"),
    ("out_under_proc", ["--graph", "good.json", "--out", "/proc/regal_result.json"], 2,
     "--out /proc/regal_result.json: cannot write there"),
    ("out_names_a_directory", ["--graph", "good.json", "--out", "new_dir/"], 2,
     "--out new_dir/: names a directory"),
    ("out_name_too_long", ["--graph", "good.json", "--out", "n" * 300 + ".json"], 2,
     "longer than the 255 bytes the file system allows"),
    ("batch_out_dir_unwritable", ["--graph", "good.json,four.json", "--out_dir",
                                  "/proc/regal_results"], 2,
     "--out_dir /proc/regal_results/good.json: cannot write there"),
    ("profiled_negative_latency", ["--graph", "profiled_negative.json", "--objective",
                                   "throughput", "--out", "refused.json"], 2,
     "node 0: fpgaLatency must be finite and non-negative, got -1.0"),
    ("profiled_missing_field", ["--graph", "profiled_missing.json", "--objective",
                                "throughput", "--out", "refused.json"], 2,
     "node 0 lacks cpuLatency"),
    ("profiled_class_over_cap", ["--graph", "profiled_class_over_cap.json", "--objective",
                                 "throughput", "--out", "refused.json"], 2,
     "node 0's co-location class needs 11 bytes, more than one accelerator holds"),
    ("profiled_needs_more_accelerators", ["--graph", "profiled_needs_more.json", "--objective",
                                          "throughput", "--out", "refused.json"], 2,
     "need at least 2 accelerators, and maxFPGAs is 1"),
    ("profiled_nested_100k_deep", ["--graph", "profiled_deep.json", "--objective",
                                   "throughput", "--out", "refused.json"], 2,
     "profiled_deep.json: not a profiled workload (nested too deeply)"),
    ("profiled_5000_digits", ["--graph", "profiled_5000_digits.json", "--objective",
                              "throughput", "--out", "refused.json"], 2,
     "a number has more digits than Python reads"),
    ("profiled_400_digits", ["--graph", "profiled_400_digits.json", "--objective",
                             "throughput", "--out", "refused.json"], 2,
     "maxSizePerFPGA is 100000000000... (401 characters), beyond float64's range"),
    ("profiled_fpgas_1e300", ["--graph", "profiled_fpgas_1e300.json", "--objective",
                              "throughput", "--out", "refused.json"], 2,
     "maxFPGAs is 1e+300, above the 1024 devices the models can hold"),
    ("profiled_fpgas_past_memory", ["--graph", "profiled_fpgas_1e9.json", "--objective",
                                    "throughput", "--out", "refused.json"], 2,
     "maxFPGAs is 1000000000, above the 1024 devices"),
    ("profiled_costs_1e308", ["--graph", "profiled_costs_1e308.json", "--objective",
                              "throughput", "--out", "refused.json"], 2,
     "the edge costs add up to more than float64 holds"),
    ("profiled_cpu_latencies_1e308", ["--graph", "profiled_cpu_latencies_1e308.json",
                                      "--objective", "throughput", "--out", "refused.json"], 2,
     "the cpuLatency values add up to more than float64 holds"),
    ("profiled_on_a_speed_of_1e-308", ["--graph", "profiled_good.json", "--objective",
                                       "throughput", "--method", "pipedream", "--device_spec",
                                       "devices_speed_1e-308.json", "--out", "refused.json"], 2,
     "the accelerator latencies divided by the speed add up to more than float64 holds"),
    ("throughput_evals_past_the_counters", ["--graph", "profiled_good.json", "--objective",
                                            "throughput", "--evals", str(10 ** 20), "--out",
                                            "refused.json"], 2,
     "--evals must be between 1 and 1,000,000,000"),
    ("throughput_of_a_graph_without_profile", ["--graph", "good.json", "--objective",
                                               "throughput", "--out", "refused.json"], 2,
     "has no profile"),
    ("throughput_with_devices", ["--graph", "profiled_good.json", "--objective", "throughput",
                                 "--devices", "3", "--out", "refused.json"], 2,
     "--devices would do nothing with --objective throughput"),
    ("throughput_with_a_schedule_method", ["--graph", "profiled_good.json", "--objective",
                                           "throughput", "--method", "heft", "--out",
                                           "refused.json"], 2,
     "--objective throughput takes --method cpsat, search, pipedream"),
    ("split_method_without_throughput", ["--graph", "profiled_good.json", "--method",
                                         "pipedream", "--out", "refused.json"], 2,
     "--method pipedream splits a profiled workload: it needs --objective throughput or"),
    ("seed_of_a_deterministic_split", ["--graph", "profiled_good.json", "--objective",
                                       "throughput", "--method", "pipedream", "--seed", "2",
                                       "--out", "refused.json"], 2,
     "--seed would do nothing here: --method pipedream does not read it (only cpsat, search"),
    ("blocks_with_an_objective", ["--graph", "profiled_good.json", "--model", "blocks",
                                  "--objective", "memory", "--out", "refused.json"], 2,
     "--model blocks minimizes a profiled workload's single-sample latency"),
    ("throughput_on_unlike_accelerators", ["--graph", "profiled_good.json", "--objective",
                                           "throughput", "--device_spec", "devices_unlike.json",
                                           "--out", "refused.json"], 2,
     "a profiled workload's accelerators are alike, but speed differs between devices"),
    ("throughput_on_accelerators_too_small", ["--graph", "profiled_good.json", "--objective",
                                              "throughput", "--device_spec",
                                              "devices_tiny.json", "--out", "refused.json"], 2,
     "co-location class needs 2 bytes, more than one accelerator holds (maxSizePerFPGA 1)"),
    ("no_split_fits_memory", ["--graph", "profiled_unpackable.json", "--objective",
                              "throughput", "--out", "infeasible_split.json"], 3,
     "no split found fits the memory caps"),
    ("no_placement_fits_memory", ["--graph", "good.json", "--objective",
                                  "runtime_under_memory", "--memory_limit", "1", "--evals",
                                  "200", "--out", "infeasible.json"], 3,
     "no solution found fits the memory limit"),
]
TRAIN_CASES = [
    ("batch_size_zero", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
                         "--config.batch_size=0"], 2,
     "config.batch_size must be positive"),
    ("negative_steps", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
                        "--config.num_steps=-1"], 2,
     "config.num_steps must be non-negative"),
    ("unscorable_model_and_objective", [
        f"--config={REPO_ROOT}/regal/learning/configs/default.py:test", "--config.model=delay",
        "--config.objective=memory"], 2, "the delay model has no memory"),
    ("more_eval_seeds_than_reference_seeds", [
        f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
        "--config.eval_seeds=3"], 2,
     "config.eval_seeds (3) must not exceed"),
    ("truncated_checkpoint_resumed", [
        f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
        "--config.learner=mutants", "--workdir", "truncated_policy"], 2, "checkpoint"),
    ("truncated_prior_resumed", [
        f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
        "--workdir", "truncated_prior"], 2, "checkpoint"),
    ("prior_q_out_of_range", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
                              "--config.prior.qs=(0.5,1.5)"], 2,
     "config.prior.qs must be numbers in (0, 1]"),
    ("prior_labels_no_longer_than_the_budget", [
        f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
        "--config.prior.label_evals=500"], 2, "config.prior.label_evals (500) must exceed"),
    ("mutant_setting_with_the_prior_learner", [
        f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
        "--config.reward=measured"], 2,
     "--config.reward would do nothing here: config.learner is prior"),

    # Last: a config file that fails to load leaves the flag parser without its overrides.
    ("unknown_preset", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:nope"], 2,
     "unknown preset 'nope'"),
]
SEARCH_AB_CASES = [
    ("search_ab_unknown_setting", ["--variant", "no_such=1", "--out", "ab"], 2,
     "--variant: unknown setting 'no_such'"),
    ("search_ab_no_variant", ["--out", "ab"], 2, "--variant must name at least one setting"),
    ("search_ab_setting_out_of_range", ["--variant", "relabel_fraction=2", "--out", "ab"], 2,
     "--variant relabel_fraction=2.0: BRKGA preset 'default': bad search setting: out of "
     "range"),
    ("search_ab_quick_with_seeds", ["--variant", "climbers=1", "--quick", "--seeds", "3-4",
                                    "--out", "ab"], 2, "--quick runs seeds 0-1"),
    ("search_ab_bad_seeds", ["--variant", "climbers=1", "--seeds", "9-2", "--out", "ab"], 2,
     "--seeds names no seed"),
    ("search_ab_seeds_past_memory", ["--variant", "climbers=1", "--seeds", "0-100000000000",
                                     "--out", "ab"], 2,
     "--seeds '0-100000000000' names 100,000,000,001 seeds; at most 10,000"),
    ("search_ab_out_is_a_file", ["--variant", "climbers=1", "--out", "a_file"], 2,
     "--out a_file: is a file; it names a folder"),
]
SEARCH_PROFILE_CASES = [
    ("search_profile_quick_with_seeds", ["--quick", "--seeds", "3", "--out", "profile"], 2,
     "--quick fixes the graph, budget and seeds: drop --seeds"),
    ("search_profile_tiny_budget", ["--evals", "10", "--out", "profile"], 2,
     "flag --evals=10: 10 is not an integer in the range [2000, 1000000000]"),
]
SWEEP_CASES = [
    ("negative_subsample", ["--sweep", "brkga_tuning", "--subsample=-3", "--out", "sweeps"],
     2, "flag --subsample=-3: -3 is not an integer in the range [0, 1000000]"),
    ("local_with_ray_address", ["--sweep", "selftest", "--local", "--ray_address", "auto",
                                "--out", "sweeps"], 2, "--ray_address would do nothing here"),
    ("local_with_num_cpus", ["--sweep", "selftest", "--local", "--num_cpus", "2", "--out",
                             "sweeps"], 2, "--num_cpus would do nothing here"),
    ("negative_num_cpus", ["--sweep", "selftest", "--num_cpus=-4", "--out", "sweeps"], 2,
     "-4 is not an integer in the range"),
    ("presets_file_is_a_directory", ["--sweep", "brkga_tuning", "--quick", "--local",
                                     "--save_preset", "tuned", "--presets_file",
                                     "existing_dir", "--out", "sweeps"], 2,
     "--presets_file existing_dir: is a directory"),
    ("out_is_a_file", ["--sweep", "selftest", "--local", "--out", "a_file"], 2,
     "--out a_file: is a file; it names a folder"),
]
SHARDED_CASES = [
    ("zero_flops_per_byte", ["--flops_per_byte", "0"], 2, "flops_per_byte must be positive"),
    ("negative_size", ["--size=-5"], 2, "size must be positive, got -5"),
    ("a_million_devices", ["--devices", "1000000"], 2, "device count must be between 1 and 1024"),
    ("size_of_201_digits", ["--size", "1" + "0" * 200], 2,
     "size must be at most 2147483647 (2^31 - 1), got 100000000000... (201 characters)"),
    ("seq_len_of_chain_mm", ["--seq_len", "5"], 2,
     "--seq_len would do nothing here: --workload chain_mm does not read it"),
]
ZOO_CASES = [
    ("zoo_layers_of_resnet", ["--model", "resnet50", "--layers", "2"], 2,
     "--layers would do nothing here: --model resnet50 does not read it"),
    ("zoo_batch_zero", ["--batch", "0"], 2, "flag --batch=0"),
    ("zoo_train_a_block", ["--model", "llama_block", "--step", "train"], 2,
     "--step train: llama_block has no training head"),
    ("zoo_remat_forward", ["--model", "gpt2_small", "--remat"], 2,
     "--remat would do nothing here"),
    ("zoo_out_unwritable", ["--out", "/proc/regal_zoo.json"], 2,
     "--out /proc/regal_zoo.json: cannot write there"),
]
BUILD_CASES = [
    ("no_training_graphs", ["--num_train", "0"], 2, "flag --num_train=0"),
    ("no_test_graphs", ["--num_test", "0"], 2, "flag --num_test=0"),
    ("negative_dataset_seed", ["--seed=-1"], 2, "flag --seed=-1"),
    ("build_out_is_a_file", ["--out", "a_file", "--num_train", "1", "--num_valid", "1",
                             "--num_test", "1"], 2, "--out a_file: is a file; it names a folder"),
]
# Outputs that must be written, as open() would write them, without replacing what is there.
LONG_NAME = "n" * 240 + ".json"  # Legal (245 bytes); its temp file's name was not.
ACCEPTED_CASES = [
    ("out_is_dev_null", ["--graph", "good.json", "--method", "heft", "--out", os.devnull]),
    ("out_is_a_symlink", ["--graph", "good.json", "--method", "heft", "--out", "link.json"]),
    ("out_name_of_245_bytes", ["--graph", "good.json", "--method", "heft", "--out", LONG_NAME]),
    # PipeDream-style: the device spec's path without compiling the search's kernels here.
    ("throughput_on_a_device_spec", ["--graph", "profiled_good.json", "--objective",
                                     "throughput", "--method", "pipedream", "--device_spec",
                                     "devices_one_fast.json", "--out", "split_on_spec.json"]),
]
HELP_CASES = {"regal.optimize": ("optimize_help", ["--help"]),
              "regal.execute.calibrate": ("calibrate_help", ["-h"]),
              "regal_datasets.build": ("build_help", ["--helpshort"])}
ACCEPTED_WRITES = {"link_target.json", "link.json"}  # The symlink's target, read through it too.
CONVERT_CASES = [
    ("convert_out_under_proc", ["--graph", "good.json", "--out", "/proc/regal_graph.json"], 2,
     "--out /proc/regal_graph.json: cannot write there"),
    ("convert_onto_its_input", ["--graph", "good.json", "--out", "good.json"], 2,
     "--out good.json: is the input good.json, which it would overwrite"),
    ("convert_onto_a_doppler_input", ["--graph", "big_int.txt", "--out", "big_int.txt"], 2,
     "which it would overwrite"),
]
CALIBRATE_CASES = [
    ("calibrate_100000_devices", ["--devices", "100000"], 2,
     "100000 is not an integer in the range [1, 64]"),
    ("report_is_the_input", ["--graph", "good.json", "--report", "good.json"], 2,
     "--report good.json: is the input good.json, which it would overwrite"),
    ("spec_out_is_the_input", ["--graph", "good.json", "--spec_out", "good.json"], 2,
     "--spec_out good.json: is the input good.json, which it would overwrite"),
    ("plot_under_a_file", ["--plot", "a_file/plot.png"], 2,
     "a_file is a file, not a directory"),
    ("report_and_spec_out_on_one_file", ["--report", "r.json", "--spec_out", "r.json"], 2,
     "--spec_out, --report must name different files"),
    ("workload_with_graph", ["--graph", "good.json", "--workload", "ffnn"], 2,
     "--workload would do nothing here"),
]


def _digests(folder) -> dict[str, str]:
  return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
          for p in sorted(folder.rglob("*")) if p.is_file()}


def run_module(module: str, cases, cwd) -> dict:
  """{case id: {code, stdout, stderr}} of (id, args, ...) command lines of one CLI, all run in
  one process by `cli_cases.py`."""
  payload = json.dumps([{"id": case[0], "args": case[1], "cwd": str(cwd)} for case in cases])
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
  (folder / "truncated_prior" / "prior.msgpack").write_bytes(blob[:len(blob) // 2])
  (folder / "whole.msgpack").unlink()
  before = _digests(folder)
  results = {}
  for module, cases in (("regal.optimize", OPTIMIZE_CASES + ACCEPTED_CASES),
                        ("regal.train", TRAIN_CASES),
                        ("regal_experiments.sweep", SWEEP_CASES),
                        ("regal_experiments.search_ab", SEARCH_AB_CASES),
                        ("regal_experiments.bench.search_profile", SEARCH_PROFILE_CASES),
                        ("regal_datasets.build", BUILD_CASES),
                        ("regal_datasets.convert", CONVERT_CASES),
                        ("regal.execute.calibrate", CALIBRATE_CASES)):
    help_case = [HELP_CASES[module]] if module in HELP_CASES else []
    results.update(run_module(module, help_case + cases, folder))
  # One interpreter per case: these modules read their flags when they start.
  for module, case_id, args in [("regal_datasets.sharded", *case[:2]) for case in SHARDED_CASES] + [
      ("regal_datasets.zoo", *case[:2]) for case in ZOO_CASES] + [
      ("regal.train", *case[:2]) for case in TRAIN_IMPORT_CASES]:
    run = subprocess.run([sys.executable, "-m", module, *args], cwd=folder,
                         capture_output=True, text=True, timeout=120)
    results[case_id] = {"code": run.returncode, "stdout": run.stdout, "stderr": run.stderr}
  return results, before, _digests(folder), folder


# ml_collections reads --config.FIELD overrides when the module defines its flags.
TRAIN_IMPORT_CASES = [
    ("config_field_unknown", ["--config.nonexistent=1", "--workdir", "run"], 2,
     "--config.nonexistent: the config has no field 'nonexistent'"),
    ("config_syntax_error", ["--config=bad_config.py", "--workdir", "run"], 2,
     "bad_config.py, line 1: invalid syntax (a config file)"),
    # `--config.learner` once per interpreter: ml_collections defines an override's flag when
    # it first parses it (the batched cases above hold one already).
    ("unknown_learner", [f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
                         "--config.learner=nope"], 2,
     "unknown learner 'nope'; known: prior, mutants"),
    ("prior_setting_with_the_mutant_learner", [
        f"--config={REPO_ROOT}/regal/learning/configs/default.py:test",
        "--config.learner=mutants", "--config.prior.steps=3"], 2,
     "--config.prior.steps would do nothing here: config.learner is mutants"),
]
ALL_CASES = (OPTIMIZE_CASES + TRAIN_CASES + SWEEP_CASES + SEARCH_AB_CASES
             + SEARCH_PROFILE_CASES + SHARDED_CASES + ZOO_CASES
             + BUILD_CASES + CONVERT_CASES + CALIBRATE_CASES + TRAIN_IMPORT_CASES)


@pytest.mark.parametrize("case_id, args, code, message", ALL_CASES,
                         ids=[case[0] for case in ALL_CASES])
def test_bad_input_gets_one_line(outcomes, case_id, args, code, message):
  results, before, after, _ = outcomes
  result = results[case_id]
  assert result["code"] == code, result
  error_lines = [line for line in result["stderr"].splitlines() if line.startswith("error: ")]
  assert len(error_lines) == 1 and message in error_lines[0], result["stderr"]
  assert "Traceback" not in result["stderr"], result["stderr"]
  # No input changed (but what the accepted cases write); a refused case wrote nothing.
  changed = {name for name in before if after.get(name) != before[name]}
  assert changed <= ACCEPTED_WRITES, changed - ACCEPTED_WRITES


@pytest.mark.parametrize("case_id", [case[0] for case in ACCEPTED_CASES])
def test_accepted_outputs_are_written_where_open_would_write(outcomes, case_id):
  results, _, _, folder = outcomes
  assert results[case_id]["code"] == 0, results[case_id]
  assert stat.S_ISCHR(os.stat(os.devnull).st_mode)  # Still the device, not a file.
  assert (folder / "link.json").is_symlink()
  written = {"out_is_a_symlink": "link_target.json", "out_name_of_245_bytes": LONG_NAME,
             "throughput_on_a_device_spec": "split_on_spec.json"}
  if case_id in written:
    kind = "regal.split_result" if case_id.startswith("throughput") else "regal.result"
    assert json.loads((folder / written[case_id]).read_text())["format"] == kind


def test_a_device_spec_replaces_the_workloads_accelerators(outcomes):
  """The file's two accelerators of 10 bytes give 2.5 at best (ops of 1.0, 0.5 per transfer);
  the spec's one accelerator of 100 bytes, 4x as fast, runs the chain of three in 0.75."""
  _, _, _, folder = outcomes
  data = json.loads((folder / "split_on_spec.json").read_text())
  assert data["devices"] == {"accelerators": 1, "cpus": 1, "memory_per_accelerator": 100.0,
                             "from": "devices_one_fast.json"}
  assert data["objective"] == 0.75 and data["feasible"]
  assert data["split"]["fpgas"] == [{"nodes": [0, 1, 2]}]


def test_help_lists_the_flags_by_topic_and_exits_0(outcomes):
  """absl's --help exited 1 and left out flags defined in other modules (--devices)."""
  results = outcomes[0]
  text = results["optimize_help"]["stdout"]
  assert results["optimize_help"]["code"] == 0 and not results["optimize_help"]["stderr"]
  headings = [line for line in text.splitlines() if line and not line.startswith(" ")
              and line.endswith(":")]
  assert headings[:3] == ["Graph:", "Devices:", "Model and objective:"]
  for flag in ("--devices:", "--device_spec:", "--device_preset:", "--evals:", "--gantt:"):
    assert flag in text, flag
  assert text.index("--devices:") < text.index("--model:")  # By topic, not A-Z.
  for case_id, flag in (("calibrate_help", "--plot:"), ("build_help", "--num_train:")):
    assert results[case_id]["code"] == 0 and flag in results[case_id]["stdout"], case_id


def test_only_the_infeasible_result_was_written(outcomes):
  """Refused runs wrote nothing; the infeasible one and the accepted cases wrote their
  results (the symlink's through to its target)."""
  _, before, after, folder = outcomes
  assert set(after) - set(before) == {"infeasible.json", "infeasible_split.json", LONG_NAME,
                                      "split_on_spec.json"}
  assert {name for name in before if after.get(name) != before[name]} == ACCEPTED_WRITES
  data = json.loads((folder / "infeasible.json").read_text())
  assert data["feasible"] is False and max(data["memory_excess"]) > 0
  assert data["objective"] > data["makespan"]  # The penalty score, not a runtime.
  assert data["gap"] is None and data["proven_optimal"] is False  # No gap to a penalty.
  split = json.loads((folder / "infeasible_split.json").read_text())
  assert split["feasible"] is False and split["violations"] and split["gap"] is None


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
  from regal_datasets import dataset as dataset_lib
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


def _interrupted_run(tmp_path, args, signum, after_seconds=0.0, after_line=None):
  """Starts `regal.optimize ARGS`, waits until it has taken the signals (then `after_seconds`,
  or until it prints a line starting with `after_line`), sends `signum`; returns (exit code,
  stdout, its one error line)."""
  process = subprocess.Popen([sys.executable, "-m", "regal.optimize", *args], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 120
  while time.time() < deadline and not _catches_sigterm(process.pid):
    time.sleep(0.01)  # Python is still starting: the CLI has not taken the signals yet.
  seen = []
  if after_line is not None:
    for line in process.stdout:
      seen.append(line)
      if line.startswith(after_line):
        break
  time.sleep(after_seconds)
  process.send_signal(signum)
  stdout, stderr = process.communicate(timeout=120)
  stdout = "".join(seen) + stdout
  assert "Traceback" not in stderr, stderr
  errors_printed = [line for line in stderr.splitlines() if line.startswith("error: ")]
  assert len(errors_printed) == 1, (process.returncode, stdout, stderr)
  return process.returncode, stdout, errors_printed[0]


def test_sigint_stops_the_search_and_writes_the_best_so_far(tmp_path):
  graph_io.save_graph(_chain(60), str(tmp_path / "g.json"))
  code, stdout, line = _interrupted_run(
      tmp_path, ["--graph", "g.json", "--evals", "1000000000", "--out", "r.json"],
      signal.SIGINT, after_line="searching:")
  assert code == 130 and "interrupted by SIGINT: stopped early" in line
  assert "best found so far" in stdout
  result = json.loads((tmp_path / "r.json").read_text())
  assert result["interrupted"] is True and result["evaluations"] < 1000000000
  assert result["details"]["stopped"]["reason"] == "signal"


def test_sigterm_outside_the_search_exits_at_once(tmp_path):
  """Random search is not stoppable by generation: SIGTERM ends the process, writing
  nothing."""

  from regal_datasets.synthetic import sized_graph
  graph_io.save_graph(sized_graph(80), str(tmp_path / "g.json"))
  code, _, line = _interrupted_run(
      tmp_path, ["--graph", "g.json", "--devices", "4", "--method", "random", "--evals",
                 "1000000000", "--out", "r.json"], signal.SIGTERM, after_seconds=4)
  assert code == 143 and line == "error: interrupted by SIGTERM"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]


def test_sigint_while_the_libraries_load_is_one_line(tmp_path):
  """The CLI takes the signals before importing JAX (~1 s), so an interrupt then is the same
  one line as any other, not a KeyboardInterrupt traceback."""
  graph_io.save_graph(_chain(6), str(tmp_path / "g.json"))
  code, _, line = _interrupted_run(tmp_path, ["--graph", "g.json"], signal.SIGINT)
  assert code == 130 and line == "error: interrupted by SIGINT"


def test_an_interrupted_batch_writes_its_graph_and_starts_no_other(tmp_path):
  from regal_datasets.synthetic import sized_graph
  # On 4 devices the first graph's search stays above its lower bound (a chain meets it at
  # once, and the search would stop there): the signal finds it running.
  graph_io.save_graph(sized_graph(30), str(tmp_path / "a.json"))
  graph_io.save_graph(_chain(8), str(tmp_path / "b.json"))
  code, stdout, line = _interrupted_run(
      tmp_path, ["--graph", "a.json,b.json", "--devices", "4", "--evals", "1000000000",
                 "--out_dir", "out"], signal.SIGINT, after_seconds=4)
  assert code == 130 and "interrupted by SIGINT" in line
  assert "1 of 2 graphs not started" in stdout
  assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.json"]
  assert json.loads((tmp_path / "out" / "a.json").read_text())["interrupted"] is True
