r"""Calibrates the performance model to this machine's devices and reports how well it predicts.

  python -m regal.execute.calibrate                          # chain_mm 1024, 4 devices, 50
  python -m regal.execute.calibrate --workload ffnn --devices 2 --placements 50 \
      --spec_out devices.json --report calibrate_lib.json --plot calibrate_lib.png

Times every kernel of a scaled sharded workload alone on each device and transfers between
every pair, fits device speeds and link latency / bandwidth (least squares, written as a device
description for `--device_spec`), then runs random placements and compares measured makespans
with the calibrated WC model's (Pearson, Spearman). On a CPU the devices are host devices
(`--devices` of them, set before JAX starts).
"""
from __future__ import annotations

import json
from typing import Sequence

from regal_datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from absl import flags  # noqa: E402

from regal_datasets import atomic  # noqa: E402
from regal.scoring import parallel  # noqa: E402  (JAX is imported, not yet started)

_WORKLOAD = flags.DEFINE_enum("workload", "chain_mm", ["chain_mm", "ffnn", "llama_block",
                                                       "llama_layer"], "Sharded workload.")
_GRAPH = flags.DEFINE_string("graph", None, "Any graph file instead (its own semantics if it "
                             "has them, stand-in kernels otherwise).")
_SIZE = flags.DEFINE_integer("size", 1024, "Scale: chain_mm matrix side; ffnn batch and width "
                             "are 4x it; Llama sequence is size / 4 and embedding size / 2 "
                             "(8 to 8192: the workload's data is held in memory).",
                             lower_bound=8, upper_bound=8192)
_DEVICES = flags.DEFINE_integer("devices", 4, "Devices (host devices on a CPU; 1 to "
                                f"{parallel.MAX_HOST_DEVICES}).", lower_bound=1,
                                upper_bound=parallel.MAX_HOST_DEVICES)
_PLACEMENTS = flags.DEFINE_integer("placements", 50, "Random placements to predict.",
                                   lower_bound=2, upper_bound=100_000)
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs per placement (after one warm-up).",
                                lower_bound=1, upper_bound=1000)
_MODE = flags.DEFINE_enum("mode", "async", ["async", "strict"], "Executor discipline.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the placements and the data (0 to 2^32 - 1).",
                             lower_bound=0, upper_bound=errors.MAX_SEED)
_SPEC_OUT = flags.DEFINE_string("spec_out", None, "Write the calibrated device description.")
_REPORT = flags.DEFINE_string("report", None, "Write the report JSON here.")
_PLOT = flags.DEFINE_string("plot", None, "Write predicted-vs-measured scatter (.png/.svg).")


def workload_graph(workload: str, size: int, num_devices: int):
  from regal_datasets import sharded
  return sharded.generate(workload, num_devices, size=size, ffnn_batch=4 * size,
                          ffnn_width=4 * size, seq_len=max(size // 4, 8),
                          hidden=max(size // 2, 64), heads=8, mlp=size)


def plot(report: dict, path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt

  from regal_datasets import atomic
  rows = report["rows"]
  fig, ax = plt.subplots(figsize=(5, 5))
  used = [r["devices_used"] for r in rows]
  points = ax.scatter([1e3 * r["predicted_seconds"] for r in rows],
                      [1e3 * r["measured_seconds"] for r in rows], c=used, cmap="viridis")
  fig.colorbar(points, ax=ax, label="devices used")
  ax.set_xlabel("predicted makespan (ms, calibrated WC model)")
  ax.set_ylabel("measured makespan (ms, median)")
  ax.set_title(f"{report['graph']} on {report['device_kind']}: Pearson "
               f"{report['pearson']:.2f}, Spearman {report['spearman']:.2f}", fontsize=9)
  fig.tight_layout()
  with atomic.open_for_write(path, "wb") as f:
    fig.savefig(f, format=path.rsplit(".", 1)[-1], dpi=110)
  plt.close(fig)


def check_outputs() -> None:
  """Every output refused before the measuring starts: an input, an unwritable place, a chart
  that is not a chart format, two outputs on one file."""
  atomic.check_outputs([("--spec_out", _SPEC_OUT.value, ()), ("--report", _REPORT.value, ()),
                        ("--plot", _PLOT.value, atomic.CHART_EXTENSIONS)],
                       [_GRAPH.value] if _GRAPH.value else [])


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  if _GRAPH.value:
    for name in ("workload", "size"):
      if flags.FLAGS[name].present:
        raise errors.ConfigError(f"--{name} would do nothing here: --graph names the graph")
  check_outputs()
  parallel.use_host_devices(_DEVICES.value)  # Before JAX starts.
  from regal_datasets import atomic
  from regal_datasets import devices as devices_lib
  from regal_datasets import io as graph_io
  from regal.execute import calibrate_lib, choose_program, executor
  devices = executor.available_devices(_DEVICES.value)
  graph = (graph_io.load_graph(_GRAPH.value) if _GRAPH.value
           else workload_graph(_WORKLOAD.value, _SIZE.value, _DEVICES.value))
  program = choose_program.program_for(graph, seed=_SEED.value)
  print(f"{graph.name}: {graph.num_ops} ops, {program.kind} kernels, {len(devices)} "
        f"{devices[0].platform} devices; timing kernels and links ...", flush=True)
  fit = calibrate_lib.calibrate(graph, program, devices)
  spec = fit.spec
  print(f"speed (cost units / s): {', '.join(f'{s:.4g}' for s in spec.speed)}  "
        f"(fit r2 {', '.join(f'{r:.3f}' for r in fit.op_r2)})")
  if len(devices) > 1:
    import numpy as np
    off = ~np.eye(len(devices), dtype=bool)
    print(f"links: latency {1e6 * spec.latency[off].mean():.1f} us, bandwidth "
          f"{spec.bandwidth[off].mean() / 1e9:.2f} GB/s (means over pairs)")
  if _SPEC_OUT.value:
    devices_lib.save(spec, _SPEC_OUT.value)
    print(f"wrote {_SPEC_OUT.value}")

  def progress(done: int, row: dict) -> None:
    if done % 10 == 0 or done == _PLACEMENTS.value:
      print(f"  placement {done}/{_PLACEMENTS.value}: predicted "
            f"{1e3 * row['predicted_seconds']:.2f} ms, measured "
            f"{1e3 * row['measured_seconds']:.2f} ms", flush=True)

  report = calibrate_lib.prediction_report(graph, program, spec, devices, _PLACEMENTS.value,
                                         _SEED.value, _REPEATS.value, _MODE.value, progress)
  report = {"graph": graph.name, "num_ops": graph.num_ops, "program": program.kind,
            "device_kind": f"{len(devices)} x {devices[0].device_kind}",
            "spec": spec.to_json_dict(), "op_fit_r2": fit.op_r2, **report}
  print(f"{report['placements']} random placements: Pearson {report['pearson']:.3f}, "
        f"Spearman {report['spearman']:.3f} (calibrated WC model); shared-compute predictor "
        f"Pearson {report['shared_pearson']:.3f}, Spearman {report['shared_spearman']:.3f}; "
        f"median measured / predicted {report['median_measured_over_predicted']:.2f}")
  if _REPORT.value:
    atomic.write_text(_REPORT.value, json.dumps(report, indent=1) + "\n")
    print(f"wrote {_REPORT.value}")
  if _PLOT.value:
    plot(report, _PLOT.value)
    print(f"wrote {_PLOT.value}")


if __name__ == "__main__":
  cli.run_cli(main)
