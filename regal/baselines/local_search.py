"""Local search (REGAL appendix A.10) and `hill_climb`: hill climbing over placements and
schedules.

Start from a random placement and the topological schedule. A move changes one op's device or
swaps two ops adjacent in the priority order (`regal.scoring.moves`, the moves the memetic
search makes, numbered so a batch draws distinct ones). Each step scores a batch of distinct
random moves at once on the exact batched model (the batch is the "incremental" unit: one compiled
call, no per-move host work) and takes the best if it improves; when a batch holds every
possible move and none improves, or `patience` batches in a row fail, the search restarts
from a new random placement. It stops when the evaluation budget (BRKGA's) is spent, every
evaluation counted, and returns the best solution seen.

`hill_climb` is the strongest simple baseline: it starts from the best of the cheap heuristics
(critical path as we code it and as the Doppler repository does, HEFT, GP + DFS, one device:
BRKGA's default seeds; each scored, every score counted) and climbs on the
problem's exact batched model with the same moves, keeping the best move of each batch when it
does not worsen the objective (so it walks plateaus), until the budget is spent. Its details
name the seed it started from and that seed's objective beside what the climb reached.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np

from regal.baselines import heuristics
from regal.baselines.common import MethodResult, finish
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import moves as moves_lib
from regal.scoring import performance


def _neighbours(chromosome: np.ndarray, layout: chromosome_lib.Layout, rng: np.random.Generator,
                take: int) -> np.ndarray:
  """`take` distinct random single-op moves of `chromosome`, applied: [take, n]."""
  moves = rng.choice(moves_lib.single_op_moves(layout), take, replace=False)
  return moves_lib.apply_moves(chromosome, moves_lib.enumerated_move_genes(chromosome, layout,
                                                                          moves))


def hill_climb(problem: performance.Problem, evals: int = 5000, seed: int = 0,
               batch_size: int = 64) -> MethodResult:
  """Hill climbing from the best heuristic seed on the exact batched model (module doc)."""
  started = time.perf_counter()
  seeds = heuristics.seeds(problem)
  if evals < len(seeds):
    raise ValueError(f"hill_climb needs at least {len(seeds)} evaluations (its seeds), got "
                     f"{evals}")
  result = climb_from(problem, seeds, evals, seed, batch_size)
  return finish("hill_climb", problem, *result.assignment(problem.layout), started,
                evaluations=result.evaluations, start_seed=result.start,
                seed_objective=result.start_objective, searched_objective=result.objective,
                accepted_moves=result.accepted, improving_moves=result.improved)


@dataclasses.dataclass(frozen=True)
class Climb:
  """Where a climb started (the best start's name and objective) and what it reached."""
  start: str
  start_objective: float
  start_objectives: dict[str, float]  # Every start's.
  objective: float
  chromosome: np.ndarray  # [n] float32, the direct decoder's.
  evaluations: int  # The starts' scores included.
  accepted: int
  improved: int

  def assignment(self, layout: chromosome_lib.Layout) -> tuple[np.ndarray, np.ndarray]:
    """(placement, op order) of the answer."""
    return chromosome_lib.assignment(self.chromosome, layout)


def climb_from(problem: performance.Problem, starts: dict[str, np.ndarray], evals: int,
               seed: int = 0, batch_size: int = 64,
               should_stop: Callable[[], bool] = lambda: False) -> Climb:
  """Scores every start {name: chromosome} and climbs from the best (the first of ties) with
  batches of distinct random single-op moves (`_neighbours`), keeping a batch's best move
  when it does not worsen the objective, until `evals` evaluations (the starts' included) are
  spent or `should_stop()` says so between batches."""
  layout = problem.layout
  num_moves = moves_lib.single_op_moves(layout)
  batch_size = max(1, min(batch_size, num_moves, evals))
  score = performance.ChromosomeScorer(problem, max(batch_size, len(starts)))
  names = list(starts)
  start_values = score(np.stack([starts[name] for name in names]))
  start = int(np.argmin(start_values))
  value = float(start_values[start])
  chromosome = np.asarray(starts[names[start]], np.float32)
  rng = np.random.default_rng(seed)
  accepted = improved = 0
  while score.evaluations < evals and num_moves > 0 and not should_stop():
    take = min(batch_size, evals - score.evaluations, num_moves)
    neighbours = _neighbours(chromosome, layout, rng, take)
    values = score(neighbours)
    winner = int(np.argmin(values))
    if values[winner] <= value:
      improved += int(values[winner] < value)
      accepted += 1
      value, chromosome = float(values[winner]), neighbours[winner]
  return Climb(start=names[start], start_objective=float(start_values[start]),
               start_objectives={name: float(v) for name, v in zip(names, start_values)},
               objective=value, chromosome=chromosome, evaluations=score.evaluations,
               accepted=accepted, improved=improved)


def local_search(problem: performance.Problem, evals: int = 5000, seed: int = 0,
                 batch_size: int = 64, patience: int = 3) -> MethodResult:
  started = time.perf_counter()
  if evals < 1:
    raise ValueError(f"the budget must be at least one evaluation, got {evals}")
  graph, layout = problem.graph, problem.layout
  rng = np.random.default_rng(seed)
  num_moves = moves_lib.single_op_moves(layout)
  batch_size = max(1, min(batch_size, num_moves, evals))
  evaluate = performance.ChromosomeScorer(problem, batch_size)

  def fresh_start() -> np.ndarray:
    placement = rng.integers(0, layout.num_devices, layout.num_ops)
    return chromosome_lib.encode(placement, graph.topological_order, layout).astype(np.float32)

  chromosome = fresh_start()
  value = float(evaluate(chromosome[None])[0])
  restarts = 0
  best = (value, chromosome)
  failures = 0
  while evaluate.evaluations < evals and num_moves > 0:
    take = min(batch_size, evals - evaluate.evaluations)
    neighbours = _neighbours(chromosome, layout, rng, take)
    values = evaluate(neighbours)
    winner = int(np.argmin(values))
    if values[winner] < value:
      value, chromosome = float(values[winner]), neighbours[winner]
      failures = 0
      if value < best[0]:
        best = (value, chromosome)
      continue
    failures += 1
    if (take == num_moves or failures >= patience) and evaluate.evaluations < evals:
      chromosome = fresh_start()
      value = float(evaluate(chromosome[None])[0])
      failures, restarts = 0, restarts + 1
      if value < best[0]:
        best = (value, chromosome)
  placement, order = chromosome_lib.assignment(best[1], layout)
  return finish("local_search", problem, placement, order, started,
                evaluations=evaluate.evaluations, restarts=restarts, searched_objective=best[0])
