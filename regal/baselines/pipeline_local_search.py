"""Local search for pipeline max-load over any split, contiguous or not (the kind of search
Tarnawski et al. compare their DP with: restarts of single moves).

A move puts one co-location class on another device (an accelerator or the CPU side) where it
fits: the class's ops only a CPU runs keep it on the CPU side, and an accelerator holds at most
`maxSizePerFPGA` bytes. Each step scores every move at once (`pipeline.loads_batch`) and takes
the best, by the max-load and then by the sum of squared loads (so that moves off a plateau of
equal max-loads still count as progress when they relieve the other busy devices); it stops
when no move is better. Restarts begin from the best split with a few random classes moved.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from datasets.formats.profiled import CPU, Workload
from regal.scoring import pipeline


@dataclasses.dataclass(frozen=True)
class SearchedSplit:
  device: np.ndarray  # [o]
  max_load: float
  steps: int  # moves taken, all restarts together
  evaluations: int  # splits scored
  seconds: float


def _score(load: np.ndarray) -> np.ndarray:
  """[P, 2]: max-load, then the sum of squared loads (lexicographic)."""
  return np.stack([load.max(axis=1), (load ** 2).sum(axis=1)], axis=1)


def _better(a: np.ndarray, b: np.ndarray) -> bool:
  tolerance = 1e-12 * max(abs(b[0]), 1.0)
  return a[0] < b[0] - tolerance or (abs(a[0] - b[0]) <= tolerance and
                                     a[1] < b[1] - 1e-12 * max(abs(b[1]), 1.0))


def _targets(workload: Workload) -> np.ndarray:
  accelerators = np.arange(workload.max_accelerators)
  return np.append(accelerators, CPU) if workload.max_cpus else accelerators


def descend(workload: Workload, device: np.ndarray, max_steps: int = 10_000
            ) -> tuple[np.ndarray, int, int]:
  """Best-move descent from a feasible split: (split, steps, evaluations)."""
  device = np.asarray(device, np.int64).copy()
  groups = workload.group_members()
  cpu_bound = np.array([not workload.on_accelerator[m].all() for m in groups])
  memory = np.array([workload.memory[m].sum() for m in groups])
  targets = _targets(workload)
  current = _score(pipeline.loads_batch(workload, device[None]))[0]
  steps = evaluations = 0
  for steps in range(max_steps):
    held = np.array([workload.memory[device == a].sum()
                     for a in range(workload.max_accelerators)])
    moves = []
    for g, members in enumerate(groups):
      home = device[members[0]]
      for target in targets:
        if target == home or (target != CPU and (cpu_bound[g] or
                                                 held[target] + memory[g] >
                                                 workload.accelerator_memory)):
          continue
        moves.append((g, target))
    if not moves:
      break
    candidates = np.repeat(device[None], len(moves), axis=0)
    for row, (g, target) in enumerate(moves):
      candidates[row, groups[g]] = target
    scores = _score(pipeline.loads_batch(workload, candidates))
    evaluations += len(moves)
    best = int(np.lexsort((scores[:, 1], scores[:, 0]))[0])
    if not _better(scores[best], current):
      break
    device, current = candidates[best], scores[best]
  return device, steps, evaluations


def local_search(workload: Workload, start: np.ndarray, restarts: int = 50,
                 moved_fraction: float = 0.2, seed: int = 0) -> SearchedSplit:
  """Descent from `start` (a feasible split), then `restarts` descents from the best split
  with about `moved_fraction` of the classes put on random devices where they fit."""
  started = time.perf_counter()
  rng = np.random.default_rng(seed)
  groups = workload.group_members()
  cpu_bound = [not workload.on_accelerator[m].all() for m in groups]
  targets = _targets(workload)
  best, steps, evaluations = descend(workload, start)
  best_load = pipeline.max_load(workload, best)
  for _ in range(restarts):
    device = best.copy()
    for g in rng.choice(len(groups), max(1, int(moved_fraction * len(groups))), replace=False):
      if cpu_bound[g]:
        continue
      target = rng.choice(targets)
      trial = device.copy()
      trial[groups[g]] = target
      if not pipeline.violations(workload, trial):
        device = trial
    device, more_steps, more_evaluations = descend(workload, device)
    steps, evaluations = steps + more_steps, evaluations + more_evaluations
    load = pipeline.max_load(workload, device)
    if load < best_load:
      best, best_load = device, load
  return SearchedSplit(device=best, max_load=best_load, steps=steps, evaluations=evaluations,
                       seconds=time.perf_counter() - started)
