"""regal_experiments.seed_spread's summary (`paired_stats.spread_summary`): the best known is the
lowest objective of any run, each default seed's gap is measured against it, and a graph passes
only if every seed is within the tolerance."""
import pytest

from regal_experiments import paired_stats


def _row(graph, kind, seed, objective, evals=1000):
  return {"graph": graph, "kind": kind, "seed": seed, "objective": objective,
          "in_units": objective / 10, "evals": evals, "seconds": 2.0, "search_seconds": 1.5}


def test_gaps_are_against_the_best_run_and_every_seed_must_pass():
  rows = [_row("a", "default", 0, 100.0), _row("a", "default", 1, 100.5),
          _row("a", "reference", 0, 99.0, 10 ** 6),
          _row("b", "default", 0, 50.0), _row("b", "default", 1, 52.0),
          _row("b", "reference", 0, 51.0, 10 ** 6)]
  a, b = paired_stats.spread_summary(rows, ["a", "b", "c"], tolerance=1.6)
  assert a["best_known"] == pytest.approx(9.9) and a["best_from"].startswith("reference seed 0")
  assert a["default_gaps_pct"] == pytest.approx([100 / 99 * 100 - 100, 100.5 / 99 * 100 - 100])
  assert a["all_within"] and a["worst_gap_pct"] == pytest.approx(100.5 / 99 * 100 - 100)
  # A default run may be the best known itself; one seed 4% off fails the graph.
  assert b["best_from"].startswith("default seed 0") and not b["all_within"]
  assert b["default_gaps_pct"] == pytest.approx([0.0, 4.0])


def test_reference_runs_count_by_their_budget_not_the_evaluations_they_spent():
  """A reference run given 1,000,000 evaluations spends a little less (whole generations):
  it is still that budget's reference, both with the recorded budget and in rows written
  before it was recorded; a reference of another budget is left out."""
  legacy = _row("a", "reference", 0, 90.0, evals=999_944)
  recorded = {**_row("a", "reference", 1, 95.0, evals=999_960), "budget": 1_000_000}
  other = {**_row("a", "reference", 2, 80.0, evals=19_944), "budget": 20_000}
  rows = [_row("a", "default", 0, 100.0), legacy, recorded, other]
  assert paired_stats.spread_key(legacy) == ("a", "reference", 0, 1_000_000)
  assert paired_stats.spread_key(rows[0]) == ("a", "default", 0, None)
  measured = paired_stats.spread_rows(rows, ["a"], [0], [0, 1], 1_000_000)
  assert measured == [rows[0], legacy, recorded]
  (a,) = paired_stats.spread_summary(measured, ["a"], tolerance=1.0)
  assert a["best_from"].startswith("reference seed 0") and a["worst_gap_pct"] == pytest.approx(
      100 / 90 * 100 - 100)


def test_a_best_known_from_an_earlier_report_stays_the_best_known():
  """An earlier report's best (in the model's units) counts when it is lower than every run
  here, with its provenance; equal or higher, this run's best stands. A best the earlier
  report itself carried keeps its first source."""
  earlier = paired_stats.earlier_bests({"date": "2026-11-26", "summary": [
      {"graph": "a", "best_known": 9.0, "best_from": "reference seed 0 (999,944 evals)"},
      {"graph": "b", "best_known": 5.0, "best_from": "default seed 1 (1,000 evals)"},
      {"graph": "c", "best_known": 7.0,
       "best_from": "earlier report of 2026-11-20: reference seed 1 (999,944 evals)"}]})
  assert earlier["a"]["from"] == "earlier report of 2026-11-26: reference seed 0 (999,944 evals)"
  assert earlier["c"]["from"] == "earlier report of 2026-11-20: reference seed 1 (999,944 evals)"
  rows = [_row("a", "default", 0, 100.0), _row("a", "reference", 0, 99.0, 10 ** 6),
          _row("b", "default", 0, 50.0), _row("b", "default", 1, 52.0),
          _row("c", "default", 0, 60.0)]
  a, b, c = paired_stats.spread_summary(rows, ["a", "b", "c"], 1.0, earlier)
  assert a["best_known"] == 9.0 and a["best_from"] == earlier["a"]["from"]
  assert a["default_gaps_pct"] == pytest.approx([100 / 90 * 100 - 100])
  assert b["best_from"].startswith("default seed 0")
  assert b["default_gaps_pct"] == pytest.approx([0.0, 4.0])
  assert c["best_known"] == 6.0 and c["best_from"].startswith("default seed 0")
  assert paired_stats.spread_summary(rows, ["a"], 1.0)[0]["best_from"].startswith("reference")


def test_split_references_count_for_their_seeds_and_name_the_split_they_started_from():
  """Split references of the report's split seeds and reference budget are measured (others
  left out), and a best known from one names the run whose group split started it."""
  split = {**_row("a", "split reference", 0, 80.0, evals=999_944), "budget": 1_000_000,
           "split_from": "reference seed 1"}
  other_seed = {**split, "seed": 5, "objective": 70.0}
  other_budget = {**split, "budget": 20_000, "objective": 60.0}
  rows = [_row("a", "default", 0, 100.0), _row("a", "reference", 1, 90.0, 10 ** 6), split,
          other_seed, other_budget]
  assert paired_stats.spread_rows(rows, ["a"], [0], [1], 1_000_000) == rows[:2]
  measured = paired_stats.spread_rows(rows, ["a"], [0], [1], 1_000_000, split_seeds=[0])
  assert measured == rows[:3]
  (a,) = paired_stats.spread_summary(measured, ["a"], tolerance=1.0)
  assert a["best_known"] == pytest.approx(8.0)
  assert a["best_from"] == ("split reference seed 0 (999,944 evals), started from the group "
                            "split of reference seed 1")
  assert a["default_gaps_pct"] == pytest.approx([25.0])


def test_the_best_known_keeps_its_placement_through_earlier_reports():
  """The summary keeps the best run's placement; an earlier report's best known that stays the
  best carries the placement that report kept (none where it kept none), so a later report's
  split references can start from it."""
  rows = [{**_row("a", "default", 0, 100.0), "placement": [0, 1, 1]},
          {**_row("a", "reference", 0, 95.0, 10 ** 6), "placement": [1, 1, 0]}]
  (first,) = paired_stats.spread_summary(rows, ["a"], 1.0)
  assert first["best_placement"] == [1, 1, 0]
  earlier = paired_stats.earlier_bests({"date": "2026-11-28", "summary": [
      {**first, "best_known": 9.0, "best_placement": [2, 2, 3]},
      {"graph": "b", "best_known": 4.0, "best_from": "default seed 0 (1,000 evals)"}]})
  assert earlier["a"]["placement"] == [2, 2, 3] and "placement" not in earlier["b"]
  rows += [{**_row("b", "default", 0, 50.0), "placement": [0, 0, 0]}]
  a, b = paired_stats.spread_summary(rows, ["a", "b"], 1.0, earlier)
  assert a["best_known"] == 9.0 and a["best_placement"] == [2, 2, 3]
  assert b["best_known"] == 4.0 and b["best_placement"] is None
  rows[2].update(objective=30.0, in_units=3.0)  # Better than the best the earlier one carried.
  assert paired_stats.spread_summary(rows, ["b"], 1.0, earlier)[0]["best_placement"] == [0, 0, 0]


def test_a_split_reference_starts_from_the_best_run_or_the_better_carried_best():
  rows = [{**_row("a", "default", 0, 100.0), "placement": [0, 1]},
          {**_row("a", "reference", 1, 90.0, 10 ** 6), "placement": [1, 0]}]
  assert paired_stats.split_source(rows) == {"placement": [1, 0], "from": "reference seed 1"}
  carried = {"in_units": 8.5, "from": "earlier report of 2026-11-28: default seed 2",
             "placement": [1, 1]}
  assert paired_stats.split_source(rows, carried) == {
      "placement": [1, 1],
      "from": "the best known carried (earlier report of 2026-11-28: default seed 2)"}
  # A carried best without its placement, or not better, leaves the best run as the source.
  assert paired_stats.split_source(rows, {**carried, "in_units": 9.0})["from"] == (
      "reference seed 1")
  assert paired_stats.split_source(rows, {k: v for k, v in carried.items()
                                          if k != "placement"})["placement"] == [1, 0]
  assert paired_stats.split_source([_row("a", "default", 0, 100.0)]) is None
