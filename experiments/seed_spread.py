r"""Does the default run depend on its seed? Each seed's answer against the best known.

  python -m regal_experiments.seed_spread            # ~60 minutes on 2 cores
  python -m regal_experiments.seed_spread --quick    # two graphs, two seeds, small references

Graphs (issue 37's targets): the four shared Doppler files (Doppler model, 4 identical
devices) and the sharded workloads (ChainMM, FFNN, Llama block and layer; WC model; 4
identical devices, and 8 in two NVLink groups of 4, as `regal_experiments.search_targets` places
them). Per graph: `regal.optimize`'s default run (no budget flag) for each of `--seeds`, and
reference runs of the same search with `--reference_evals` evaluations for each of
`--reference_seeds`. The best known is the lowest objective any of these runs reached; each
default seed's gap to it is reported, with the worst gap per graph and the share of graphs
where every seed is within `--tolerance_pct`. On devices in more than one link group (the
NVLink x8 graphs), split references follow for each of `--split_reference_seeds`: the same
search with `--reference_evals` evaluations started from one chromosome only, the group of
every op in the best run so far, or in the best known the previous report carried where that
is better and its placement was kept (the device inside each group drawn by the seed;
`search.guides.GroupSplit`): which ops share a group decides those graphs' basins, so the best
known comes from a run that starts in the best basin found. The report keeps each best
known's placement. Rows (each run's placement included) are appended to a JSONL file beside
the report, so a killed run resumes where it stopped.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import atomic, benchmarks, cli, errors, sharded  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_experiments import command, paired_stats, report  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.scoring import chromosome as chromosome_lib  # noqa: E402
from regal.scoring import models, performance  # noqa: E402
from regal.search import guides  # noqa: E402

DOPPLER_FILES = ("chain_mm_112nodes", "ffnn_192nodes", "transformer_block_215nodes",
                 "full_transformer_layer_261nodes")

_QUICK = flags.DEFINE_bool("quick", False, "Two graphs, seeds 0-1, references of 20,000.")
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2", "3", "4"], "Seeds of the default run.")
_REFERENCE_SEEDS = flags.DEFINE_list("reference_seeds", ["0", "1"], "Seeds of the references.")
_SPLIT_SEEDS = flags.DEFINE_list("split_reference_seeds", ["0", "1"],
                                  "Seeds of the split references (devices in link groups only; "
                                  "none: no split reference).")
_REFERENCE_EVALS = flags.DEFINE_integer("reference_evals", 1_000_000,
                                        "Evaluations of each reference run.",
                                        lower_bound=1, upper_bound=1_000_000_000)
_TOLERANCE = flags.DEFINE_float("tolerance_pct", 1.0, "A seed within this gap passes.",
                                lower_bound=0.0, upper_bound=100.0)
_CARRY = flags.DEFINE_bool("carry_best_known", True,
                           "Carry the best known of the report already in --out (of the same "
                           "mode) into this one, with where it came from: a best found by an "
                           "earlier run, on any machine, stays the best known.")
_OUT_DIR = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "seed_spread"),
                               "Where the report and its resumable rows go.")


def targets():
  """(label, graph, devices, model) of every measured graph."""
  for name in DOPPLER_FILES:
    yield (f"{name} (doppler x4)",
           graph_io.load_graph(os.path.join(benchmarks.DOPPLER_GRAPHS, name + ".txt")),
           devices_lib.homogeneous(4), "doppler")
  for count in (4, 8):
    devices = devices_lib.homogeneous(4) if count == 4 else devices_lib.nvlink_two_groups(4)
    for workload in sharded.WORKLOADS:
      yield f"sharded {workload} (wc x{count})", sharded.generate(workload, count), devices, "wc"


def _row(label: str, kind: str, seed: int, budget: int | None, model: str, outcome: dict,
         started: float) -> dict:
  """One run's row: `outcome` {evals, objective, search_seconds, placement} (`started`: its
  perf_counter start)."""
  objective = outcome["objective"]
  return {"graph": label, "kind": kind, "seed": seed, "budget": budget,
          "evals": int(outcome["evals"]), "objective": float(objective),
          "in_units": float(models.get(model).in_units(objective)),
          "search_seconds": float(outcome["search_seconds"]),
          "seconds": time.perf_counter() - started,
          "placement": [int(d) for d in outcome["placement"]]}


def run_one(label: str, graph, devices, model: str, seed: int, evals: int | None) -> dict:
  started = time.perf_counter()
  data = optimize_lib.run(graph, devices, methods.RunConfig(model=model, evals=evals,
                                                            seed=seed)).result
  return _row(label, "default" if evals is None else "reference", seed, evals, model,
              {"evals": data.evaluations, "objective": data.objective,
               "search_seconds": data.wall_seconds["search"],
               "placement": [entry["device"] for entry in data.placement]}, started)


def run_split(label: str, graph, devices, model: str, seed: int, evals: int,
              source: dict) -> dict:
  """A split reference: the default search with `evals` evaluations, its only seed the group
  split of `source`'s placement (`paired_stats.split_source`; `guides.GroupSplit`), scored by
  the reference model as `regal.optimize` scores its answer."""
  started = time.perf_counter()
  problem = performance.Problem(graph, devices, model=model)
  guided = guides.guidance(problem, seed, [guides.GroupSplit(tuple(source["placement"]))])
  result = guides.run_guided(problem, evals, seed, guided)
  objective = performance.score_reference(problem, result.best_chromosome)[0]
  placement, _ = chromosome_lib.assignment(result.best_chromosome, problem.layout)
  return {**_row(label, "split reference", seed, evals, model,
                 {"evals": result.evaluations, "objective": objective,
                  "search_seconds": result.search_seconds, "placement": placement}, started),
          "split_from": source["from"]}


def _earlier_bests(mode: str) -> dict[str, dict]:
  """The best known of the report already in --out, if it is of this mode."""
  path = os.path.join(_OUT_DIR.value, "seed_spread.json")
  if not os.path.exists(path):
    return {}
  try:
    with open(path) as file:
      earlier = json.load(file)
    return paired_stats.earlier_bests(earlier) if earlier.get("mode") == mode else {}
  except (OSError, ValueError, KeyError, TypeError) as error:
    raise errors.ConfigError(f"the earlier report {path} (--carry_best_known) does not read: "
                             f"{error}") from None


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("reference_evals",))
  try:
    seeds = [int(s) for s in _SEEDS.value]
    reference_seeds = [int(s) for s in _REFERENCE_SEEDS.value]
    split_seeds = [int(s) for s in _SPLIT_SEEDS.value]
  except ValueError as error:
    raise errors.ConfigError(f"--seeds, --reference_seeds and --split_reference_seeds take "
                             f"integers: {error}") from None
  if any(not 0 <= s <= errors.MAX_SEED for s in seeds + reference_seeds + split_seeds):
    raise errors.ConfigError(f"--seeds, --reference_seeds and --split_reference_seeds take "
                             f"seeds from 0 to {errors.MAX_SEED}")
  if not seeds or _REFERENCE_EVALS.value < 1 or _TOLERANCE.value < 0:
    raise errors.ConfigError("--seeds must name a seed, --reference_evals be positive and "
                             "--tolerance_pct at least 0")
  every = list(targets())
  if _QUICK.value:
    # A Doppler file, and a graph on NVLink groups (its split reference runs too).
    every, seeds = [every[0], every[9]], seeds[:2]
    reference_seeds, split_seeds = reference_seeds[:1], split_seeds[:1]
  reference_evals = 20_000 if _QUICK.value else _REFERENCE_EVALS.value
  mode = "quick" if _QUICK.value else "full"
  earlier = _earlier_bests(mode) if _CARRY.value else {}  # Read before any work.
  os.makedirs(_OUT_DIR.value, exist_ok=True)
  path = os.path.join(_OUT_DIR.value, f"seed_spread-{'quick' if _QUICK.value else 'full'}.jsonl")
  done = {paired_stats.spread_key(r): r for r in atomic.read_json_lines(path)}
  for label, graph, devices, model in every:
    plan = [(seed, None) for seed in seeds] + [(seed, reference_evals)
                                               for seed in reference_seeds]
    for seed, evals in plan:
      key = (label, "default" if evals is None else "reference", seed, evals)
      if key in done:
        continue
      row = run_one(label, graph, devices, model, seed, evals)
      cli.exit_if_stopped()
      atomic.append_json_line(path, row)
      done[key] = row
      _progress(label, row)
    if devices_lib.link_groups(devices).max() == 0:
      continue  # One group: a split says nothing.
    measured = paired_stats.spread_rows(list(done.values()), [label], seeds, reference_seeds,
                                        reference_evals)
    for seed in split_seeds:
      key = (label, "split reference", seed, reference_evals)
      if key in done:
        continue
      source = paired_stats.split_source(measured, earlier.get(label))
      if source is None:
        raise errors.ConfigError(f"{path}: its rows predate placements, which split references "
                                 f"start from; move it away to measure afresh")
      row = run_split(label, graph, devices, model, seed, reference_evals, source)
      cli.exit_if_stopped()
      atomic.append_json_line(path, row)
      done[key] = row
      _progress(label, row)
  labels = [label for label, *_ in every]
  rows = paired_stats.spread_rows(list(done.values()), labels, seeds, reference_seeds,
                                  reference_evals, split_seeds)
  summary = paired_stats.spread_summary(rows, labels, _TOLERANCE.value, earlier)
  lines, facts = report.header("Seed spread of the default run against the best known",
                               "regal_experiments.seed_spread", mode)
  body = [f"Default run: `regal.optimize`'s defaults (no budget flag), seeds "
          f"{', '.join(map(str, seeds))}. References: the same search with "
          f"{reference_evals:,} evaluations, seeds {', '.join(map(str, reference_seeds))}; "
          f"on the graphs of two NVLink groups also split references, seeds "
          f"{', '.join(map(str, split_seeds)) or 'none'}: the same budget, started only from "
          f"the group of each op in the best of those runs or in the carried best known, if "
          f"better (devices inside the groups drawn). "
          f"Best known: the lowest objective of all these runs and of the best known the previous "
          f"report carried (its run and date named; runs on another CPU can end elsewhere) "
          f"(Doppler units for the doppler model, seconds-like cost units for WC). "
          f"Gap = objective / best known - 1.", ""]
  body += report.markdown_table(
      ["graph", "best known", "from", "default run's gap per seed (%)", "worst gap %",
       f"all within {_TOLERANCE.value:g}%", "default run s"],
      [[s["graph"], f"{s['best_known']:.6g}", s["best_from"],
        ", ".join(f"{g:.2f}" for g in s["default_gaps_pct"]), f"{s['worst_gap_pct']:.2f}",
        "yes" if s["all_within"] else "**no**", f"{s['default_seconds']:.1f}"]
       for s in summary])
  passed = sum(s["all_within"] for s in summary)
  body += ["", f"Every seed within {_TOLERANCE.value:g}% of the best known on {passed} of "
           f"{len(summary)} graphs."]
  report.publish(_OUT_DIR.value, "seed_spread", lines, body,
                 {**facts, "summary": summary, "rows_file": os.path.basename(path)})


def _progress(label: str, row: dict) -> None:
  print(f"{label}: {row['kind']} seed {row['seed']}: {row['in_units']:.6g} "
        f"({row['evals']:,} evals, {row['seconds']:.1f} s)", flush=True)


if __name__ == "__main__":
  cli.run_cli(main)
