r"""Doppler's graphs at equal total evaluations: critical path, Doppler, BRKGA with and without
Doppler's seeds.

  python -m experiments.doppler_table [--evals 5000] [--doppler_evals 1024] [--out table.json]

On the four Doppler graphs (`../shared/graphs/doppler`, skipped with a note when absent) with
4 homogeneous devices and the Doppler-compatible model, every column spends at most `--evals`
performance-model evaluations:
  critical_path_doppler  the Doppler repository's critical path (the papers' anchor; none)
  critical_path          our critical path (none)
  doppler                stages I + II, `--evals` episodes
  brkga_unseeded         BRKGA seeded with the single-device assignment only
  brkga_cp               BRKGA seeded with single device + critical path (the default)
  brkga_doppler          BRKGA seeded with single device + critical path + Doppler (trained on
                         `--doppler_evals` episodes, taken from the same budget)
Makespans are in Doppler's units (clock / 1e10). The lower bound is max(total compute / D,
longest compute path). Prints a Markdown table and writes JSON with every figure.
"""
from __future__ import annotations

from regal import parallel

parallel.use_all_cpu_cores()  # Before JAX starts.

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import app, flags, logging  # noqa: E402

from datasets import atomic  # noqa: E402
from datasets import devices as devices_lib  # noqa: E402
from datasets import io as graph_io  # noqa: E402
from regal import doppler_model, optimize_lib, seed_arms  # noqa: E402

DOPPLER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "graphs", "doppler")
GRAPHS = ("chain_mm_112nodes", "ffnn_192nodes", "transformer_block_215nodes",
          "full_transformer_layer_261nodes")
COLUMNS = ("critical_path_doppler", "critical_path", "doppler", "brkga_unseeded", "brkga_cp",
           "brkga_doppler")

_DOPPLER_DIR = flags.DEFINE_string("doppler_dir", DOPPLER_DIR, "Folder of the Doppler graphs.")
_EVALS = flags.DEFINE_integer("evals", 5000, "Evaluations per method and graph.")
_DOPPLER_EVALS = flags.DEFINE_integer("doppler_evals", 1024, "Episodes of the Doppler seed arm.")
_DEVICES = flags.DEFINE_integer("devices", 4, "Homogeneous devices.")
_SEED = flags.DEFINE_integer("seed", 0, "Random seed.")
_OUT = flags.DEFINE_string("out", None, "Write the figures here as JSON.")


def lower_bound(graph, num_devices: int) -> float:
  longest = np.zeros(graph.num_ops)
  for op in graph.topological_order.tolist():
    longest[op] = graph.compute_cost[op] + max(
        (longest[p] for p in graph.predecessors(op)), default=0.0)
  return max(float(graph.compute_cost.sum()) / num_devices, float(longest.max(initial=0.0)))


def run_column(column: str, graph, devices, evals: int, doppler_evals: int, seed: int):
  common = dict(model="doppler", evals=evals, seed=seed)
  if column in ("critical_path_doppler", "critical_path", "doppler"):
    return optimize_lib.run(graph, devices, method=column, **common)
  arms = {"brkga_unseeded": ("single_device",),
          "brkga_cp": ("single_device", "critical_path"),
          "brkga_doppler": ("single_device", "critical_path", "doppler")}[column]
  return optimize_lib.run(graph, devices, arms=arms,
                          doppler=seed_arms.DopplerArm(evals=doppler_evals), **common)


def main(argv: Sequence[str]) -> None:
  del argv
  if not os.path.isdir(_DOPPLER_DIR.value):
    print(f"no Doppler graphs at {_DOPPLER_DIR.value}: nothing to do")
    return
  devices = devices_lib.homogeneous(_DEVICES.value)
  rows = []
  for name in GRAPHS:
    path = os.path.join(_DOPPLER_DIR.value, name + ".txt")
    if not os.path.exists(path):
      print(f"skipping {name}: {path} is missing")
      continue
    graph = graph_io.load_graph(path)
    row = {"graph": name, "ops": graph.num_ops,
           "lower_bound": float(doppler_model.doppler_units(lower_bound(graph,
                                                                         _DEVICES.value)))}
    for column in COLUMNS:
      started = time.perf_counter()
      report = run_column(column, graph, devices, _EVALS.value, _DOPPLER_EVALS.value,
                          _SEED.value)
      row[column] = float(doppler_model.doppler_units(report.data["objective"]))
      row[column + "_evaluations"] = report.data["evaluations"]
      row[column + "_seconds"] = time.perf_counter() - started
      if column == "brkga_doppler":
        row["brkga_doppler_winner_origin"] = report.data["details"]["winner_origin"]
      logging.info("%s %s: %.6g (%d evaluations, %.1f s)", name, column, row[column],
                   row[column + "_evaluations"], row[column + "_seconds"])
    rows.append(row)
  header = "| graph | bound | " + " | ".join(COLUMNS) + " | winner from |"
  print(header)
  print("|" + "---|" * (len(COLUMNS) + 3))
  for row in rows:
    print(f"| {row['graph']} | {row['lower_bound']:.6g} | "
          + " | ".join(f"{row[c]:.6g}" for c in COLUMNS)
          + f" | {row.get('brkga_doppler_winner_origin') or 'no seed'} |")
  if _OUT.value:
    atomic.write_text(_OUT.value, json.dumps({"evals": _EVALS.value,
                                              "doppler_evals": _DOPPLER_EVALS.value,
                                              "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
  app.run(main)
