r"""When is CP-SAT worth starting beside the search? Measured on synthetic training graphs only.

  python -m regal_experiments.portfolio_thresholds            # ~10 minutes on 2 cores
  python -m regal_experiments.portfolio_thresholds --quick    # two sizes, ~2 minutes

Graphs: `regal_datasets.synthetic.sized_graph` of 10-200 core ops on 2 and 4 identical devices, the
link bandwidth set so that communication over computation (the mean tensor's transfer time
over the mean op's time) is 0 (free transfers), 0.1, 1 or 10, as in the task-graph benchmarks;
the delay model.
Per graph: CP-SAT alone (`baselines.exact.solve_graph`, one worker, the best heuristic seed as
its hint, `regal.search.portfolio.SECONDS`), when it proved optimality, and its answer's
reference makespan; and the search alone (`regal.optimize`'s default, `exact_solver="off"`).
The thresholds in `regal/search/portfolio.py` (`MAX_OPS`, `HEAD_START`, `SECONDS`) are read off
this report: the share proven within the head start (the search is then skipped) and how
often the solver's answer beats the search's, by size.
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

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import benchmarks  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.baselines import exact, heuristics  # noqa: E402
from regal.scoring import chromosome as chromosome_lib  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.search import portfolio  # noqa: E402

SIZES = (10, 20, 30, 50, 100, 200)
CCRS = (0.0, 0.1, 1.0, 10.0)
DEVICES = (2, 4)

_QUICK = flags.DEFINE_bool("quick", False, "Sizes 10 and 50 only.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "portfolio_thresholds"),
                           "Report folder.")


def measure(size: int, num_devices: int, ccr: float) -> dict:
  graph = sized_graph(size, seed=size + num_devices)
  devices = benchmarks.devices_at_ccr(graph, num_devices, ccr)
  problem = performance.Problem(graph, devices, model="delay")
  seeds = heuristics.seeds(problem, heuristics.HEURISTICS)
  best_seed = min(seeds.values(), key=lambda c: performance.score_reference(problem, c)[0])
  started = time.perf_counter()
  placement, order, solution = exact.solve_graph(
      problem, portfolio.SECONDS, workers=1, hint=chromosome_lib.assignment(best_seed,
                                                                           problem.layout))
  solver_seconds = time.perf_counter() - started
  solver_value = performance.score_reference(
      problem, chromosome_lib.encode(placement, order, problem.layout))[0]
  started = time.perf_counter()
  search = optimize_lib.run(graph, devices, methods.RunConfig(
      model="delay", brkga=methods.BrkgaOptions(exact_solver="off"))).result
  return {"ops": graph.num_ops, "size": size, "devices": num_devices, "ccr": ccr,
          "solver_status": solution["status"], "solver_seconds": solver_seconds,
          "solver_objective": float(solver_value), "solver_bound": solution["lower_bound"],
          "search_objective": float(search.objective),
          "search_seconds": time.perf_counter() - started,
          "solver_better": bool(solver_value < search.objective * (1 - 1e-9)),
          "search_better": bool(search.objective < solver_value * (1 - 1e-9))}


def summarize(rows: list[dict]) -> list[str]:
  lines = ["By size (core ops), over devices and CCRs: the share of graphs the solver proved "
           f"optimal within {portfolio.HEAD_START:g} s (the search is then skipped) and within "
           f"{portfolio.SECONDS:g} s, and how often its answer beats the search's or loses.", ""]
  table = []
  for size in sorted({r["size"] for r in rows}):
    some = [r for r in rows if r["size"] == size]
    proven = [r for r in some if r["solver_status"] == "OPTIMAL"]
    table.append([size, len(some),
                  f"{sum(r['solver_seconds'] <= portfolio.HEAD_START for r in proven)}",
                  f"{len(proven)}", f"{sum(r['solver_better'] for r in some)}",
                  f"{sum(r['search_better'] for r in some)}",
                  f"{np.median([r['solver_seconds'] for r in some]):.2f}",
                  f"{np.median([r['search_seconds'] for r in some]):.2f}"])
  lines += report.markdown_table(
      ["ops", "graphs", f"proven <= {portfolio.HEAD_START:g} s", "proven", "solver better",
       "search better", "solver s (median)", "search s (median)"], table)
  return lines + ["", "Every graph:", ""] + report.markdown_table(
      ["ops", "devices", "ccr", "status", "solver s", "solver", "bound", "search", "search s"],
      [[r["ops"], r["devices"], r["ccr"], r["solver_status"], f"{r['solver_seconds']:.2f}",
        f"{r['solver_objective']:.6g}", f"{r['solver_bound']:.6g}",
        f"{r['search_objective']:.6g}", f"{r['search_seconds']:.2f}"] for r in rows])


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  sizes = (10, 50) if _QUICK.value else SIZES
  rows = []
  for size in sizes:
    for num_devices in DEVICES:
      for ccr in CCRS:
        rows.append(measure(size, num_devices, ccr))
        r = rows[-1]
        print(f"{r['ops']} ops, {num_devices} devices, CCR {ccr:g}: solver {r['solver_status']} "
              f"{r['solver_objective']:.6g} in {r['solver_seconds']:.2f} s; search "
              f"{r['search_objective']:.6g} in {r['search_seconds']:.2f} s", flush=True)
  header, facts = report.header("When CP-SAT is worth starting beside the search",
                                "regal_experiments.portfolio_thresholds",
                                "quick" if _QUICK.value else "full")
  report.publish(_OUT.value, "portfolio_thresholds", header, summarize(rows),
                 {**facts, "rows": rows})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
