r"""Every placement method on the four Doppler graphs and on synthetic graphs: one table.

  python -m regal_experiments.baselines_table                        # everything, ~15 minutes
  python -m regal_experiments.baselines_table --synthetic 3 --time_limit 5 --methods heft,cpsat
  python -m regal_experiments.baselines_table --out /tmp/baselines    # the report elsewhere

Doppler graphs (`../shared/graphs/doppler`, skipped with a note when absent): the
Doppler-compatible model on 4 devices, objectives in Doppler's units (clock / 1e10), with the
critical-path and single-device figures the Doppler repository's code gives beside them.
Synthetic graphs: the first N test graphs of the default synthetic dataset, REGAL's
synchronous model on 2 devices. Every method runs through `regal.app.optimize_lib.run`, the code
behind `python -m regal.optimize --method NAME`, so each figure is what that command reports:
the objective re-scored by the reference model, and the method's wall time (BRKGA: compile +
search; CP-SAT's line adds its proven lower bound). Writes `baselines_table.md` and `.json`
under `--out` (default: experiments/results/baselines_table).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags, logging  # noqa: E402

from regal_datasets import benchmarks  # noqa: E402
from regal_datasets import dataset as dataset_lib  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import cli, errors  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_experiments import command, report as report_lib  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.scoring import models  # noqa: E402

DOPPLER_DIR = benchmarks.DOPPLER_GRAPHS
DOPPLER_FILES = {"chain_mm": "chain_mm_112nodes.txt", "ffnn": "ffnn_192nodes.txt",
                 "llama_block": "transformer_block_215nodes.txt",
                 "llama_layer": "full_transformer_layer_261nodes.txt"}

_METHODS = flags.DEFINE_list("methods", list(methods.METHODS), "Methods to run.")
_SYNTHETIC = flags.DEFINE_integer("synthetic", 10, "Synthetic test graphs to include.",
                                  lower_bound=0, upper_bound=1000)
_DOPPLER_DIR = flags.DEFINE_string("doppler_dir", DOPPLER_DIR, "Folder of the Doppler graphs.")
_EVALS = flags.DEFINE_integer("evals", 5000, "Budget of the search methods.",
                              lower_bound=1, upper_bound=1_000_000_000)
_TIME_LIMIT = flags.DEFINE_float("time_limit", 10.0, "CP-SAT seconds per graph.",
                                 lower_bound=0.001, upper_bound=86400.0)
_SEED = flags.DEFINE_integer("seed", 0, "Random seed.", lower_bound=0, upper_bound=errors.MAX_SEED)
_OUT = flags.DEFINE_string("out", os.path.join(report_lib.RESULTS_DIR, "baselines_table"),
                           "Report folder.")


def workloads() -> list[tuple[str, object, object, str]]:
  """(label, graph, devices, model) for every graph of the table."""
  rows = []
  if os.path.isdir(_DOPPLER_DIR.value):
    for label, name in DOPPLER_FILES.items():
      graph = graph_io.load_graph(os.path.join(_DOPPLER_DIR.value, name))
      rows.append((label, graph, devices_lib.homogeneous(4), "doppler"))
  else:
    logging.warning("Doppler graphs not found at %s: skipping them", _DOPPLER_DIR.value)
  if _SYNTHETIC.value > 0:
    test = dataset_lib.load_or_build_synthetic()["test"][:_SYNTHETIC.value]
    rows += [(f"synthetic/{k}", graph, devices_lib.homogeneous(2), "sync")
             for k, graph in enumerate(test)]
  return rows


def run_table(method_names: Sequence[str]) -> list[dict]:
  results = []
  jobs = workloads()
  total, started = len(jobs) * len(method_names), time.perf_counter()
  for label, graph, devices, model in jobs:
    for method in method_names:
      report = optimize_lib.run(
          graph, devices,
          methods.RunConfig(
              model=model,
              evals=_EVALS.value,
              seed=_SEED.value,
              method=method,
              time_limit=_TIME_LIMIT.value))
      data = report.result
      wall = data.wall_seconds["compile"] + data.wall_seconds["search"]
      scale = lambda v: float(models.get(model).in_units(v))  # noqa: E731
      row = {"graph": label, "ops": graph.num_ops, "model": model,
             "devices": devices.num_devices, "method": method,
             "objective": scale(data.objective), "wall_seconds": wall,
             "single_device": scale(data.baselines["single_device"]["objective"]),
             "lower_bound": (scale(data.details["lower_bound"])
                             if "lower_bound" in data.details else None),
             "status": data.details.get("status")}
      results.append(row)
      done = len(results)
      eta = (time.perf_counter() - started) / done * (total - done)
      logging.info("[%d/%d, ETA %.0f s] %s %s: %.6g in %.2f s", done, total, eta, label,
                   method, row["objective"], wall)
  return results


def markdown(results: list[dict], method_names: Sequence[str]) -> list[str]:
  graphs = list(dict.fromkeys(r["graph"] for r in results))
  cell = {(r["graph"], r["method"]): r for r in results}
  lines = ["| graph | ops | model | one device | " + " | ".join(method_names)
           + " | CP-SAT bound |", "|---" * (len(method_names) + 5) + "|"]
  for graph in graphs:
    first = next(r for r in results if r["graph"] == graph)
    entries = [f"{cell[(graph, m)]['objective']:.6g} ({cell[(graph, m)]['wall_seconds']:.2f} s)"
               for m in method_names]
    bound = cell.get((graph, "cpsat"), {}).get("lower_bound")
    lines.append(f"| {graph} | {first['ops']} | {first['model']} x{first['devices']} | "
                 f"{first['single_device']:.6g} | " + " | ".join(entries) +
                 f" | {'-' if bound is None else f'{bound:.6g}'} |")
  return lines + ["", "objective (wall seconds: compile + search); Doppler graphs in Doppler's "
                  "units (clock / 1e10)"]


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  unknown = [m for m in _METHODS.value if m not in methods.METHODS]
  if unknown:
    raise errors.ConfigError(f"unknown method {unknown[0]!r}; known: "
                             f"{', '.join(methods.METHODS)}")
  started = time.perf_counter()
  results = run_table(_METHODS.value)
  header, facts = report_lib.header("Every placement method: Doppler graphs and synthetic graphs",
                                    "regal_experiments.baselines_table", "full")
  body = [f"- budget: {_EVALS.value} evaluations per search method; CP-SAT {_TIME_LIMIT.value:g} "
          f"s per graph; seed {_SEED.value}", "", *markdown(results, _METHODS.value)]
  report_lib.publish(_OUT.value, "baselines_table", header, body,
                     {**facts, "rows": results, "seconds": time.perf_counter() - started})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
