"""The library of `regal_experiments.search_ab` (its flags stay in that module, so tests and other
commands import this one): the WC training graphs, the variant's settings, one run, and the
paired summary."""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

import regal_brkga as brkga
from regal_datasets import errors
from regal_experiments import paired_stats, report
from regal.scoring import performance
from regal.search import brkga_presets, guides

# (workload, devices, generator arguments): shapes the test graphs (the generator's defaults)
# do not take.
TRAINING_GRAPHS = (
    ("chain_mm", 8, {"size": 8000}), ("llama_block", 4, {"seq_len": 2048}),
    ("llama_layer", 4, {"seq_len": 2048}), ("chain_mm", 8, {"grid_style": "2d"}),
    ("llama_block", 8, {"grid_style": "2d"}), ("llama_layer", 8, {"grid_style": "2d"}),
    ("llama_layer", 4, {"grid_style": "2d"}), ("ffnn", 8, {"flops_per_byte": 300.0}))
QUICK_GRAPHS = (("ffnn", 4, {"flops_per_byte": 300.0}), ("chain_mm", 4, {"grid_style": "2d"}))
QUICK_EVALS = 3_000
# The engine's settings a variant may change, and their types.
ENGINE_TYPES = {"population_size": int, "elite_fraction": float, "mutant_fraction": float,
                "rho": float, "num_populations": int, "restart_patience": int,
                # The bottom-level prior on the priority genes (`guides.BottomLevelPrior`).
                "prior_q": float, "prior_spread": float}
ENGINE_KEYS = tuple(ENGINE_TYPES)
BASELINE = "default"
WITHIN = 0.01


def graph_label(workload: str, count: int, arguments: dict[str, Any]) -> str:
  return " ".join([workload, f"x{count}"] + [f"{k}={v}" for k, v in sorted(arguments.items())])


MAX_SEEDS = 10_000  # Seeds of one command: each runs whole searches, so more is a typo.


def parse_seeds(text: str) -> list[int]:
  """FIRST-LAST or a,b,c: at least one seed, at most `MAX_SEEDS`, each in [0, MAX_SEED]."""
  span = "-" in text.strip("-")
  try:
    parts = [int(s) for s in (text.split("-", 1) if span else text.split(",")) if s.strip()]
    if span and len(parts) != 2:
      raise ValueError(text)
  except ValueError:
    raise errors.ConfigError(f"--seeds takes FIRST-LAST or a,b,c, got "
                             f"{errors.brief(text)}") from None
  if span:
    first, last = parts
    if last - first + 1 > MAX_SEEDS:  # Before the list is built: it could exhaust memory.
      raise errors.ConfigError(f"--seeds {errors.brief(text)} names {last - first + 1:,} "
                               f"seeds; at most {MAX_SEEDS:,}")
    seeds = list(range(first, last + 1))
  else:
    seeds = parts
  if not seeds or min(seeds) < 0:
    raise errors.ConfigError(f"--seeds names no seed, or a negative one: {errors.brief(text)}")
  if len(seeds) > MAX_SEEDS or max(seeds) > errors.MAX_SEED:
    raise errors.ConfigError(f"--seeds takes at most {MAX_SEEDS:,} seeds, each at most "
                             f"{errors.MAX_SEED}: {errors.brief(text)}")
  return seeds


def parse_variant(items: Sequence[str]) -> dict[str, Any]:
  """KEY=VALUE items as typed settings; every key must be a known setting, named once."""
  variant: dict[str, Any] = {}
  for item in items:
    key, sep, text = item.partition("=")
    if not sep or not text:
      raise errors.ConfigError(f"--variant takes KEY=VALUE items, got {item!r}")
    if key in variant:
      raise errors.ConfigError(f"--variant names {key} twice")
    if key in ENGINE_KEYS:
      kind = ENGINE_TYPES[key]
    elif key in brkga_presets.SEARCH_KEYS:
      kind = type(brkga_presets.builtin_search_values()[key])  # str, int or float.
    else:
      raise errors.ConfigError(f"--variant: unknown setting {key!r}; known: "
                               f"{', '.join(brkga_presets.SEARCH_KEYS + ENGINE_KEYS)}")
    try:
      variant[key] = kind(text)
    except ValueError:
      raise errors.ConfigError(f"--variant {key} takes a {kind.__name__}, got {text!r}") from None
  return variant


def arm_name(variant: dict[str, Any]) -> str:
  return ",".join(f"{k}={v}" for k, v in sorted(variant.items())) or BASELINE


def arm_settings(problem: performance.Problem, evals: int, variant: dict[str, Any]):
  """(BRKGA parameters, search settings) of the default search with `variant` applied;
  checked before any run, so a bad value fails at once."""
  params = guides.plan_search(problem, evals).params
  engine = {k: v for k, v in variant.items() if k in ENGINE_KEYS}
  for key in ("elite_fraction", "mutant_fraction", "rho"):
    if key in engine and not 0 < engine[key] < 1:
      raise errors.ConfigError(f"--variant {key} must be in (0, 1), got {engine[key]}")
  if {"population_size", "elite_fraction", "mutant_fraction"} & set(engine):
    population = engine.get("population_size", params.population_size)
    elites = engine.get("elite_fraction", brkga.ELITE_FRACTION)
    mutants = engine.get("mutant_fraction", brkga.MUTANT_FRACTION)
    params = params.replace(population_size=population, num_elites=max(1, int(elites * population)),
                            num_mutants=int(mutants * population))
  if "rho" in engine:
    params = params.replace(rho=engine["rho"])
  if "num_populations" in engine:
    params = params.replace(num_populations=engine["num_populations"])
  if "restart_patience" in engine:
    params = params.replace(restart_patience=engine["restart_patience"])
  if "prior_q" in engine or "prior_spread" in engine:
    if not 0 < engine.get("prior_q", 1) <= 1 or not engine.get("prior_spread", 1) > 0:
      raise errors.ConfigError("--variant prior_q must be in (0, 1] and prior_spread positive")
    prior = guides.BottomLevelPrior(**{k.removeprefix("prior_"): v for k, v in engine.items()
                                       if k.startswith("prior_")})
    steered = prior.guide(problem, 0, guides.Guidance())
    params = params.replace(prior_q=steered.prior_q, prior_mean=steered.prior_mean,
                            prior_spread=steered.prior_spread)
  try:
    params = params.validate()
    settings = brkga_presets.search_settings(
        brkga_presets.DEFAULT, model=problem.model,
        overrides={k: v for k, v in variant.items() if k not in ENGINE_KEYS})
  except ValueError as error:
    raise errors.ConfigError(f"--variant {arm_name(variant)}: {error}") from None
  return params, settings


def settings_key(params, settings) -> str:
  """What an arm ran, as text: a journal row is reused only under the same settings, so a
  changed default makes the baseline's earlier rows stale instead of silently compared."""
  engine = {k: getattr(params, k) for k in ("population_size", "num_elites", "num_mutants",
                                            "num_populations", "restart_patience",
                                            "restart_from")}
  engine.update({k: np.asarray(getattr(params, k)).tolist()
                 for k in ("rho", "mutant_alpha", "mutant_beta")})
  if np.any(np.asarray(params.prior_q) > 0):  # Absent otherwise: earlier rows stay valid.
    engine.update({k: np.asarray(getattr(params, k)).tolist()
                   for k in ("prior_q", "prior_mean", "prior_spread")})
  return repr((settings, sorted(engine.items())))


def run_one(problem: performance.Problem, seed: int, evals: int, params, settings) -> dict:
  started = time.perf_counter()
  guided = guides.guidance(problem, seed, [guides.HeuristicSeeds()])
  result = guides.run_guided(problem, evals, seed, guided, guides.plan_search(
      problem, evals, settings=settings, params=params))
  return {"objective": float(result.objective), "evaluations": int(result.evaluations),
          "seconds": round(time.perf_counter() - started, 2)}


def summarize(rows: list[dict], variant: str, seeds: Sequence[int],
              labels: Sequence[str]) -> dict[str, Any]:
  """The paired comparison of arm `variant` against the baseline over `labels` x `seeds`
  (every pair must be in `rows`). Gaps are to the best objective of any row of the graph."""
  best = {}
  for row in rows:
    best[row["graph"]] = min(best.get(row["graph"], np.inf), row["objective"])
  value = {(r["graph"], r["arm"], r["seed"]): r["objective"] for r in rows}
  gap = lambda label, arm, seed: value[(label, arm, seed)] / best[label] - 1  # noqa: E731
  ours = np.array([[gap(g, variant, s) for s in seeds] for g in labels])
  base = np.array([[gap(g, BASELINE, s) for s in seeds] for g in labels])
  difference = 100 * (ours - base)
  low, high = paired_stats.bootstrap_interval(difference, np.random.default_rng(0))
  per_graph = [{"graph": g, "variant_gap_pct": float(100 * ours[i].mean()),
                "baseline_gap_pct": float(100 * base[i].mean()),
                "variant_within": int((ours[i] <= WITHIN).sum()),
                "baseline_within": int((base[i] <= WITHIN).sum()),
                "wins": int((ours[i] < base[i]).sum()), "losses": int((ours[i] > base[i]).sum())}
               for i, g in enumerate(labels)]
  return {"variant": variant, "pairs": int(difference.size),
          "variant_gap_pct": float(100 * ours.mean()), "baseline_gap_pct": float(100 * base.mean()),
          "difference_pct": float(difference.mean()), "ci95_pct": [low, high],
          "wins": int((ours < base).sum()), "losses": int((ours > base).sum()),
          "variant_within": int((ours <= WITHIN).sum()),
          "baseline_within": int((base <= WITHIN).sum()), "per_graph": per_graph}


def markdown(summary: dict[str, Any], seeds: Sequence[int], evals: dict[str, int]) -> list[str]:
  s = summary
  lines = [f"Variant `{s['variant']}` against the default, seeds {seeds[0]}-{seeds[-1]} "
           f"({len(seeds)}), budgets of {min(evals.values()):,}-{max(evals.values()):,} "
           f"evaluations. Gap: objective / best of every run in the rows file - 1 "
           f"(lower is better); difference: variant - default, in points.", "",
           f"**{s['pairs']} pairs: mean gap {s['variant_gap_pct']:.2f}% vs "
           f"{s['baseline_gap_pct']:.2f}%, difference {s['difference_pct']:+.2f} points, 95% "
           f"interval [{s['ci95_pct'][0]:+.2f}, {s['ci95_pct'][1]:+.2f}], {s['wins']} runs "
           f"better and {s['losses']} worse; within {100 * WITHIN:g}% of the best: "
           f"{s['variant_within']} vs {s['baseline_within']}.**", ""]
  lines += report.markdown_table(
      ["graph", "variant gap %", "default gap %", "better", "worse",
       f"within {100 * WITHIN:g}% (variant / default)"],
      [[g["graph"], f"{g['variant_gap_pct']:.2f}", f"{g['baseline_gap_pct']:.2f}", g["wins"],
        g["losses"], f"{g['variant_within']} / {g['baseline_within']}"]
       for g in s["per_graph"]])
  return lines
