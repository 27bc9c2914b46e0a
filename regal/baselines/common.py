"""What every placement method returns, and the one scoring path they all share.

A method produces a placement and an op order (first runs first when ready); `finish` encodes
them as a chromosome (`regal.scoring.chromosome.encode`) and scores it with the problem's reference
model (`regal.scoring.performance.score_reference`), so every method's objective comes from the same
code as BRKGA's re-scored winner and can be compared with it directly.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.schedule import Schedule


@dataclasses.dataclass(frozen=True)
class MethodResult:
  """A placement method's answer, scored by the problem's reference model.

  Attributes:
    method: the method's registry name.
    placement: [o] device of each op.
    order: [o] ops by priority (first runs first when ready).
    objective: the problem's objective of (placement, order) under its reference model.
    schedule: that model's timed schedule.
    wall_seconds: the method's own time, scoring included.
    evaluations: performance-model evaluations the method spent (0 for constructive ones).
    details: method-specific facts (e.g. CP-SAT's lower bound), JSON-compatible.
    chromosome: the random keys that were scored (decode to placement and order; searches
      also carry their transfer priorities).
    compile_seconds: time spent compiling before the method ran (BRKGA's search).
    settings: the method's parameters as results report them (JSON-compatible).
    alternatives: other chromosomes the method produced (its seeds), by name; a caller that
      must never return worse than a seed scores them too and may prefer one.
  """
  method: str
  placement: np.ndarray
  order: np.ndarray
  objective: float
  schedule: Schedule
  wall_seconds: float
  evaluations: int = 0
  details: dict[str, Any] = dataclasses.field(default_factory=dict)
  chromosome: np.ndarray | None = None
  compile_seconds: float = 0.0
  settings: dict[str, Any] = dataclasses.field(default_factory=dict)
  alternatives: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


def score(problem: performance.Problem, placement: np.ndarray,
          order: np.ndarray) -> tuple[float, Schedule]:
  """The objective and schedule of a placement and op order under the reference model."""
  chromosome = chromosome_lib.encode(np.asarray(placement), np.asarray(order), problem.layout)
  return performance.score_reference(problem, chromosome)


def finish(method: str, problem: performance.Problem, placement: np.ndarray | None,
           order: np.ndarray | None, started: float, evaluations: int = 0,
           chromosome: np.ndarray | None = None,
           scored: tuple[float, Schedule] | None = None, **details: Any) -> MethodResult:
  """Scores a method's answer and wraps it; `started` is the method's perf_counter start.

  Give either (placement, order) or a chromosome (then placement and order are decoded).
  `scored`: the answer's (objective, schedule) when the method already has them from
  `score`, so the reference model runs once per candidate."""
  if chromosome is None:
    chromosome = chromosome_lib.encode(np.asarray(placement), np.asarray(order), problem.layout)
  chromosome = np.asarray(chromosome, np.float32)
  placement, order = chromosome_lib.assignment(chromosome, problem.layout)
  objective, schedule = scored or performance.score_reference(problem, chromosome)
  return MethodResult(method=method, placement=placement, order=order, objective=objective,
                      schedule=schedule, wall_seconds=time.perf_counter() - started,
                      evaluations=evaluations, details=details, chromosome=chromosome)
