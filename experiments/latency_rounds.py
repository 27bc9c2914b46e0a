r"""Decoder or repair for the single-sample latency search (`--model blocks`): which rounds
should the iterated local search take, on the shared latency workloads, in equal time?

  python -m regal_experiments.latency_rounds            # ~5 minutes on 2 cores: 3 s a run
  python -m regal_experiments.latency_rounds --quick    # seeds 0-1, 0.5 s a run

Each run gets the same wall time, not the same number of scored moves: an order cut scores
no move and a repair scores none either, but both take time.
Every variant starts from the same split (the least-sum-of-runs cut of the units'
topological order), descends by class moves that keep every block contiguous, and then
perturbs and descends again until the budget of scored moves is spent; only the rounds'
perturbations differ (`pipeline_local_search.ROUNDS`):
  contiguous_moves+order_cut  the default: random class moves that keep contiguity, every
                              other round the cut of a random topological order;
  order_cut                   the decoder alone: every round the cut of a random order;
  contiguous_moves            the class moves alone;
  moves+repair                random class moves anywhere, then a repair that sends the part
                              of each non-contiguous block that computes less to the CPU side;
  moves+repair+order_cut      those, every other round the order cut.
The report gives each variant's latency per workload and seed, its ratio to the default's
(paired by seed), and the mean ratio.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import time  # noqa: E402
from typing import Any, Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import benchmarks, errors  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_datasets.formats import profiled  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.baselines import pipeline_linear, pipeline_local_search  # noqa: E402
from regal.scoring.blocks import reference as blocks  # noqa: E402

LATENCY = os.path.join(benchmarks.SHARED_GRAPHS, "profiled", "latency")
DEFAULT = "contiguous_moves+order_cut"

_QUICK = flags.DEFINE_bool("quick", False, "Seeds 0-1 and 0.5 s a run.")
_SECONDS = flags.DEFINE_float("seconds", 3.0, "Wall time of each run (without --quick).",
                              lower_bound=0.01, upper_bound=3600.0)
_WORKLOADS = flags.DEFINE_list("workloads", None, "Names of the latency workloads to run "
                               "(default: all of them).")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "latency_rounds"),
                           "Output directory.")


def measure(quick: bool, seconds: float, names: Sequence[str] | None) -> dict[str, Any]:
  seeds = range(2 if quick else 3)
  rows = []
  known = sorted(f[:-5] for f in os.listdir(LATENCY) if f.endswith(".json"))
  unknown = sorted(set(names or ()) - set(known))
  if unknown:
    raise errors.ConfigError(f"--workloads: unknown {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(known)}")
  for name in [n for n in known if names is None or n in names]:
    workload = graph_io.load_workload(os.path.join(LATENCY, name + ".json"))
    start = pipeline_linear.for_latency(workload).device
    if blocks.violations(workload, start):
      start = np.full(workload.num_ops, profiled.CPU, np.int64)
    row = {"workload": name, "ops": workload.num_ops, "start": blocks.latency(workload, start),
           "variants": {}}
    for variant, perturbations in pipeline_local_search.ROUNDS.items():
      runs = []
      for seed in seeds:
        searched = pipeline_local_search.local_search(
            workload, start, evaluations=2 ** 62, seed=seed, objective="blocks",
            perturbations=perturbations, deadline=time.perf_counter() + seconds)
        assert blocks.violations(workload, searched.device) == []
        runs.append({"seed": seed, "latency": blocks.latency(workload, searched.device),
                     "rounds": searched.rounds, "evaluations": searched.evaluations,
                     "seconds": searched.seconds})
      row["variants"][variant] = runs
      print(f"{name:30s} {variant:28s} " + " ".join(f"{r['latency']:9.2f}" for r in runs)
            + f"  ({np.mean([r['rounds'] for r in runs]):.0f} rounds)", flush=True)
    rows.append(row)
  summary = {}
  for variant in pipeline_local_search.ROUNDS:
    ratios = [run["latency"] / base["latency"] for row in rows
              for run, base in zip(row["variants"][variant], row["variants"][DEFAULT])]
    summary[variant] = {"mean_ratio_to_default": float(np.mean(ratios)),
                        "wins": int(sum(r < 1 - 1e-9 for r in ratios)),
                        "losses": int(sum(r > 1 + 1e-9 for r in ratios)),
                        "worst_ratio": float(max(ratios))}
  return {"seconds": seconds, "seeds": list(seeds), "rows": rows, "summary": summary}


def markdown(data: dict[str, Any]) -> list[str]:
  variants = list(pipeline_local_search.ROUNDS)
  lines = [f"{data['seconds']:g} s a run, seeds {data['seeds']}. Worst seed's latency per "
           f"workload (lower is better):", "",
           "| workload | start | " + " | ".join(variants) + " |",
           "|---|---|" + "---|" * len(variants)]
  for row in data["rows"]:
    lines.append(f"| {row['workload']} | {row['start']:.2f} | " + " | ".join(
        f"{max(r['latency'] for r in row['variants'][v]):.2f}" for v in variants) + " |")
  lines += ["", f"Paired by seed against the default ({DEFAULT}):", "",
            "| variant | mean ratio | wins | losses | worst ratio |", "|---|---|---|---|---|"]
  for variant, s in data["summary"].items():
    lines.append(f"| {variant} | {s['mean_ratio_to_default']:.4f} | {s['wins']} | "
                 f"{s['losses']} | {s['worst_ratio']:.4f} |")
  return lines


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("seconds",))
  data = measure(_QUICK.value, 0.5 if _QUICK.value else _SECONDS.value, _WORKLOADS.value)
  header, facts = report.header("Latency search rounds: decoder or repair",
                                "regal_experiments.latency_rounds", "quick" if _QUICK.value else "full")
  report.publish(_OUT.value, "latency_rounds", header, markdown(data), {**facts, **data})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
