"""A chart of a profiled workload's split (`--objective throughput --gantt FILE`): each
device's load per sample (compute, then what it sends and receives), the CPU side included,
against the max-load; and each accelerator's memory against its cap. In a pipeline every
device repeats its load once per sample, so these bars are one period of its timeline."""
from __future__ import annotations

import os

import numpy as np

from datasets import atomic, errors
from datasets.formats.profiled import CPU, Workload


def draw(workload: Workload, data: dict, path: str) -> None:
  """Writes the chart of result `data` (`pipeline_lib.run`) to `path` (.png, .pdf or .svg),
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
                     for row in data["placement"]])
  names = [f"accelerator {a}" for a in range(accelerators)] + (
      ["CPU side"] if workload.max_cpus else [])
  total = np.array(data["loads"]["accelerators"] + ([data["loads"]["cpu"]]
                                                    if workload.max_cpus else []))
  compute = np.array([workload.accelerator_latency[device == a].sum()
                      for a in range(accelerators)] +
                     ([workload.cpu_latency[device == CPU].sum()] if workload.max_cpus else []))
  transfer = total - compute
  fig, (loads_ax, memory_ax) = plt.subplots(
      1, 2, figsize=(11, 0.5 * len(names) + 1.6), gridspec_kw={"width_ratios": [3, 2]})
  rows = np.arange(len(names))
  loads_ax.barh(rows, compute, color="tab:blue", label="compute")
  loads_ax.barh(rows, transfer, left=compute, color="0.6", label="send + receive")
  loads_ax.axvline(data["objective"], color="tab:red", linestyle="--",
                   label=f"max-load {data['objective']:.4g}")
  loads_ax.set_yticks(rows, names)
  loads_ax.invert_yaxis()
  loads_ax.set_xlabel("time per sample")
  loads_ax.legend(loc="lower right", fontsize=8)
  memory = np.array(data["memory"]["accelerators"])
  cap = data["memory"]["cap"]
  memory_ax.barh(np.arange(accelerators), memory, color=np.where(memory > cap, "tab:red",
                                                                  "tab:green"))
  memory_ax.axvline(cap, color="black", linestyle="--", label=f"cap {cap:.4g}")
  memory_ax.set_yticks(np.arange(len(names)), names)
  memory_ax.set_ylim(loads_ax.get_ylim())
  memory_ax.set_xlabel("bytes held (the CPU side has no cap)")
  memory_ax.legend(loc="lower right", fontsize=8)
  status = "" if data["feasible"] else " (INFEASIBLE)"
  fig.suptitle(f"{data['graph']['name']}: {data['settings']['method']}, max-load "
               f"{data['objective']:.4g}{status}", fontsize=10)
  fig.tight_layout()
  with atomic.open_for_write(path, "wb") as f:
    fig.savefig(f, format=fmt, dpi=110)
  plt.close(fig)
