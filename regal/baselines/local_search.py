"""Local search (REGAL appendix A.10): hill climbing over placements and schedules.

Start from a random placement and the topological schedule. A move changes one op's device or
swaps two ops adjacent in the priority order. Each step scores a batch of distinct random
moves at once on the batched JAX model (the batch is the "incremental" unit: one compiled
call, no per-move host work) and takes the best if it improves; when a batch holds every
possible move and none improves, or `patience` batches in a row fail, the search restarts
from a new random placement. It stops when the evaluation budget (BRKGA's) is spent, every
evaluation counted, and returns the best solution seen.
"""
from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

from regal import performance
from regal.baselines.common import MethodResult, finish


def _chromosomes(placement: np.ndarray, rank: np.ndarray, num_devices: int,
                 num_tensors: int) -> np.ndarray:
  """[B, n] chromosomes of placements [B, o] and priority ranks [B, o] (0 runs first)."""
  batch, num_ops = placement.shape
  affinity = np.zeros((batch, num_ops, num_devices), np.float32)
  np.put_along_axis(affinity, placement[..., None], 1.0, axis=-1)
  priority = 1.0 - rank / max(num_ops, 1)
  transfer = np.full((batch, num_tensors * num_devices), 0.5, np.float32)
  return np.concatenate([affinity.reshape(batch, -1), priority.astype(np.float32), transfer],
                        axis=1)


def local_search(problem: performance.Problem, evals: int = 5000, seed: int = 0,
                 batch_size: int = 64, patience: int = 3) -> MethodResult:
  started = time.perf_counter()
  if evals < 1:
    raise ValueError(f"the budget must be at least one evaluation, got {evals}")
  graph, num_devices = problem.graph, problem.devices.num_devices
  num_ops = graph.num_ops
  rng = np.random.default_rng(seed)
  fitness = performance.make_fitness_fn(problem)
  num_moves = num_ops * (num_devices - 1) + max(num_ops - 1, 0)
  batch_size = max(1, min(batch_size, num_moves, evals))

  def evaluate(placements: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    rows = len(placements)  # Padded to one shape so the model compiles once.
    pad = batch_size - rows
    placements = np.concatenate([placements, np.repeat(placements[:1], pad, 0)])
    ranks = np.concatenate([ranks, np.repeat(ranks[:1], pad, 0)])
    values = fitness(jnp.asarray(_chromosomes(placements, ranks, num_devices,
                                              graph.num_tensors)))
    return np.asarray(values)[:rows]

  def fresh_start() -> tuple[np.ndarray, np.ndarray]:
    rank = np.empty(num_ops, np.int64)
    rank[graph.topological_order] = np.arange(num_ops)
    return rng.integers(0, num_devices, num_ops), rank

  placement, rank = fresh_start()
  value = float(evaluate(placement[None], rank[None])[0])
  used, restarts = 1, 0
  best = (value, placement.copy(), rank.copy())
  failures = 0
  while used < evals and num_moves > 0:
    take = min(batch_size, evals - used)
    moves = rng.choice(num_moves, size=take, replace=False)
    placements = np.repeat(placement[None], take, 0)
    ranks = np.repeat(rank[None], take, 0)
    device_moves = moves < num_ops * (num_devices - 1)
    rows = np.flatnonzero(device_moves)
    ops, shift = np.divmod(moves[rows], max(num_devices - 1, 1))
    placements[rows, ops] = (placement[ops] + 1 + shift) % num_devices  # Any other device.
    rows = np.flatnonzero(~device_moves)
    position = moves[rows] - num_ops * (num_devices - 1)
    by_rank = np.argsort(rank)
    first, second = by_rank[position], by_rank[position + 1]
    ranks[rows, first], ranks[rows, second] = rank[second], rank[first]
    values = evaluate(placements, ranks)
    used += take
    winner = int(np.argmin(values))
    if values[winner] < value:
      value, placement, rank = float(values[winner]), placements[winner], ranks[winner]
      failures = 0
      if value < best[0]:
        best = (value, placement.copy(), rank.copy())
      continue
    failures += 1
    if (take == num_moves or failures >= patience) and used < evals:
      placement, rank = fresh_start()
      value = float(evaluate(placement[None], rank[None])[0])
      used, failures, restarts = used + 1, 0, restarts + 1
      if value < best[0]:
        best = (value, placement.copy(), rank.copy())
  _, placement, rank = best
  return finish("local_search", problem, placement, np.argsort(rank), started,
                evaluations=used, restarts=restarts, searched_objective=best[0])
