"""Statistics of runs over seeds: paired runs (the same graph and seed, with and without a
guide) for `regal_experiments.learning_table`, and one default run's seeds against the best known for
`regal_experiments.seed_spread`; kept apart from their flags so tests and other tables import them."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from regal.learning.stats import BOOTSTRAP, bootstrap_interval  # noqa: F401 (re-exported)


def first_match(result, target: float, params) -> int:
  """Evaluations the search had spent when its best first reached `target` (its budget when
  it never did), from its per-generation history (search scores: `target` is one too)."""
  reached = np.flatnonzero(np.asarray(result.history) <= target)
  if not len(reached):
    return int(result.evaluations)
  seed_spent = result.evaluations - (params.population_size * params.num_populations
                                     + (len(result.history) - 1) * params.offspring_per_generation
                                     * params.num_populations)
  return int(max(seed_spent, 0) + params.population_size * params.num_populations
             + reached[0] * params.offspring_per_generation * params.num_populations)


def summarize(rows: list[dict], best_known: np.ndarray) -> dict:
  unguided = np.array([r["unguided"] for r in rows])
  guided = np.array([r["guided"] for r in rows])
  improvement = 100 * (unguided - guided) / unguided
  low, high = bootstrap_interval(improvement, np.random.default_rng(0))
  room = np.maximum(unguided - best_known[:, None], 0.0)
  return {"mean_improvement_pct": float(improvement.mean(axis=1).mean()),
          "ci95_pct": [low, high], "win_rate": float((guided < unguided).mean()),
          "loss_rate": float((guided > unguided).mean()),
          "headroom_captured": float((unguided - guided).sum() / room.sum())
          if room.sum() > 0 else None,
          "unguided_gap_to_best_known_pct": float(np.mean(100 * room / best_known[:, None])),
          "median_guided_evals_to_match": float(np.median(
              [e for r in rows for e in r["guided_evals_to_match"]])),
          "guided_seconds": float(np.mean([s for r in rows for s in r["guided_seconds"]])),
          "unguided_seconds": float(np.mean([s for r in rows for s in r["unguided_seconds"]])),
          "pairs": int(improvement.size)}


def spread_budget(row: dict) -> int | None:
  """The budget a row's run was given (None: the default's). Rows written before `budget`
  was recorded hold only the evaluations spent, which a run keeps under its budget by less
  than a generation: rounded up to a thousand, as the reference budgets are."""
  if "budget" in row:
    return row["budget"]
  return None if row["kind"] == "default" else int(-(-row["evals"] // 1000) * 1000)


def spread_key(row: dict) -> tuple:
  """A seed-spread row's identity: (graph, kind, seed, budget)."""
  return (row["graph"], row["kind"], row["seed"], spread_budget(row))


def spread_rows(rows: list[dict], labels: list[str], seeds: list[int],
                reference_seeds: list[int], reference_evals: int,
                split_seeds: Sequence[int] = ()) -> list[dict]:
  """The rows this report measures: default runs of `seeds`, and reference runs of
  `reference_seeds` and split references of `split_seeds` with `reference_evals`, on the
  graphs named `labels`."""
  wanted = {"reference": reference_seeds, "split reference": split_seeds}
  return [r for r in rows if r["graph"] in labels and
          (r["kind"] == "default" and r["seed"] in seeds or
           r["seed"] in wanted.get(r["kind"], ()) and spread_budget(r) == reference_evals)]


def earlier_bests(earlier_report: dict) -> dict[str, dict]:
  """graph label -> {"in_units", "from"[, "placement"]}: the best known of an earlier
  seed-spread report (its JSON), with where it came from (that report's date and run, or what
  it carried) and its placement where the report kept it."""
  out = {}
  for entry in earlier_report.get("summary", []):
    source = entry["best_from"]
    if not source.startswith("earlier report"):
      source = f"earlier report of {earlier_report.get('date', '?')}: {source}"
    out[entry["graph"]] = {"in_units": float(entry["best_known"]), "from": source}
    if entry.get("best_placement") is not None:
      out[entry["graph"]]["placement"] = [int(d) for d in entry["best_placement"]]
  return out


def split_source(rows: list[dict], carried: dict | None = None) -> dict | None:
  """{"placement", "from"}: where a split reference starts, the best of `rows` (one graph's
  measured runs), or the best known an earlier report carried (`earlier_bests`' entry) where
  that is better and kept its placement; None if the best row has no placement (rows written
  before placements were kept)."""
  best = min(rows, key=lambda r: r["in_units"])
  if carried and "placement" in carried and carried["in_units"] < best["in_units"] * (1 - 1e-9):
    return {"placement": carried["placement"],
            "from": f"the best known carried ({carried['from']})"}
  if "placement" not in best:
    return None
  return {"placement": best["placement"], "from": f"{best['kind']} seed {best['seed']}"}


def spread_summary(rows: list[dict], labels: list[str], tolerance: float,
                   earlier: dict[str, dict] | None = None) -> list[dict]:
  """Per graph label (in order; labels without default runs left out): the best known (the
  lowest objective of any row, default or reference, or of `earlier` bests: `earlier_bests`,
  whose value in the model's units this run's rows convert) with its placement where known
  (`best_placement`, else None), each default seed's gap to it in %, the worst, and whether
  every seed is within `tolerance` %."""
  out = []
  for label in labels:
    mine = [r for r in rows if r["graph"] == label]
    if not any(r["kind"] == "default" for r in mine):
      continue
    best = min(mine, key=lambda r: r["objective"])
    best_from = f"{best['kind']} seed {best['seed']} ({best['evals']:,} evals)"
    if "split_from" in best:
      best_from += f", started from the group split of {best['split_from']}"
    if earlier and label in earlier:
      # Objectives and the model's units differ by a fixed factor (`Model.in_units`).
      objective = earlier[label]["in_units"] * best["objective"] / best["in_units"]
      if objective < best["objective"] * (1.0 - 1e-9):  # Not the same value re-read.
        best = {"objective": objective, "in_units": earlier[label]["in_units"],
                "placement": earlier[label].get("placement")}
        best_from = earlier[label]["from"]
    defaults = sorted((r for r in mine if r["kind"] == "default"), key=lambda r: r["seed"])
    gaps = [100.0 * (r["objective"] / best["objective"] - 1.0) for r in defaults]
    out.append({"graph": label, "best_known": best["in_units"], "best_from": best_from,
                "best_placement": best.get("placement"),
                "default_gaps_pct": gaps, "worst_gap_pct": max(gaps),
                "all_within": max(gaps) <= tolerance,
                "default_seconds": float(np.mean([r["seconds"] for r in defaults])),
                "default_search_seconds": float(np.mean([r["search_seconds"] for r in defaults]))})
  return out
