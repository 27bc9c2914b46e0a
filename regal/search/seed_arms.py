"""Seeding arms: heuristics and policies whose assignments enter BRKGA's first population.

`--seed_arms single_device,critical_path,critical_path_doppler,heft,gp_dfs,doppler` names them
(default: every cheap heuristic, all but doppler). Each arm gives one
or more (placement, order) assignments, encoded as chromosomes (one-hot-like affinities,
priorities from the order: `chromosome.encode`); Doppler gives the best assignment its
training saw, its greedy one and K sampled ones. The engine's lineage tracking then says which
arm the winner descends from (`SearchResult.origin`, mapped back with `arm_of`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from datasets import errors
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance

ARMS = ("single_device", "critical_path", "critical_path_doppler", "heft", "gp_dfs", "doppler")
# Every heuristic that runs in milliseconds (Doppler's policy trains: opt in).
DEFAULT_ARMS = ("single_device", "critical_path", "critical_path_doppler", "heft", "gp_dfs")
MAX_DOPPLER_SAMPLES = 1024  # Sampled assignments beyond a few populations' worth only cost.


@dataclasses.dataclass(frozen=True)
class DopplerArm:
  """How the Doppler arm gets its policy: a checkpoint, else training with `evals` episodes."""
  checkpoint: str | None = None
  evals: int = 1024
  samples: int = 8


def parse_arms(spec: str) -> tuple[str, ...]:
  arms = tuple(a.strip() for a in spec.split(",") if a.strip())
  unknown = [a for a in arms if a not in ARMS]
  if unknown or not arms:
    raise errors.ConfigError(f"unknown seed arm(s) {unknown or spec!r}; known: {', '.join(ARMS)}")
  return arms


def arm_of(seed_name: str) -> str:
  """The arm a seed chromosome's name belongs to ('doppler/greedy' -> 'doppler')."""
  return seed_name.split("/")[0]


def planned_evaluations(arms: tuple[str, ...], doppler: DopplerArm | None = None) -> int:
  """The performance-model evaluations `arm_seeds` will spend (known before they run)."""
  if "doppler" not in arms:
    return 0
  from regal.doppler_policy import method as doppler_method
  return doppler_method.planned_evaluations((doppler or DopplerArm()).evals)


def arm_seeds(problem: performance.Problem, arms: tuple[str, ...],
              doppler: DopplerArm | None = None, seed: int = 0
              ) -> tuple[dict[str, np.ndarray], int]:
  """({seed name: chromosome}, performance-model evaluations the arms spent)."""
  from regal import search
  from regal.baselines import list_scheduling, partition  # Baselines import this package.
  layout = problem.layout
  seeds, spent = {}, 0
  for arm in arms:
    if arm == "single_device":
      seeds[arm] = search.single_device_seed(problem)
    elif arm in ("critical_path", "critical_path_doppler", "heft"):
      if arm == "heft":
        placement, order = list_scheduling.heft_assignment(problem.graph, problem.devices)
      else:
        placement, order = list_scheduling.critical_path_assignment(
            problem.graph, problem.devices, doppler_repository=arm == "critical_path_doppler")
      seeds[arm] = chromosome_lib.encode(placement, order, layout)
    elif arm == "gp_dfs":
      seeds[arm] = partition.gp_dfs(problem).chromosome
    elif arm == "doppler":
      from regal.doppler_policy import method as doppler_method
      options = doppler or DopplerArm()
      assignments, spent_here = doppler_method.seed_assignments(
          problem, options.checkpoint, options.evals, options.samples, seed)
      spent += spent_here
      names = ["doppler/best", "doppler/greedy"] + [f"doppler/sample{k}"
                                                    for k in range(options.samples)]
      for name, (placement, order) in zip(names, assignments):
        seeds[name] = chromosome_lib.encode(placement, order, layout)
  return seeds, spent
