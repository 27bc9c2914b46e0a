r"""Our search against the strongest simple baselines, in one run (the "search that wins" checks).

  python -m regal_experiments.search_targets            # ~25 minutes on 2 cores
  python -m regal_experiments.search_targets --quick    # ~3 minutes: fewer graphs, small budgets

Sections, every figure measured in this run at default settings unless a budget is named:
  doppler   the four shared Doppler graphs, Doppler model, 4 devices: the default run (budget
            sized from the graph), and BRKGA at 5,000 evaluations, against `hill_climb` at
            5,000 and 20,000 evaluations; the search's own answer is shown beside the best seed;
  wc        the Doppler graphs and our sharded workloads (ChainMM, FFNN, Llama block and
            layer) on 4 devices and 8 (homogeneous for the Doppler files; two NVLink groups for
            the sharded ones), WC model: the default run against `hill_climb` with 20,000
            evaluations from the same seeds;
  synthetic the default synthetic dataset's test split, synchronous model, 2 devices, 5,000
            evaluations each: BRKGA (default settings) against REGAL's `local_search`.
The Sinnen task graphs are measured by `regal_experiments.task_graph_table` (all 1,118 graphs).
Writes `search_targets.md` and `.json` under `--out`.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import os  # noqa: E402
import time  # noqa: E402
from typing import Any, Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import analysis, errors  # noqa: E402
from regal_datasets import benchmarks  # noqa: E402
from regal_datasets import sharded  # noqa: E402
from regal_datasets import dataset as dataset_lib  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.scoring import models, performance  # noqa: E402

DOPPLER_DIR = benchmarks.DOPPLER_GRAPHS
DOPPLER_FILES = ("chain_mm_112nodes", "ffnn_192nodes", "transformer_block_215nodes",
                 "full_transformer_layer_261nodes")

_QUICK = flags.DEFINE_bool("quick", False, "Two Doppler graphs, two sharded workloads, three "
                           "synthetic graphs, budgets capped at 3,000.")
_SECTIONS = flags.DEFINE_list("sections", ["doppler", "wc", "synthetic"], "What to measure.")
_SYNTHETIC_GRAPHS = flags.DEFINE_integer("synthetic_graphs", 16, "Test-split graphs (all: 16).",
                                         lower_bound=1, upper_bound=16)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "search_targets"),
                           "Report folder.")


def _ours(graph, devices, model: str, evals: int | None) -> dict[str, Any]:
  """BRKGA at default settings: what the user gets, what the search itself found, the best
  seed, and the budget and seconds it took."""
  if _QUICK.value:
    evals = min(evals or 3000, 3000)
  data = optimize_lib.run(graph, devices, methods.RunConfig(model=model, evals=evals)).result
  return {"objective": data.objective, "search": data.search_objective,
          "best_seed": data.baselines["best_seed"]["objective"],
          "best_seed_name": data.baselines["best_seed"]["name"],
          "evaluations": data.evaluations, "search_seconds": data.wall_seconds["search"],
          "compile_seconds": data.wall_seconds["compile"]}


def _baseline(method: str, graph, devices, model: str, evals: int) -> float:
  if _QUICK.value:
    evals = min(evals, 3000)
  problem = performance.Problem(graph, devices, model=model)
  return float(methods.run_method(method, problem, evals=evals, seed=0).objective)


def doppler_section() -> list[dict[str, Any]]:
  rows = []
  for name in DOPPLER_FILES[:2] if _QUICK.value else DOPPLER_FILES:
    graph = graph_io.load_graph(os.path.join(DOPPLER_DIR, name + ".txt"))
    devices = devices_lib.homogeneous(4)
    units = lambda value: float(models.get("doppler").in_units(value))  # noqa: E731
    default = _ours(graph, devices, "doppler", None)
    at_5k = _ours(graph, devices, "doppler", 5000)
    row = {"graph": name, "default": {k: units(v) if k in ("objective", "search", "best_seed")
                                      else v for k, v in default.items()},
           "brkga_5k": units(at_5k["objective"]), "brkga_5k_search": units(at_5k["search"]),
           "hill_climb_5k": units(_baseline("hill_climb", graph, devices, "doppler", 5000)),
           "hill_climb_20k": units(_baseline("hill_climb", graph, devices, "doppler", 20000)),
           "lower_bound": units(analysis.makespan_lower_bound(graph, devices))}
    print(f"doppler {name}: default {row['default']['objective']:.2f} (search "
          f"{row['default']['search']:.2f}, best seed {row['default']['best_seed']:.2f}), "
          f"5K {row['brkga_5k']:.2f}; hill climb 5K {row['hill_climb_5k']:.2f}, 20K "
          f"{row['hill_climb_20k']:.2f}", flush=True)
    rows.append(row)
  return rows


def wc_graphs():
  workloads = ("chain_mm", "ffnn") if _QUICK.value else sharded.WORKLOADS
  files = DOPPLER_FILES[:2] if _QUICK.value else DOPPLER_FILES
  for count in (4, 8):
    for name in files:
      yield (f"{name} x{count}", graph_io.load_graph(os.path.join(DOPPLER_DIR, name + ".txt")),
             devices_lib.homogeneous(count))
    for workload in workloads:
      devices = (devices_lib.homogeneous(4) if count == 4 else devices_lib.nvlink_two_groups(4))
      yield f"sharded {workload} x{count}", sharded.generate(workload, count), devices


def wc_section() -> list[dict[str, Any]]:
  rows = []
  for label, graph, devices in wc_graphs():
    ours = _ours(graph, devices, "wc", None)
    climb = _baseline("hill_climb", graph, devices, "wc", 20000)
    rows.append({"graph": label, "ops": graph.num_ops, **ours, "hill_climb_20k": climb,
                 "gain_vs_hill_climb_pct": 100 * (1 - ours["objective"] / climb),
                 "lower_bound": analysis.makespan_lower_bound(graph, devices)})
    print(f"wc {label}: ours {ours['objective']:.6g} (search {ours['search']:.6g}, best seed "
          f"{ours['best_seed']:.6g}) vs hill climb 20K {climb:.6g}: "
          f"{rows[-1]['gain_vs_hill_climb_pct']:+.1f}%", flush=True)
  return rows


def synthetic_section() -> list[dict[str, Any]]:
  graphs = dataset_lib.load_or_build_synthetic()["test"]
  count = 3 if _QUICK.value else _SYNTHETIC_GRAPHS.value
  rows = []
  for index, graph in enumerate(graphs[:count]):
    devices = devices_lib.homogeneous(2)
    ours = _ours(graph, devices, "sync", 5000)
    local = _baseline("local_search", graph, devices, "sync", 5000)
    rows.append({"graph": index, "ops": graph.num_ops, **ours, "local_search_5k": local,
                 "ratio": ours["objective"] / local})
    print(f"synthetic test {index} ({graph.num_ops} ops): ours {ours['objective']:.6g} "
          f"(search {ours['search']:.6g}) vs local search {local:.6g}: ratio "
          f"{rows[-1]['ratio']:.3f}", flush=True)
  return rows


def markdown(results: dict[str, Any]) -> list[str]:
  lines = []
  if "doppler" in results:
    lines += ["## Doppler graphs, Doppler model, 4 devices (Doppler units)", "",
              *report.markdown_table(
                  ["graph", "default run", "its search", "best seed", "evals", "search s",
                   "BRKGA 5K", "hill climb 5K", "hill climb 20K", "lower bound"],
                  [[r["graph"], f"{r['default']['objective']:.2f}",
                    f"{r['default']['search']:.2f}",
                    f"{r['default']['best_seed']:.2f} ({r['default']['best_seed_name']})",
                    r["default"]["evaluations"], f"{r['default']['search_seconds']:.1f}",
                    f"{r['brkga_5k']:.2f}", f"{r['hill_climb_5k']:.2f}",
                    f"{r['hill_climb_20k']:.2f}", f"{r['lower_bound']:.2f}"]
                   for r in results["doppler"]]), ""]
  if "wc" in results:
    rows = results["wc"]
    lines += ["## WC model: default run vs hill climb with 20,000 evaluations", "",
              *report.markdown_table(
                  ["graph", "ops", "default run", "its search", "best seed", "evals",
                   "search s", "hill climb 20K", "gain", "lower bound"],
                  [[r["graph"], r["ops"], f"{r['objective']:.5g}", f"{r['search']:.5g}",
                    f"{r['best_seed']:.5g}", r["evaluations"], f"{r['search_seconds']:.1f}",
                    f"{r['hill_climb_20k']:.5g}", f"{r['gain_vs_hill_climb_pct']:+.1f}%",
                    f"{r['lower_bound']:.5g}"] for r in rows]),
              "", f"Mean gain {np.mean([r['gain_vs_hill_climb_pct'] for r in rows]):+.2f}%; "
              f"at least 5% on {sum(r['gain_vs_hill_climb_pct'] >= 5 for r in rows)} of "
              f"{len(rows)}; the hill climb is within 5% of the lower bound (max(total "
              f"compute / summed speeds, longest compute path)), where no gain of 5% exists, on "
              f"{sum(r['hill_climb_20k'] <= 1.05 * r['lower_bound'] for r in rows)}.", ""]
  if "synthetic" in results:
    rows = results["synthetic"]
    ratios = np.array([r["ratio"] for r in rows])
    lines += ["## Synthetic test split, synchronous model, 2 devices, 5,000 evaluations", "",
              f"BRKGA / local search: mean {ratios.mean():.4f} (gain "
              f"{100 * (1 - ratios.mean()):+.2f}%), median {np.median(ratios):.4f}; BRKGA "
              f"better on {int((ratios < 1).sum())} of {len(rows)} graphs.", ""]
  return lines


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("synthetic_graphs",))
  sections = {"doppler": doppler_section, "wc": wc_section, "synthetic": synthetic_section}
  unknown = [s for s in _SECTIONS.value if s not in sections]
  if unknown:
    raise errors.ConfigError(f"--sections: unknown {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(sections)}")
  started = time.perf_counter()
  results = {name: sections[name]() for name in _SECTIONS.value}
  header, facts = report.header("Search targets: ours vs the strongest simple baselines",
                                "regal_experiments.search_targets", "quick" if _QUICK.value else "full")
  report.publish(_OUT.value, "search_targets", header, markdown(results),
                 {**facts, **results, "seconds": time.perf_counter() - started})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
