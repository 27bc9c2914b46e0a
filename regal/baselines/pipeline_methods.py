"""The methods that split a profiled workload (`regal_datasets.formats.profiled.Workload`) over its
accelerators and CPU side: each is `(workload, SplitConfig, deadline) -> (device [o], details)`,
registered by name in `regal.app.methods` beside the schedule methods (`Method.split`), and run
by `regal.app.pipeline_lib.run`, which scores and checks what it returns.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from regal_datasets import cli, errors
from regal_datasets.formats.profiled import CPU, Workload
from regal.baselines import pipeline_cpsat, pipeline_dp, pipeline_linear, pipeline_local_search
from regal.scoring import models
from regal.scoring.throughput import reference as pipeline

# --objective throughput and --model blocks: the model registry's split models, by the name
# the result JSON gives the objective.
OBJECTIVES = {"throughput": models.get_split("throughput"), "latency": models.get_split("blocks")}


@dataclasses.dataclass(frozen=True)
class SplitConfig:
  method: str = "search"
  objective: str = "throughput"  # or "latency"
  evals: int | None = None
  seed: int = 0
  time_limit: float | None = None

  def budget(self, workload: Workload) -> int:
    """The search's moves: --evals, else the objective's default for this workload."""
    return OBJECTIVES[self.objective].budget(workload) if self.evals is None else self.evals

  @property
  def max_rounds(self) -> int | None:
    """The default budget's cap on rounds; --evals has none."""
    return OBJECTIVES[self.objective].default_rounds if self.evals is None else None


def one_accelerator_split(workload: Workload) -> np.ndarray:
  """Every class an accelerator runs on accelerator 0, the rest on the CPU side."""
  device = np.zeros(workload.num_ops, np.int64)
  for members in workload.group_members():
    if not workload.on_accelerator[members].all():
      device[members] = CPU
  return device


def one_accelerator(workload, config, deadline):
  """Everything an accelerator runs on one accelerator."""
  del config, deadline
  return one_accelerator_split(workload), {}


@functools.lru_cache(maxsize=4)  # The search's start and the baseline: computed once.
def linear_split(workload: Workload, objective: str):
  """PipeDream-style: the best cut of one topological order (for max-load, or for the sum of
  run times under latency)."""
  return (pipeline_linear.partition if objective == "throughput" else
          pipeline_linear.for_latency)(workload)


def pipedream(workload, config, deadline):
  """PipeDream-style: the best cut of one topological order into consecutive runs (for
  latency: the least sum of run times)."""
  del deadline
  split = linear_split(workload, config.objective)
  return split.device, {"units": split.units, "seconds": split.seconds}


def contiguous_dp(workload, config, deadline):
  """The optimal contiguous split for max-load (Tarnawski et al.'s DP; refuses graphs with too
  many ideals); under latency, that split's latency."""
  del config, deadline
  split = pipeline_dp.optimal_contiguous(workload)
  return split.device, {"ideals": split.ideals, "blocks": split.blocks,
                        "seconds": split.seconds}


def search(workload, config, deadline):
  """A PipeDream-style split, then an iterated local search over single class moves
  (compiled; under latency every block stays contiguous): the default."""
  objective = OBJECTIVES[config.objective]
  start, start_name = linear_split(workload, config.objective), "pipedream"
  if objective.violations(workload, start.device) and workload.max_cpus:
    # The order's cut can leave blocks waiting on each other when a co-location class holds
    # both ends of a path through another run; every op on the CPU side never does.
    start = dataclasses.replace(start, device=np.full(workload.num_ops, CPU, np.int64))
    start = dataclasses.replace(start, max_load=objective.value(workload, start.device))
    start_name = "cpu"
  if objective.violations(workload, start.device):
    return start.device, {"start": start_name,
                          "skipped": "the start breaks the memory caps or contiguity"}
  with cli.stoppable():
    searched = pipeline_local_search.local_search(
        workload, start.device, evaluations=config.budget(workload), seed=config.seed,
        deadline=deadline, should_stop=cli.stop_requested, objective=objective.kernel,
        max_rounds=config.max_rounds)
  return searched.device, {"start": start_name, "start_objective": start.max_load,
                           "budget": config.budget(workload), "max_rounds": config.max_rounds,
                           "evaluations": searched.evaluations,
                           "rounds": searched.rounds, "moves_taken": searched.steps,
                           "seconds": searched.seconds}


CPSAT_SECONDS = 10.0  # --method cpsat's time limit unless --time_limit gives one.


def cpsat(workload, config, deadline):
  """CP-SAT over any split (max-load only): the best split it finds in --time_limit seconds
  (default 10) from the PipeDream-style hint, and its proven bound."""
  del deadline  # Max-load only: its record's `split_objectives` refuses latency.
  start = pipeline_linear.partition(workload)
  hint = None if pipeline.violations(workload, start.device) else start.device
  solved = pipeline_cpsat.solve(workload, time_limit=config.time_limit or CPSAT_SECONDS,
                                hint=hint, seed=config.seed)
  device = solved.device if solved.device is not None else start.device
  return device, {"status": solved.status, "lower_bound": solved.lower_bound,
                  "seconds": solved.seconds, "hint": "pipedream" if hint is not None else None,
                  "answer": "hint" if solved.from_hint or solved.device is None else "solver",
                  "resolution": solved.resolution,
                  "proven_optimal": solved.device is not None and solved.proven}


def check_objective(objective: str) -> None:
  if objective not in OBJECTIVES:
    raise errors.ConfigError(f"unknown split objective {objective!r}; known: "
                             f"{', '.join(OBJECTIVES)}")
