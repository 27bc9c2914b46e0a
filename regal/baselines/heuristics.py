"""The cheap constructive heuristics (milliseconds each), listed once: the seeds of BRKGA's
first population (`regal.search.guides.HeuristicSeeds`), the starts of the hill climb
(`local_search.hill_climb`) and the assignments the policy's features are read from."""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from regal.baselines import list_scheduling, partition, registries
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance

# The built-in heuristics (a test may register more: `register`), in the order the policy's
# features read them.
HEURISTICS = registries.HEURISTICS.names()
Assign = Callable[[performance.Problem], tuple[np.ndarray, np.ndarray]]


@dataclasses.dataclass(frozen=True)
class Heuristic:
  """One heuristic: `assign(problem)` -> (placement [o], op order [o]), in milliseconds."""
  name: str
  assign: Assign


def register(heuristic: Heuristic) -> Heuristic:
  """Adds a heuristic: a seed arm of BRKGA (`--seed_arms NAME`) from then on."""
  return registries.HEURISTICS.register(heuristic)


def _single_device(problem: performance.Problem) -> tuple[np.ndarray, np.ndarray]:
  return np.zeros(problem.graph.num_ops, np.int64), problem.graph.topological_order


def _critical_path(doppler_repository: bool) -> Assign:
  return lambda problem: list_scheduling.critical_path_assignment(
      problem.graph, problem.devices, doppler_repository=doppler_repository)


def _gp_dfs(problem: performance.Problem) -> tuple[np.ndarray, np.ndarray]:
  found = partition.gp_dfs(problem)
  return found.placement, found.order


for _record in (Heuristic("single_device", _single_device),
                Heuristic("critical_path", _critical_path(False)),
                Heuristic("critical_path_doppler", _critical_path(True)),
                Heuristic("heft", lambda problem: list_scheduling.heft_assignment(
                    problem.graph, problem.devices)),
                Heuristic("gp_dfs", _gp_dfs)):
  register(_record)


def assignments(problem: performance.Problem, names: tuple[str, ...] = HEURISTICS
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """{name: (placement [o], op order [o])} of the named heuristics, in `names`' order."""
  found = [registries.HEURISTICS.get(name) for name in names]  # Unknown: one line, first.
  return {record.name: record.assign(problem) for record in found}


def seeds(problem: performance.Problem, names: tuple[str, ...] = HEURISTICS
          ) -> dict[str, np.ndarray]:
  """{name: chromosome} of the named heuristics (`chromosome.encode`)."""
  return {name: chromosome_lib.encode(placement, order, problem.layout)
          for name, (placement, order) in assignments(problem, names).items()}
