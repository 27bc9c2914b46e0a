"""Lower bounds on a problem's objective that hold for every placement and schedule, and what
they say about an answer: its gap and whether it is proven optimal.

Every model runs one op at a time per device, each for cost / speed (transfers only add time),
so a makespan is at least the structural bound of `regal_datasets.analysis.makespan_lower_bound`.
Under the models that track memory (`models.Model.memory`), an op's outputs and extra memory
are allocated on its device when it starts, while each tensor it reads is still there (a
tensor leaves a device only after its last use there ends), so some device's peak is at least
`memory_lower_bound`. With a memory limit, a feasible answer's objective is its makespan and an
infeasible one scores above every makespan (`Problem.duration_bound`), so the makespan bound
holds for `runtime_under_memory` too. An exact solver's proven bound (CP-SAT) can only raise
these: `lower_bound(problem, solver_bound)` takes the best.

"Proven optimal" means one thing everywhere: the answer is within `PROVEN_TOLERANCE` of a lower
bound (`meets`). Every method and model reports it so, and every search stops there (BRKGA, the
polish, CP-SAT beside the search).
"""
from __future__ import annotations

import numpy as np

from regal_datasets import analysis
from regal_datasets.graph import Graph
from regal.scoring import models

# Scores are float32 sums: one may round a hair below the real-valued bound of the schedule it
# measures. Within this relative distance the bound is taken to be met (and lowered to the score,
# which keeps it a valid bound: it only gets weaker).
ROUNDING = 1e-6
# An answer at most this far above a lower bound, relative to it, is proven optimal: MIP
# solvers' customary relative gap, above float32's rounding of a sum and CP-SAT's rounding of
# times to integers (`baselines.pipeline_cpsat`), far below any gain a search would chase.
PROVEN_TOLERANCE = 1e-4


def target(bound: float) -> float:
  """The objective at or below which an answer meets `bound` (`meets`)."""
  return float(bound) * (1.0 + PROVEN_TOLERANCE)


def meets(objective: float, bound: float) -> bool:
  """Whether an answer of `objective` is proven optimal by `bound`."""
  return float(objective) <= target(bound)


def memory_lower_bound(graph: Graph) -> float:
  """The largest memory any single op needs on its device while it starts: its outputs, its
  extra memory and the distinct tensors it reads."""
  need = np.asarray(graph.extra_memory, np.float64).copy()
  np.add.at(need, graph.tensor_producer, np.asarray(graph.tensor_size, np.float64))
  reads = np.unique(np.stack([graph.data_edge_consumer, graph.data_edge_tensor]), axis=1)
  np.add.at(need, reads[0], np.asarray(graph.tensor_size, np.float64)[reads[1]])
  return float(need.max(initial=0.0))


def structural_lower_bound(problem) -> float:
  """The best bound structure alone gives for `problem`'s objective (a `performance.Problem`)."""
  if problem.objective == "memory":
    if not models.get(problem.model).memory:
      raise ValueError(f"the {problem.model} model does not track memory")
    return memory_lower_bound(problem.graph)
  return analysis.makespan_lower_bound(problem.graph, problem.devices)


def lower_bound(problem, objective: float, solver_bound: float | None = None
                ) -> tuple[float, str]:
  """(bound, source) for an answer scoring `objective`: the structural bound ("structure"), or
  an exact solver's proven bound on the same problem where one ran and is higher ("solver");
  never above `objective` (see `ROUNDING`)."""
  bound, source = structural_lower_bound(problem), "structure"
  if solver_bound is not None and problem.objective != "memory" and solver_bound > bound:
    bound, source = float(solver_bound), "solver"
  if objective >= bound * (1 - ROUNDING):
    bound = min(bound, float(objective))
  return bound, source


def gap(objective: float, bound: float) -> float | None:
  """How far above the bound an answer may be from optimal, relative to the bound (0: proven
  optimal, `meets`; None: a zero bound under a positive objective says nothing relative)."""
  if meets(objective, bound):
    return 0.0
  return None if bound <= 0 else (objective - bound) / bound


def proven_optimal(objective: float, bound: float) -> bool:
  return meets(objective, bound)
