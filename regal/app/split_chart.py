"""A chart of a profiled workload's split (`--gantt FILE`), with each accelerator's memory
against its cap beside it. Throughput: each device's load per sample (compute, then what it
sends and receives), the CPU side included, against the max-load; in a pipeline every device
repeats its load once per sample, so these bars are one period of its timeline. Latency
(`--model blocks`): the timeline of one sample, each accelerator's block from its start
(receive, compute, send) and the CPU side's ops, each from its start to its finish."""
from __future__ import annotations

import os

import numpy as np

from regal_datasets import atomic, errors
from regal_datasets.formats.profiled import CPU, Workload
from regal.app.result import SplitResult


def draw(workload: Workload, result: SplitResult, path: str) -> None:
  """Writes the chart of split `result` (`pipeline_lib.run`) to `path` (.png, .pdf or .svg),
  atomically."""
  fmt = os.path.splitext(path)[1].lstrip(".").lower()
  if fmt not in atomic.CHART_EXTENSIONS:
    raise errors.ConfigError(f"{path}: a chart is written as "
                             f"{', '.join('.' + e for e in atomic.CHART_EXTENSIONS)}")
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  accelerators = workload.max_accelerators
  device = np.array([CPU if row["device"] == "cpu" else row["device"]
                     for row in result.placement])
  names = [f"accelerator {a}" for a in range(accelerators)] + (
      ["CPU side"] if workload.max_cpus else [])
  total = np.array(result.loads["accelerators"] + ([result.loads["cpu"]]
                                                    if workload.max_cpus else []))
  compute = np.array([workload.accelerator_latency[device == a].sum()
                      for a in range(accelerators)] +
                     ([workload.cpu_latency[device == CPU].sum()] if workload.max_cpus else []))
  transfer = total - compute
  fig, (loads_ax, memory_ax) = plt.subplots(
      1, 2, figsize=(11, 0.5 * len(names) + 1.6), gridspec_kw={"width_ratios": [3, 2]})
  rows = np.arange(len(names))
  latency = result.settings["objective"] == "latency"
  if latency:
    _draw_timeline(loads_ax, workload, result, device)
  else:
    loads_ax.barh(rows, compute, color="tab:blue", label="compute")
    loads_ax.barh(rows, transfer, left=compute, color="0.6", label="send + receive")
  if result.objective is not None:
    loads_ax.axvline(result.objective, color="tab:red", linestyle="--",
                     label=f"{'latency' if latency else 'max-load'} {result.objective:.4g}")
  loads_ax.set_yticks(rows, names)
  loads_ax.invert_yaxis()
  loads_ax.set_xlabel("time (one sample)" if latency else "time per sample")
  loads_ax.legend(loc="lower right", fontsize=8)
  memory = np.array(result.memory["accelerators"])
  cap = result.memory["cap"]
  memory_ax.barh(np.arange(accelerators), memory, color=np.where(memory > cap, "tab:red",
                                                                  "tab:green"))
  memory_ax.axvline(cap, color="black", linestyle="--", label=f"cap {cap:.4g}")
  memory_ax.set_yticks(np.arange(len(names)), names)
  memory_ax.set_ylim(loads_ax.get_ylim())
  memory_ax.set_xlabel("bytes held (the CPU side has no cap)")
  memory_ax.legend(loc="lower right", fontsize=8)
  status = "" if result.feasible else " (INFEASIBLE)"
  value = "-" if result.objective is None else f"{result.objective:.4g}"
  fig.suptitle(f"{result.graph['name']}: {result.settings['method']}, "
               f"{'latency' if latency else 'max-load'} {value}{status}", fontsize=10)
  fig.tight_layout()
  with atomic.open_for_write(path, "wb") as f:
    fig.savefig(f, format=fmt, dpi=110)
  plt.close(fig)


def _draw_timeline(ax, workload: Workload, result: SplitResult,
                   device: np.ndarray) -> None:
  from regal.scoring.blocks import reference as blocks
  for block in result.blocks:
    row, left = block["accelerator"], block["start"]
    for part, colour in (("receive", "0.75"), ("compute", "tab:blue"), ("send", "0.5")):
      ax.barh(row, block[part], left=left, color=colour,
              label=part if row == result.blocks[0]["accelerator"] else None)
      left += block[part]
  finish = blocks.finish_times(workload, device)
  cpu_ops = np.flatnonzero(device == CPU)
  if finish is not None and len(cpu_ops):
    starts = finish[cpu_ops] - workload.cpu_latency[cpu_ops]
    ax.barh(np.full(len(cpu_ops), workload.max_accelerators), workload.cpu_latency[cpu_ops],
            left=starts, color="tab:orange", alpha=0.35, label="CPU op")
