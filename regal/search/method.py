"""BRKGA as a method: the one search (`guides.run_guided`) with the seeds and steering its
guides give, CP-SAT beside it where the model is exact for it, and the polish after it; its
options are `options.BrkgaOptions` (issue 84: the app assembles the guides a run names and
calls `run`; the search's work is done here)."""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from regal import baselines
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.search import brkga_presets, brkga_search, guides, portfolio, schedule_polish
from regal.search.options import BrkgaOptions

# With a deadline the polish runs until it, not for a count (the largest budget a run takes).
UNBOUNDED_EVALS = 10 ** 9


def run(problem: performance.Problem, options: BrkgaOptions, chain: list[guides.Guide],
        evals: int, seed: int, time_limit: float | None, budget_given: bool,
        scores: performance.ReferenceScores) -> baselines.MethodResult:
  """The search steered by `chain`: every evaluation a guide spends is in the budget, and the
  seeds come back as alternatives. Without a time limit or a budget given, it stops after
  `brkga_search.DEFAULT_SEARCH_SECONDS`. `options.compare_unguided`: the same search without
  the policy runs beside it, reported in the details with its own evaluations (never the
  answer); `options.progress` hears when the search starts (from then on an interrupt keeps
  the best)."""
  brkga_preset, decoder = options.preset, options.decoder
  default_limit = time_limit is None and not budget_given
  if default_limit:
    time_limit = brkga_search.DEFAULT_SEARCH_SECONDS
  plan = guides.plan_search(problem, evals, brkga_preset, decoder)  # Resolved once.
  guides.check_budget(plan, evals, chain)  # Before the arms run.
  started = time.perf_counter()
  guided = guides.guidance(problem, seed, chain)
  guide_seconds = time.perf_counter() - started
  details = dict(guided.details)
  if options.policy_dir:
    details["guide_seconds"] = guide_seconds
  if options.compare_unguided:
    unguided = guides.run_guided(problem, evals, seed, dataclasses.replace(
        guided, mutant_alpha=None, mutant_beta=None, prior_q=None,
        seeds={name: chromosome for name, chromosome in guided.seeds.items()
               if guides.arm_of(name) != "prior"}),  # The learned prior's seed too.
        plan, time_limit)
    details["unguided"] = {"objective": float(scores(unguided.best_chromosome)[0]),
                           "evaluations": unguided.evaluations,
                           "search_seconds": unguided.search_seconds}
  params, search_settings = plan.params, plan.settings
  settings = {"brkga": {"preset": brkga_preset or brkga_presets.DEFAULT,
                        "population_size": params.population_size,
                        "num_elites": params.num_elites, "num_mutants": params.num_mutants,
                        "num_populations": params.num_populations,
                        "rho": float(np.asarray(params.rho)),
                        "decoder": search_settings.decoder, "bias": search_settings.bias,
                        "memetic": dataclasses.asdict(search_settings.memetic),
                        "time_limit": time_limit}}
  if guided.mutant_alpha is None:
    settings["brkga"].update(mutant_alpha=float(np.asarray(params.mutant_alpha)),
                             mutant_beta=float(np.asarray(params.mutant_beta)))
  arm_scores = {}
  for name, chromosome in guided.seeds.items():
    arm = guides.arm_of(name)
    arm_scores[arm] = min(arm_scores.get(arm, np.inf), float(scores(chromosome)[0]))
  details.update({"seed_arms": arm_scores, "arm_evaluations": guided.evaluations})
  alternatives = dict(guided.seeds)

  solver = None
  if options.exact_solver == "auto" and portfolio.worth_starting(problem):
    best_seed = min(guided.seeds.values(), key=lambda c: scores(c)[0])
    solver = portfolio.start(problem, best_seed, seed)
    chromosome = (solver.chromosome() if solver.proven.wait(portfolio.head_start(problem))
                  else None)
    if chromosome is not None:
      # Proven optimal before the search would even have compiled: no search to run.
      solver.finish()
      details.update(solver.details(), winner_origin=None,
                     search="skipped: the solver proved its answer optimal first")
      settings["brkga"]["stopped_early"] = True
      objective, schedule = scores(chromosome)
      placement, order = chromosome_lib.assignment(chromosome, problem.layout)
      return baselines.MethodResult(
          method="brkga", placement=placement, order=order, objective=objective,
          schedule=schedule, wall_seconds=solver.seconds, compile_seconds=0.0,
          evaluations=guided.evaluations, details=details, chromosome=chromosome,
          settings=settings, alternatives=alternatives)
  result = guides.run_guided(problem, evals, seed, guided, plan, time_limit, options.progress,
                             should_stop=solver and solver.proven.is_set)
  best_chromosome, evaluations = result.best_chromosome, result.evaluations
  wall_seconds = result.search_seconds
  if options.polish != "off" and schedule_polish.applies(problem) and not (
      solver and solver.proven.is_set()):
    polished = _polish(problem, result, seed, evals, time_limit,
                       should_stop=solver and solver.proven.is_set,
                       exact=schedule_polish.MOVE_SETS[options.polish])
    details["polish"] = {k: v for k, v in dataclasses.asdict(polished).items()
                         if k not in ("placement", "order")}
    evaluations += polished.evaluations
    wall_seconds += polished.seconds
    candidate = polished.chromosome(problem.layout)
    # The answer when the reference model scores it lower (the search's own answer aside).
    details["polish"]["answer"] = bool(scores(candidate)[0] < scores(best_chromosome)[0])
    if details["polish"]["answer"]:
      best_chromosome = candidate
  objective, schedule = scores(best_chromosome)
  settings["brkga"]["stopped_early"] = result.stopped_early
  details["stopped"] = {"reason": result.stop_reason, "evaluations": result.evaluations,
                        "budget": evals, "time_limit": time_limit,
                        "default_time_limit": default_limit}
  details["winner_origin"] = None if result.origin is None else guides.arm_of(result.origin)
  if solver is not None:
    solver.finish(best=objective)
    details.update(solver.details())
    answer = solver.chromosome()
    if answer is not None:
      alternatives["cpsat"] = answer
  placement, order = chromosome_lib.assignment(best_chromosome, problem.layout)
  return baselines.MethodResult(
      method="brkga", placement=placement, order=order, objective=objective, schedule=schedule,
      wall_seconds=wall_seconds, compile_seconds=result.compile_seconds,
      evaluations=evaluations, details=details, chromosome=best_chromosome,
      settings=settings, alternatives=alternatives)


def _polish(problem: performance.Problem, result: brkga_search.SearchResult, seed: int,
            evals: int, time_limit: float | None,
            should_stop: Callable[[], bool] | None,
            exact: schedule_polish.ExactMoves) -> schedule_polish.PolishResult:
  """The polish from the search's answer: for the search time the limit leaves
  (a run with a time limit: the default), or for the search's budget of evaluations again
  (a run with an explicit budget and no limit)."""
  placement, order = chromosome_lib.assignment(result.best_chromosome, problem.layout)
  if time_limit is None:
    return schedule_polish.polish(problem, placement, order, seed, evals=evals,
                                  should_stop=should_stop, exact=exact)
  return schedule_polish.polish(
      problem, placement, order, seed, evals=UNBOUNDED_EVALS, should_stop=should_stop,
      deadline=time.perf_counter() + max(0.0, time_limit - result.search_seconds),
      exact=exact)
