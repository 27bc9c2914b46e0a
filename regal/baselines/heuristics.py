"""The cheap constructive heuristics (milliseconds each), listed once: the seeds of BRKGA's
first population (`regal.search.guides.HeuristicSeeds`), the starts of the hill climb
(`local_search.hill_climb`) and the assignments the policy's features are read from."""
from __future__ import annotations

import numpy as np

from regal_datasets import errors
from regal.baselines import list_scheduling, partition
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance

HEURISTICS = ("single_device", "critical_path", "critical_path_doppler", "heft", "gp_dfs")


def assignments(problem: performance.Problem, names: tuple[str, ...] = HEURISTICS
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """{name: (placement [o], op order [o])} of the named heuristics, in `names`' order."""
  unknown = [name for name in names if name not in HEURISTICS]
  if unknown:
    raise errors.ConfigError(f"unknown heuristic(s) {unknown}; known: {', '.join(HEURISTICS)}")
  graph, devices = problem.graph, problem.devices
  result = {}
  for name in names:
    if name == "single_device":
      result[name] = (np.zeros(graph.num_ops, np.int64), graph.topological_order)
    elif name == "heft":
      result[name] = list_scheduling.heft_assignment(graph, devices)
    elif name in ("critical_path", "critical_path_doppler"):
      result[name] = list_scheduling.critical_path_assignment(
          graph, devices, doppler_repository=name == "critical_path_doppler")
    else:
      gp = partition.gp_dfs(problem)
      result[name] = (gp.placement, gp.order)
  return result


def seeds(problem: performance.Problem, names: tuple[str, ...] = HEURISTICS
          ) -> dict[str, np.ndarray]:
  """{name: chromosome} of the named heuristics (`chromosome.encode`)."""
  return {name: chromosome_lib.encode(placement, order, problem.layout)
          for name, (placement, order) in assignments(problem, names).items()}
