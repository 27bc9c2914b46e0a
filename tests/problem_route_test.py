"""The search asks the scoring layer about a problem once (issue 71): following the problem
through a default BRKGA run (`regal_experiments.problem_route`) climbs back up from scoring at most
five times, and the counting itself is checked on a route written by hand."""
from regal_experiments import problem_route_lib


def test_the_route_figures_count_climbs_and_crossings():
  stops = [("regal.app.methods", "_run_brkga"), ("regal.search.guides", "plan_search"),
           ("regal.scoring.performance", "of"), ("regal.scoring.models", "get"),
           ("regal.search.guides", "check_budget"), ("regal.baselines.heuristics", "seeds"),
           ("regal.scoring.performance", "score_reference"),
           ("regal.search.brkga_search", "optimize"), ("numpy", "ignored")]
  figures = problem_route_lib.route_figures(stops)
  assert figures["stops"] == 8 and figures["modules"] == 6
  # Up from scoring to search twice (check_budget, optimize); search -> baselines is down.
  assert figures["climbs"] == 2
  assert (figures["search_to_scoring"], figures["scoring_to_search"]) == (1, 2)
  assert figures["route"][2] == "regal.scoring: of, get"


def test_a_default_search_asks_scoring_about_its_problem_at_most_five_times():
  figures = problem_route_lib.route_figures(problem_route_lib.trace(ops=12, evals=400))
  assert figures["stops"] > 10
  assert figures["climbs"] <= 5, figures["route"]
