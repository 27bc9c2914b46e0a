r"""Real models on real accelerators (issue 70): what splitting ops buys, against one device and
plain data parallelism, with the plans executed on host devices.

  python -m regal_experiments.real_models            # 5 models x 4 and 8 H100s, 3 seeds; ~15 min
  python -m regal_experiments.real_models --quick    # one small GPT-2, 4 H100s, one seed; ~1 min

Part 1, predicted step time on `--preset` accelerators (`regal.parallelism.roofline`: ops in
kernels as XLA fuses them, each GPU's NVLink one port its peers share): for each zoo model (ResNet-50 batch 64, BERT-base 8 x 512,
Inception-v3 batch 32, GPT-2 small 8 x 1024) and a transformer encoder built here as an ONNX
file (2 layers, hidden 768, 12 heads, batch 8 x 512), on 4 and 8 devices: one device (the
model unsplit), `--method data_parallel` (every op split on its batch, shard s on device s),
the default search without a split (what the tool did before), the default with
`--shard auto` over seeds, and the lower bound; memory per device (the model's peak and the
parameters resident) against the device's capacity.

Part 2, the plans executed (`regal.execute`, host CPU devices): small versions of the models
split 2 ways for the `cpu` preset, the search's answer and one device measured; then the
devices calibrated to this machine and random placements of the blocks predicted against
measured, with the rank correlation over them (Spearman).

Rows are appended to `real_models-<mode>.jsonl` as they finish: a killed run resumes where it
stopped. The rows are not keyed by the code that made them: after a change to the cost model,
move the file aside to measure afresh.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any, Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import atomic  # noqa: E402
from regal.parallelism import hardware  # noqa: E402
from regal_experiments import command, report  # noqa: E402

# (label, how to build it): zoo models (regal_datasets.zoo.model_graph's arguments) and the ONNX
# encoder built here.
MODELS = {
    "resnet50_b64": {"model": "resnet50", "batch": 64},
    "bert_base_b8_s512": {"model": "bert_base", "batch": 8, "seq_len": 512},
    "inception_v3_b32": {"model": "inception_v3", "batch": 32},
    "gpt2_small_b8_s1024": {"model": "gpt2_small", "batch": 8, "seq_len": 1024},
    "onnx_encoder_b8_s512": {"onnx": {"batch": 8, "seq": 512, "hidden": 768, "heads": 12,
                                      "layers": 2}},
}
QUICK_MODELS = {"gpt2_small_1layer_b8_s64": {"model": "gpt2_small", "batch": 8, "seq_len": 64,
                                             "layers": 1}}
# Part 2: small enough to run many placements on a 2-core host.
EXECUTED = {
    "gpt2_small_1layer_b2_s32": {"model": "gpt2_small", "batch": 2, "seq_len": 32,
                                 "layers": 1},
    "bert_base_1layer_b2_s64": {"model": "bert_base", "batch": 2, "seq_len": 64, "layers": 1},
}
QUICK_EXECUTED = {"gpt2_small_1layer_b2_s16": {"model": "gpt2_small", "batch": 2,
                                               "seq_len": 16, "layers": 1}}
METHODS = ("data_parallel", "unsplit", "shard_auto")

_QUICK = flags.DEFINE_bool("quick", False, "One small GPT-2 on 4 devices, one seed, 400 "
                           "evaluations; execution of a tiny one.")
_PRESET = flags.DEFINE_enum("preset", "h100", list(hardware.KINDS),
                            "Accelerator kind of every device.")
_DEVICES = flags.DEFINE_list("devices", ["4", "8"], "Device counts.")
_SEEDS = flags.DEFINE_integer("seeds", 3, "Seeds of the default search with --shard auto.",
                              lower_bound=1, upper_bound=100)
_RANDOM_PLACEMENTS = flags.DEFINE_integer("random_placements", 20, "Random placements "
                                          "executed (at least 10).", lower_bound=10,
                                          upper_bound=1000)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "real_models"),
                           "Report folder.")


# ----- the models ---------------------------------------------------------------------------
def onnx_encoder(batch: int, seq: int, hidden: int, heads: int, layers: int):
  """A post-LayerNorm transformer encoder as an ONNX model (onnx.helper; zero weights: only
  shapes matter): per layer Q, K, V projections, multi-head attention by Reshape / Transpose /
  batched MatMul / Softmax, an output projection, a ReLU MLP (4 x hidden), two LayerNorms."""
  from onnx import TensorProto, helper, numpy_helper
  head = hidden // heads
  nodes, weights = [], []

  def weight(name, *shape):
    weights.append(numpy_helper.from_array(np.zeros(shape, np.float32), name))
    return name

  def node(op, inputs, name, **attributes):
    nodes.append(helper.make_node(op, inputs, [name], name=name, **attributes))
    return name

  shape_heads = weight("shape_heads", 4)
  weights[-1] = numpy_helper.from_array(np.array([batch, seq, heads, head], np.int64),
                                        "shape_heads")
  shape_back = weight("shape_back", 3)
  weights[-1] = numpy_helper.from_array(np.array([batch, seq, hidden], np.int64), "shape_back")
  x = "x"
  for layer in range(layers):
    p = f"l{layer}_"
    split = {}
    for part in "qkv":
      projected = node("MatMul", [x, weight(p + "w" + part, hidden, hidden)], p + part)
      heads_view = node("Reshape", [projected, shape_heads], p + part + "_heads")
      perm = [0, 2, 3, 1] if part == "k" else [0, 2, 1, 3]
      split[part] = node("Transpose", [heads_view], p + part + "_t", perm=perm)
    scores = node("MatMul", [split["q"], split["k"]], p + "scores")
    probs = node("Softmax", [scores], p + "probs", axis=-1)
    attended = node("MatMul", [probs, split["v"]], p + "attended")
    merged = node("Reshape", [node("Transpose", [attended], p + "attended_t",
                                   perm=[0, 2, 1, 3]), shape_back], p + "merged")
    out = node("MatMul", [merged, weight(p + "wo", hidden, hidden)], p + "out")
    normed = node("LayerNormalization", [node("Add", [out, x], p + "residual1"),
                                         weight(p + "g1", hidden), weight(p + "b1", hidden)],
                  p + "norm1", axis=-1)
    up = node("Relu", [node("MatMul", [normed, weight(p + "w1", hidden, 4 * hidden)],
                            p + "up")], p + "act")
    down = node("MatMul", [up, weight(p + "w2", 4 * hidden, hidden)], p + "down")
    x = node("LayerNormalization", [node("Add", [down, normed], p + "residual2"),
                                    weight(p + "g2", hidden), weight(p + "b2", hidden)],
             p + "norm2", axis=-1)
  graph = helper.make_graph(
      nodes, "onnx_encoder",
      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])],
      [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, seq, hidden])], weights)
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def build(spec: dict[str, Any]):
  """The graph of a model spec: an ONNX file written and imported, or a zoo model traced."""
  if "onnx" in spec:
    import onnx

    from regal_datasets import onnx_import
    with tempfile.TemporaryDirectory() as folder:
      path = os.path.join(folder, "onnx_encoder.onnx")
      onnx.save(onnx_encoder(**spec["onnx"]), path)
      return onnx_import.load(path)
  from regal_datasets import zoo
  return zoo.model_graph(**spec)


# ----- part 1: predicted -------------------------------------------------------------------
def run_one(graph, label: str, num_devices: int, method: str, seed: int) -> dict[str, Any]:
  from regal.app import methods as methods_lib
  from regal.app import optimize_lib
  spec = hardware.resolve(num_devices, None, _PRESET.value)
  config = {"data_parallel": methods_lib.RunConfig(method="data_parallel"),
            "unsplit": methods_lib.RunConfig(seed=seed),
            "shard_auto": methods_lib.RunConfig(seed=seed,
                                                setup=methods_lib.Setup(shard="auto"))}[method]
  if _QUICK.value and method != "data_parallel":
    config = methods_lib.RunConfig(seed=seed, evals=400,
                                   setup=methods_lib.Setup(shard=config.setup.shard))
  started = time.perf_counter()
  result = optimize_lib.run(graph, spec, config, source=label).result
  ms = 1e3 / float(graph.metadata.get("link_bytes_per_second", 1e11))
  sharding = result.sharding or {}
  peak = [p for p in result.peak_memory if p is not None]
  return {"model": label, "devices": num_devices, "method": method, "seed": seed,
          "step_ms": result.objective * ms,
          "one_device_ms": result.baselines["single_device"]["objective"] * ms,
          "lower_bound_ms": result.lower_bound * ms,
          "improvement_pct": result.improvement_pct,
          "peak_memory_gb": max(peak) / 1e9 if peak else None,
          "resident_parameters_gb": max(sharding.get("resident_parameter_bytes", [0.0])) / 1e9,
          "capacity_gb": float(spec.memory_capacity[0]) / 1e9,
          "chosen": sharding.get("chosen"), "ops": result.graph["num_ops"],
          "evaluations": result.evaluations, "seconds": time.perf_counter() - started}


def predicted_summary(rows: list[dict], labels: list[str], device_counts: list[int]) -> list:
  """Per (model, devices): one device, data parallel, unsplit search, --shard auto (mean over
  seeds and a 95% bootstrap interval), lower bound; improvement of auto over one device and
  its ratio to data parallel."""
  from regal.learning import stats
  out = []
  for label in labels:
    for count in device_counts:
      mine = [r for r in rows if r["model"] == label and r["devices"] == count]
      by = {m: [r for r in mine if r["method"] == m] for m in METHODS}
      if not all(by.values()):
        continue
      auto = np.array([r["step_ms"] for r in by["shard_auto"]])
      low, high = stats.bootstrap_interval(auto[None, :], np.random.default_rng(0))
      dp = by["data_parallel"][0]
      one = dp["one_device_ms"]
      out.append({"model": label, "devices": count, "one_device_ms": one,
                  "data_parallel_ms": dp["step_ms"],
                  "unsplit_search_ms": float(np.mean([r["step_ms"] for r in by["unsplit"]])),
                  "auto_ms": float(auto.mean()), "auto_ci95_ms": [low, high],
                  "auto_seeds": len(auto),
                  "lower_bound_ms": min(r["lower_bound_ms"] for r in by["shard_auto"]),
                  "auto_improvement_pct": float(100.0 * (1 - auto.mean() / one)),
                  "worst_seed_improvement_pct": float(100.0 * (1 - auto.max() / one)),
                  "auto_vs_data_parallel": float(auto.max() / dp["step_ms"]),
                  "chosen": by["shard_auto"][0]["chosen"],
                  "peak_memory_gb": max(r["peak_memory_gb"] or 0 for r in by["shard_auto"]),
                  "resident_parameters_gb": max(r["resident_parameters_gb"]
                                                for r in by["shard_auto"]),
                  "capacity_gb": dp["capacity_gb"]})
  return out


# ----- part 2: executed --------------------------------------------------------------------
def execute_model(label: str, spec: dict[str, Any], placements: int) -> dict[str, Any]:
  """A small model split 2 ways (`--shard 2`, `--preset cpu`) run on 2 host devices: the
  search's answer and the model on one device measured; then, as `regal.execute.calibrate`
  does, every kernel and link timed to fit the devices' speeds, and `placements` random
  placements of the blocks measured against the calibrated WC model and the shared-cores
  predictor (host devices share the CPU's cores)."""
  from regal_datasets import zoo
  from regal.app import methods as methods_lib
  from regal.app import optimize_lib
  from regal.execute import calibrate_lib, choose_program, compare, executor
  traced = zoo.model_trace(**spec)
  run = optimize_lib.run(traced.graph, hardware.resolve(2, None, "cpu"),
                         methods_lib.RunConfig(evals=400, setup=methods_lib.Setup(shard="2")))
  graph, devices = run.graph, executor.available_devices(2)
  program = choose_program.program_for(graph, traced=traced)
  chosen = {name: run.assignments[name] for name in ("best", "single_device")}
  measured = compare.execute_assignments(graph, program, chosen, devices, repeats=3)
  fit = calibrate_lib.calibrate(graph, program, devices, repeats=3)
  report_ = calibrate_lib.prediction_report(graph, program, fit.spec, devices, placements,
                                            repeats=3)
  rows = measured["assignments"]
  return {"model": label, "ops": graph.num_ops, "placements": report_["placements"],
          "spearman": report_["spearman"], "pearson": report_["pearson"],
          "shared_spearman": report_["shared_spearman"],
          "shared_pearson": report_["shared_pearson"],
          "best_measured_ms": 1e3 * rows["best"]["median_seconds"],
          "single_device_measured_ms": 1e3 * rows["single_device"]["median_seconds"],
          "best_predicted_ms": run.result.objective * 1e3 / float(
              graph.metadata["link_bytes_per_second"]),
          "single_device_predicted_ms": run.result.baselines["single_device"]["objective"]
          * 1e3 / float(graph.metadata["link_bytes_per_second"]),
          "rows": report_["rows"]}


# ----- the run ------------------------------------------------------------------------------
def rows_path() -> str:
  return os.path.join(_OUT.value, f"real_models-{'quick' if _QUICK.value else 'full'}.jsonl")


def figure(summary: list[dict], path: str) -> None:
  """Each method's predicted step time as a share of one device's, per model and count."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(summary)), 3.6))
  names = ("data parallel", "search, unsplit", "search, --shard auto", "lower bound")
  keys = ("data_parallel_ms", "unsplit_search_ms", "auto_ms", "lower_bound_ms")
  width = 0.2
  x = np.arange(len(summary))
  for k, (name, key) in enumerate(zip(names, keys)):
    ax.bar(x + (k - 1.5) * width, [100.0 * s[key] / s["one_device_ms"] for s in summary],
           width, label=name)
  for count in sorted({s["devices"] for s in summary}):
    ax.axhline(100.0 / count, color="grey", linewidth=0.6, linestyle=":")
  labels = [re.sub(r"_(b\d+)", r"\n\1", s["model"], count=1) for s in summary]
  ax.set_xticks(x, [f"{label}\n{s['devices']} x {_PRESET.value}"
                    for label, s in zip(labels, summary)], fontsize=6.5)
  ax.set_ylabel("step time, % of one device")
  ax.legend(fontsize=7)
  report.save_figure(fig, path)


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("devices", "seeds", "random_placements"))
  from regal.scoring import parallel as parallel_lib
  parallel_lib.use_host_devices(2)  # Before JAX starts: part 2 runs on two host devices.
  device_counts = [4] if _QUICK.value else command.integers("devices", _DEVICES.value, 1, 64)
  seeds = 1 if _QUICK.value else _SEEDS.value
  models = QUICK_MODELS if _QUICK.value else MODELS
  executed = QUICK_EXECUTED if _QUICK.value else EXECUTED
  placements = 10 if _QUICK.value else _RANDOM_PLACEMENTS.value
  path = rows_path()
  os.makedirs(_OUT.value, exist_ok=True)
  done = {(r["model"], r.get("devices"), r["method"], r.get("seed")): r
          for r in atomic.read_json_lines(path)}
  started = time.perf_counter()
  for label, spec in models.items():
    graph = None
    for count in device_counts:
      for method in METHODS:
        for seed in range(1 if method == "data_parallel" else seeds):
          if method == "unsplit" and seed > 0:
            continue  # One seed shows what the tool did before.
          key = (label, count, method, seed)
          if key in done:
            continue
          graph = graph if graph is not None else build(spec)
          row = run_one(graph, label, count, method, seed)
          cli.exit_if_stopped()
          atomic.append_json_line(path, row)
          done[key] = row
          print(f"{label} on {count}: {method} seed {seed}: {row['step_ms']:.4g} ms "
                f"({row['improvement_pct']:.1f}% below one device), "
                f"{time.perf_counter() - started:.0f} s", flush=True)
  for label, spec in executed.items():
    key = (label, None, "executed", None)
    if key not in done:
      row = {**execute_model(label, spec, placements), "method": "executed", "devices": None,
             "seed": None}
      cli.exit_if_stopped()
      atomic.append_json_line(path, row)
      done[key] = row
      print(f"{label}: executed {row['placements']} random placements, Spearman "
            f"{row['spearman']:.3f} (WC), {row['shared_spearman']:.3f} (shared)", flush=True)
  rows = [r for r in done.values() if r["model"] in models or r["model"] in executed]
  summary = predicted_summary(rows, list(models), device_counts)
  execution = [r for r in rows if r["method"] == "executed"]
  header, facts = report.header(f"Real models on {_PRESET.value} accelerators, split and "
                                f"placed", "regal_experiments.real_models",
                                "quick" if _QUICK.value else "full")
  body = markdown(summary, execution, seeds)
  if summary:
    figure(summary, os.path.join(_OUT.value, "real_models.png"))
    body += ["", "![predicted step times](real_models.png)"]
  report.publish(_OUT.value, "real_models", header, body,
                 {**facts, "summary": summary, "execution": execution, "rows": rows})


def markdown(summary: list[dict], execution: list[dict], seeds: int) -> list[str]:
  lines = [f"Predicted step time (ms) on {_PRESET.value} devices (ops as XLA fuses them, a "
           f"launch per kernel, each GPU's NVLink one port its peers share: "
           f"`regal.parallelism.roofline`). one device: the model unsplit; data parallel: "
           f"`--method data_parallel`; search, unsplit: the default without a split (what the "
           f"tool did before issue 70); auto: the default with `--shard auto`, mean over "
           f"{seeds} seed(s) with a 95% bootstrap interval; improvement over one device (the "
           f"target is 66.7%: 3x faster), and the worst seed's step time over data "
           f"parallelism's (at most 1: no worse). Memory: the largest peak of the WC model "
           f"(the parameters resident on the device included) and the largest resident "
           f"parameters, against its capacity.", ""]
  lines += report.markdown_table(
      ["model", "devices", "one device", "data parallel", "search, unsplit", "auto (95% CI)",
       "lower bound", "improvement %", "worst seed / DP", "split", "peak / resident / cap GB"],
      [[s["model"], s["devices"], f"{s['one_device_ms']:.4g}", f"{s['data_parallel_ms']:.4g}",
        f"{s['unsplit_search_ms']:.4g}",
        f"{s['auto_ms']:.4g} [{s['auto_ci95_ms'][0]:.4g}, {s['auto_ci95_ms'][1]:.4g}]",
        f"{s['lower_bound_ms']:.4g}", f"{s['auto_improvement_pct']:.1f}",
        f"{s['auto_vs_data_parallel']:.4f}",
        f"{s['chosen']['shards']}x {s['chosen']['strategy']}" if s["chosen"] else "-",
        f"{s['peak_memory_gb']:.3g} / {s['resident_parameters_gb']:.3g} / "
        f"{s['capacity_gb']:.0f}"] for s in summary])
  if execution:
    lines += ["", "Executed on two host CPU devices (`regal.execute`; split 2 ways for the "
              "`cpu` preset): the search's answer and the model on one device, predicted "
              "(the `cpu` preset's roofline: a 2-socket server, not this machine) against "
              "measured (median of 3); then, as `regal.execute.calibrate` does, the devices "
              "fitted to this machine and random placements of the blocks, predicted by the "
              "calibrated WC model and by the shared-cores predictor (every op and transfer "
              "in turn: what host devices sharing a CPU's cores behave like) against "
              "measured: how well each ranks them (Spearman) and fits them (Pearson).", ""]
    lines += report.markdown_table(
        ["model", "ops", "best: predicted / measured ms", "one device: predicted / measured ms",
         "random placements", "WC Spearman / Pearson", "shared Spearman / Pearson"],
        [[r["model"], r["ops"], f"{r['best_predicted_ms']:.3g} / {r['best_measured_ms']:.3g}",
          f"{r['single_device_predicted_ms']:.3g} / {r['single_device_measured_ms']:.3g}",
          r["placements"], f"{r['spearman']:.3f} / {r['pearson']:.3f}",
          f"{r['shared_spearman']:.3f} / {r['shared_pearson']:.3f}"] for r in execution])
  return lines


if __name__ == "__main__":
  cli.run_cli(main)
