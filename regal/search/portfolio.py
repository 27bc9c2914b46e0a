"""The exact solver beside the search: CP-SAT (`baselines.exact`) on one core while BRKGA runs
on the rest, where the model is the one CP-SAT writes down exactly (the delay model,
objective runtime) and the graph is small enough for it to matter.

The solver starts from the best heuristic seed (its hint); its answer joins the search's
candidates and its proven bound becomes the result's lower bound. On small graphs it runs alone
for a head start, and a proof within it makes the search unnecessary; a later proof stops the
search at its next generation; when the search's best meets the structural
bound first, the solver is stopped. CP-SAT releases the GIL while it solves, so the two share
the process without waiting on each other.
"""
from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from regal.baselines import exact
from regal.scoring import bounds, models, performance
from regal.scoring import chromosome as chromosome_lib

# The thresholds, read off `regal_experiments.portfolio_thresholds` (synthetic training graphs of
# 10-200 ops, 2 and 4 devices, communication 0-10x computation; its committed report): within
# 5 s the solver proved optimal 16/16 graphs of 10-20 ops, 4/8 of 30 and 2/8 of 50 (its answer
# beating the search's on 10 of the 40 graphs up to 50 ops), none of 100 or 200 ops, where its
# answer lost to the search's on 14 of 16 (the report of 2026-11-27; 15 of 16 before the
# default budget was re-sized).
MAX_OPS = 64
# The solver's limit: it stops sooner on a proof, and is stopped once the search meets the
# structural bound.
SECONDS = 5.0
# How long the solver runs alone before the search starts, on graphs up to HEAD_START_MAX_OPS
# ops: a proof within it makes the search (seconds of compiling per size bucket) unnecessary.
# It pays where proofs come that fast often enough: 15/16 training graphs of 10-20 ops, 2/8 of
# 30, 0/8 of 50.
HEAD_START = 1.0
HEAD_START_MAX_OPS = 40


def model_allows(model: str, objective: str) -> bool:
  """Whether CP-SAT's model is the problem's: the delay model's makespan."""
  return models.get(model).exact_solver and objective == "runtime"


def worth_starting(problem: performance.Problem) -> bool:
  """Whether the default run starts the solver beside the search on `problem`."""
  return (model_allows(problem.model, problem.objective) and problem.devices.num_devices > 1
          and problem.graph.num_ops <= MAX_OPS)


@dataclasses.dataclass
class SolverRun:
  """CP-SAT solving `problem` on a thread: `proven` is set once it has proven its answer
  optimal; `finish` waits for it (stopping it first when `best` meets the structural bound)."""
  problem: performance.Problem
  hint: tuple[np.ndarray, np.ndarray]  # (placement, order) CP-SAT starts from
  seed: int
  time_limit: float
  proven: threading.Event = dataclasses.field(default_factory=threading.Event)
  answer: tuple[np.ndarray, np.ndarray, dict] | None = None
  error: BaseException | None = None
  seconds: float = 0.0

  def __post_init__(self):
    from ortools.sat.python import cp_model  # Only the solver needs OR-Tools.
    self.solver = cp_model.CpSolver()
    self.thread = threading.Thread(target=self._solve, daemon=True, name="cpsat")

  def _solve(self) -> None:
    started = time.perf_counter()
    try:
      self.answer = exact.solve_graph(self.problem, self.time_limit, workers=1, seed=self.seed,
                                      hint=self.hint, solver=self.solver)
      if self.answer[2]["status"] == "OPTIMAL":
        self.proven.set()
    except BaseException as error:  # pylint: disable=broad-except  # Re-raised by `finish`.
      self.error = error
    self.seconds = time.perf_counter() - started

  def finish(self, best: float | None = None) -> None:
    """Waits for the solver; stops it first when `best` already meets the structural bound
    (asked until it ends: a stop asked before its search starts would be lost). SIGINT and
    SIGTERM stop it through `cpsat_solve`, as they stop every CP-SAT run."""
    met = best is not None and bounds.meets(best, bounds.structural_lower_bound(self.problem))
    while self.thread.is_alive():
      if met:
        self.solver.StopSearch()
      self.thread.join(0.01)
    if self.error is not None:
      raise self.error

  def chromosome(self) -> np.ndarray | None:
    """The solver's answer as a chromosome (None: it found none within its limit)."""
    if self.answer is None or "placement" not in self.answer[2]:
      return None
    placement, order, _ = self.answer
    return chromosome_lib.encode(placement, order, self.problem.layout)

  def details(self) -> dict:
    """The result's details: `solver` (status, bound, seconds, limit), and the proven
    `lower_bound` with its `status` where the solver gave one (with or without an answer)."""
    solution = self.answer[2] if self.answer else {}
    facts = {"solver": {"status": solution.get("status"),
                        "lower_bound": solution.get("lower_bound"),
                        "seconds": self.seconds, "time_limit": self.time_limit}}
    if solution.get("lower_bound") is not None:
      facts.update(lower_bound=solution["lower_bound"], status=solution["status"])
    return facts


def head_start(problem: performance.Problem) -> float:
  """Seconds the solver runs alone before the search starts on `problem`."""
  return HEAD_START if problem.graph.num_ops <= HEAD_START_MAX_OPS else 0.0


def start(problem: performance.Problem, hint_chromosome: np.ndarray, seed: int,
          time_limit: float = SECONDS) -> SolverRun:
  """The solver on a thread, hinted with a chromosome's placement and order."""
  run = SolverRun(problem, chromosome_lib.assignment(hint_chromosome, problem.layout), seed,
                  time_limit)
  run.thread.start()
  return run
