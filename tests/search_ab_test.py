"""`regal_experiments.search_ab_lib` (`regal_experiments.search_ab`): the variant arm changes only the
settings it names, bad settings fail before any run, and the paired summary matches a plain
reference."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import devices as devices_lib
from regal_datasets import errors, sharded
from regal_experiments import search_ab_lib
from regal.scoring import performance
from regal.search import brkga_presets


@pytest.fixture(scope="module")
def problem():
  return performance.Problem(sharded.generate("ffnn", 4, flops_per_byte=300.0),
                             devices_lib.homogeneous(4), model="wc")


def test_parse_variant_types_each_setting_and_refuses_unknown_or_repeated_keys():
  assert search_ab_lib.parse_variant(["relabel_fraction=0.1", "climbers=4", "decoder=list",
                                  "population_size=40", "rho=0.6"]) == {
      "relabel_fraction": 0.1, "climbers": 4, "decoder": "list", "population_size": 40,
      "rho": 0.6}
  for bad in (["no_such=1"], ["climbers"], ["climbers="], ["climbers=1.5"],
              ["accept_worse=1e-3", "accept_worse=0"]):
    with pytest.raises(errors.ConfigError):
      search_ab_lib.parse_variant(bad)


def test_the_variant_arm_differs_from_the_default_only_in_what_it_names(problem):
  evals = 20_000
  params, settings = search_ab_lib.arm_settings(problem, evals, {})
  default_settings = brkga_presets.search_settings(brkga_presets.DEFAULT, model="wc")
  assert settings == default_settings
  changed_params, changed = search_ab_lib.arm_settings(
      problem, evals, {"relabel_fraction": 0.1, "population_size": 40, "restart_patience": 7,
                        "num_populations": 2})
  assert changed == dataclasses.replace(
      default_settings, memetic=dataclasses.replace(default_settings.memetic,
                                                    relabel_fraction=0.1))
  assert (changed_params.population_size, changed_params.num_elites,
          changed_params.num_mutants, changed_params.restart_patience,
          changed_params.num_populations) == (40, 8, 6, 7, 2)
  assert changed_params.replace(population_size=params.population_size,
                                num_elites=params.num_elites, num_mutants=params.num_mutants,
                                restart_patience=params.restart_patience,
                                num_populations=params.num_populations) == params
  fractions, _ = search_ab_lib.arm_settings(
      problem, evals, {"mutant_fraction": 0.3, "elite_fraction": 0.1, "rho": 0.6})
  assert (fractions.num_elites, fractions.num_mutants, fractions.rho) == (
      int(0.1 * params.population_size), int(0.3 * params.population_size), 0.6)
  assert fractions.replace(num_elites=params.num_elites, num_mutants=params.num_mutants,
                           rho=params.rho) == params
  for bad in ({"relabel_fraction": 2.0}, {"population_size": 1}, {"decoder": "nonsense"},
              {"num_populations": 0}, {"rho": 1.0}, {"elite_fraction": 0.0},
              {"mutant_fraction": 0.9}):
    with pytest.raises(errors.ConfigError):
      search_ab_lib.arm_settings(problem, evals, bad)
  with pytest.raises(errors.ConfigError, match="unknown search settings bogus"):
    brkga_presets.search_settings(brkga_presets.DEFAULT, model="wc", overrides={"bogus": 1})


def test_parse_seeds_reads_ranges_and_lists():
  assert search_ab_lib.parse_seeds("20-23") == [20, 21, 22, 23]
  assert search_ab_lib.parse_seeds("3,1,4") == [3, 1, 4]
  for bad in ("", "a-b", "5-2", "-1"):
    with pytest.raises(errors.ConfigError):
      search_ab_lib.parse_seeds(bad)


def _reference_summary(rows, variant, seeds, labels):
  """Plain loops over the rows: gaps to each graph's best row, then pair by pair."""
  best = {}
  for row in rows:
    if row["graph"] not in best or row["objective"] < best[row["graph"]]:
      best[row["graph"]] = row["objective"]
  pairs = []
  for label in labels:
    for seed in seeds:
      mine = [r["objective"] for r in rows
              if (r["graph"], r["arm"], r["seed"]) == (label, variant, seed)][0]
      theirs = [r["objective"] for r in rows
                if (r["graph"], r["arm"], r["seed"]) == (label, "default", seed)][0]
      pairs.append((mine / best[label] - 1, theirs / best[label] - 1))
  return {"pairs": len(pairs),
          "variant_gap_pct": 100 * sum(p[0] for p in pairs) / len(pairs),
          "baseline_gap_pct": 100 * sum(p[1] for p in pairs) / len(pairs),
          "wins": sum(p[0] < p[1] for p in pairs), "losses": sum(p[0] > p[1] for p in pairs),
          "variant_within": sum(p[0] <= 0.01 for p in pairs),
          "baseline_within": sum(p[1] <= 0.01 for p in pairs)}


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(0, 2 ** 31 - 1))
def test_summary_matches_a_plain_reference(num_graphs, num_seeds, seed):
  rng = np.random.default_rng(seed)
  labels, seeds = [f"g{i}" for i in range(num_graphs)], list(range(10, 10 + num_seeds))
  arms = ["default", "x=1", "other=2"]  # A third arm's rows move the best known only.
  # Objectives on a coarse grid, so ties and runs exactly 1% above the best both occur.
  rows = [{"graph": g, "arm": a, "seed": s, "objective": float(100 + rng.integers(0, 4))}
          for g in labels for a in arms for s in seeds]
  got = search_ab_lib.summarize(rows, "x=1", seeds, labels)
  want = _reference_summary(rows, "x=1", seeds, labels)
  for key, value in want.items():
    assert got[key] == pytest.approx(value, abs=1e-9), key
  assert got["difference_pct"] == pytest.approx(
      want["variant_gap_pct"] - want["baseline_gap_pct"], abs=1e-9)
  low, high = got["ci95_pct"]
  assert low <= got["difference_pct"] + 1e-9 and got["difference_pct"] <= high + 1e-9
  assert sum(g["wins"] for g in got["per_graph"]) == want["wins"]
