r"""The exact Doppler scorer against the SimPy model: equal on every assignment, and how fast.

  python -m experiments.bench.doppler_scorer                  # the report in experiments/results
  python -m experiments.bench.doppler_scorer --quick          # a few hundred assignments

For each of the four shared Doppler graphs (4 devices) and a 367-op REGAL synthetic graph, it
draws assignments (random ones, the heuristics' — critical path both ways, HEFT, GP + DFS, one
device — and each heuristic with a few ops moved, where near-equal schedules tie), scores every
one with `regal.scoring.doppler_sim` (SimPy) and `regal.scoring.native_doppler`, and counts those whose
makespan or op times differ (must be 0). Speed is measured in the same run: the native scorer on
a large population split over every core, the median of `--repeats` timed calls, SimPy over every checked assignment (evaluations per second = assignments / total
seconds); the ratio is native / SimPy evaluations per second. Run it on a quiet machine.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Sequence

import numpy as np
from absl import flags

from datasets import benchmarks
from datasets import devices as devices_lib
from datasets import cli, errors
from datasets import io as graph_io
from datasets.synthetic import sized_graph
from experiments import report
from regal.baselines import list_scheduling, partition
from regal.scoring import doppler_sim, native_doppler, performance

_QUICK = flags.DEFINE_bool("quick", False, "Few assignments (a smoke run).")
_CHECKED = flags.DEFINE_integer("checked", 2000, "Assignments per graph checked against SimPy.")
_TIMED = flags.DEFINE_integer("timed", 20000, "Population the native scorer is timed on.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed calls per scorer (median kept).")
_OUT_DIR = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "doppler_scorer"),
                               "Where the report goes.")

SHARED = benchmarks.DOPPLER_GRAPHS
DOPPLER_FILES = ("chain_mm_112nodes.txt", "ffnn_192nodes.txt", "transformer_block_215nodes.txt",
                 "full_transformer_layer_261nodes.txt")


def assignments(graph, devices, count: int, rng: np.random.Generator) -> np.ndarray:
  """Heuristic placements, each with a few ops moved, then random ones: `count` in all."""
  problem = performance.Problem(graph, devices, model="doppler")
  heuristic = [list_scheduling.critical_path_assignment(graph, devices)[0],
               list_scheduling.critical_path_assignment(graph, devices, True)[0],
               list_scheduling.heft_assignment(graph, devices)[0],
               partition.gp_dfs(problem).placement, np.zeros(graph.num_ops, np.int64)]
  rows = list(heuristic)
  for k in range(count // 2):
    moved = heuristic[k % len(heuristic)].copy()
    ops = rng.choice(graph.num_ops, min(3, graph.num_ops), replace=False)
    moved[ops] = rng.integers(0, devices.num_devices, len(ops))
    rows.append(moved)
  rows += list(rng.integers(0, devices.num_devices, (max(count - len(rows), 0), graph.num_ops)))
  return np.stack(rows[:count])


def median_seconds(fn, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def measure(name: str, graph, devices, checked: int, timed: int, repeats: int) -> dict:
  rng = np.random.default_rng(0)
  placements = assignments(graph, devices, checked, rng)
  host = native_doppler.build_doppler_graph(graph, devices)
  makespan, start, end = native_doppler.simulate(host, placements, record_times=True)
  mismatches = 0
  reference_seconds = []
  for k, placement in enumerate(placements):
    began = time.perf_counter()
    schedule = doppler_sim.simulate_doppler(graph, devices, placement)
    reference_seconds.append(time.perf_counter() - began)
    mismatches += not (schedule.makespan == makespan[k]
                       and np.array_equal(schedule.op_start, start[k])
                       and np.array_equal(schedule.op_end, end[k]))
  population = rng.integers(0, devices.num_devices, (timed, graph.num_ops))
  native_doppler.simulate(host, population[:8])  # Compiled (numba's cache) before timing.
  native_seconds = median_seconds(lambda: native_doppler.simulate(host, population), repeats)
  simpy_rate = len(reference_seconds) / sum(reference_seconds)
  native_rate = timed / native_seconds
  return {"graph": name, "ops": graph.num_ops, "edges": graph.num_edges,
          "checked": len(placements), "mismatches": mismatches,
          "simpy_evals_per_second": simpy_rate, "native_evals_per_second": native_rate,
          "speedup": native_rate / simpy_rate}


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  checked, timed = (200, 4000) if _QUICK.value else (_CHECKED.value, _TIMED.value)
  if checked < 10 or timed < 1 or _REPEATS.value < 1:
    raise errors.ConfigError("--checked must be at least 10, --timed and --repeats positive")
  devices = devices_lib.homogeneous(4)
  graphs = [(f[:-4], graph_io.load_graph(os.path.join(SHARED, f))) for f in DOPPLER_FILES]
  graphs.append(("synthetic_367", sized_graph(367)))
  rows = []
  for name, graph in graphs:
    rows.append(measure(name, graph, devices, checked, timed, _REPEATS.value))
    row = rows[-1]
    print(f"{name}: {row['ops']} ops, {row['mismatches']} of {row['checked']} differ; SimPy "
          f"{row['simpy_evals_per_second']:.0f}/s, native {row['native_evals_per_second']:.0f}/s"
          f", {row['speedup']:.0f}x", flush=True)
  lines, facts = report.header("Exact Doppler scorer vs the SimPy model",
                               "experiments.bench.doppler_scorer",
                               "quick" if _QUICK.value else "full")
  body = ["| graph | ops | edges | assignments checked | differing | SimPy evals/s | "
          "native evals/s | native / SimPy |", "|---|---|---|---|---|---|---|---|"]
  body += [f"| {r['graph']} | {r['ops']} | {r['edges']} | {r['checked']} | {r['mismatches']} | "
           f"{r['simpy_evals_per_second']:.0f} | {r['native_evals_per_second']:.0f} | "
           f"{r['speedup']:.0f}x |" for r in rows]
  body += ["", f"Native scorer: {os.cpu_count()} threads over a population of {timed}; SimPy: "
           f"one assignment at a time, every checked one timed. Every assignment's makespan, op starts "
           f"and op ends are compared."]
  report.publish(_OUT_DIR.value, "doppler_scorer", lines, body, {**facts, "rows": rows})
  if any(r["mismatches"] for r in rows):
    raise errors.RegalError("the native scorer differs from the SimPy model (see the report)")


if __name__ == "__main__":
  cli.run_cli(main)
