"""Local search (REGAL appendix A.10) and `hill_climb`: hill climbing over placements and
schedules.

Start from a random placement and the topological schedule. A move changes one op's device or
swaps two ops adjacent in the priority order. Each step scores a batch of distinct random
moves at once on the batched JAX model (the batch is the "incremental" unit: one compiled
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
from regal.scoring import performance


def _neighbours(placement: np.ndarray, rank: np.ndarray, moves: np.ndarray, num_devices: int
                ) -> tuple[np.ndarray, np.ndarray]:
  """Placements and ranks [len(moves), o] after each move: move m < o * (D - 1) puts op
  m // (D - 1) on another device, a larger one swaps the ops at ranks k and k + 1."""
  num_ops = placement.shape[0]
  placements = np.repeat(placement[None], len(moves), 0)
  ranks = np.repeat(rank[None], len(moves), 0)
  device_moves = moves < num_ops * (num_devices - 1)
  rows = np.flatnonzero(device_moves)
  ops, shift = np.divmod(moves[rows], max(num_devices - 1, 1))
  placements[rows, ops] = (placement[ops] + 1 + shift) % num_devices  # Any other device.
  rows = np.flatnonzero(~device_moves)
  position = moves[rows] - num_ops * (num_devices - 1)
  by_rank = np.argsort(rank)
  first, second = by_rank[position], by_rank[position + 1]
  ranks[rows, first], ranks[rows, second] = rank[second], rank[first]
  return placements, ranks


def hill_climb(problem: performance.Problem, evals: int = 5000, seed: int = 0,
               batch_size: int = 64) -> MethodResult:
  """Hill climbing from the best heuristic seed on the exact batched model (module doc)."""
  started = time.perf_counter()
  seeds = heuristics.assignments(problem)
  if evals < len(seeds):
    raise ValueError(f"hill_climb needs at least {len(seeds)} evaluations (its seeds), got "
                     f"{evals}")
  result = climb_from(problem, seeds, evals, seed, batch_size)
  return finish("hill_climb", problem, result.placement, np.argsort(result.rank), started,
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
  placement: np.ndarray
  rank: np.ndarray  # Priority ranks (0 runs first).
  evaluations: int  # The starts' scores included.
  accepted: int
  improved: int


def climb_from(problem: performance.Problem, starts: dict[str, tuple[np.ndarray, np.ndarray]],
               evals: int, seed: int = 0, batch_size: int = 64,
               should_stop: Callable[[], bool] = lambda: False) -> Climb:
  """Scores every start {name: (placement, op order)} and climbs from the best (the first of
  ties) with batches of distinct random moves (`_neighbours`), keeping a batch's best move
  when it does not worsen the objective, until `evals` evaluations (the starts' included) are
  spent or `should_stop()` says so between batches."""
  num_ops, num_devices = problem.graph.num_ops, problem.devices.num_devices
  num_moves = num_ops * (num_devices - 1) + max(num_ops - 1, 0)
  batch_size = max(1, min(batch_size, num_moves, evals))
  score = performance.AssignmentScorer(problem, max(batch_size, len(starts)))
  names = list(starts)
  start_ranks = [np.argsort(order) for _, order in starts.values()]
  start_values = score(np.stack([placement for placement, _ in starts.values()]),
                       np.stack(start_ranks))
  start = int(np.argmin(start_values))
  value = float(start_values[start])
  placement = np.asarray(starts[names[start]][0], np.int64)
  rank = start_ranks[start]
  rng = np.random.default_rng(seed)
  accepted = improved = 0
  while score.evaluations < evals and num_moves > 0 and not should_stop():
    take = min(batch_size, evals - score.evaluations, num_moves)
    placements, ranks = _neighbours(placement, rank, rng.choice(num_moves, take, replace=False),
                                    num_devices)
    values = score(placements, ranks)
    winner = int(np.argmin(values))
    if values[winner] <= value:
      improved += int(values[winner] < value)
      accepted += 1
      value, placement, rank = float(values[winner]), placements[winner], ranks[winner]
  return Climb(start=names[start], start_objective=float(start_values[start]),
               start_objectives={name: float(v) for name, v in zip(names, start_values)},
               objective=value, placement=placement, rank=rank,
               evaluations=score.evaluations, accepted=accepted, improved=improved)


def local_search(problem: performance.Problem, evals: int = 5000, seed: int = 0,
                 batch_size: int = 64, patience: int = 3) -> MethodResult:
  started = time.perf_counter()
  if evals < 1:
    raise ValueError(f"the budget must be at least one evaluation, got {evals}")
  graph, num_devices = problem.graph, problem.devices.num_devices
  num_ops = graph.num_ops
  rng = np.random.default_rng(seed)
  num_moves = num_ops * (num_devices - 1) + max(num_ops - 1, 0)
  batch_size = max(1, min(batch_size, num_moves, evals))
  evaluate = performance.AssignmentScorer(problem, batch_size)

  def fresh_start() -> tuple[np.ndarray, np.ndarray]:
    rank = np.empty(num_ops, np.int64)
    rank[graph.topological_order] = np.arange(num_ops)
    return rng.integers(0, num_devices, num_ops), rank

  placement, rank = fresh_start()
  value = float(evaluate(placement[None], rank[None])[0])
  restarts = 0
  best = (value, placement.copy(), rank.copy())
  failures = 0
  while evaluate.evaluations < evals and num_moves > 0:
    take = min(batch_size, evals - evaluate.evaluations)
    placements, ranks = _neighbours(placement, rank, rng.choice(num_moves, take, replace=False),
                                    num_devices)
    values = evaluate(placements, ranks)
    winner = int(np.argmin(values))
    if values[winner] < value:
      value, placement, rank = float(values[winner]), placements[winner], ranks[winner]
      failures = 0
      if value < best[0]:
        best = (value, placement.copy(), rank.copy())
      continue
    failures += 1
    if (take == num_moves or failures >= patience) and evaluate.evaluations < evals:
      placement, rank = fresh_start()
      value = float(evaluate(placement[None], rank[None])[0])
      failures, restarts = 0, restarts + 1
      if value < best[0]:
        best = (value, placement.copy(), rank.copy())
  _, placement, rank = best
  return finish("local_search", problem, placement, np.argsort(rank), started,
                evaluations=evaluate.evaluations, restarts=restarts, searched_objective=best[0])
