"""Baselines: every method the REGAL and Doppler papers compare against, on one scoring path.

Each method takes a `regal.scoring.performance.Problem` and returns a `MethodResult` (placement, op
order, objective under the problem's reference model, wall time). `run_method(name, ...)`
is what `regal.optimize --method NAME` and the baselines table call.

| name | method |
|---|---|
| critical_path | Kwok & Ahmad list scheduling: largest bottom level first, earliest-start device |
| critical_path_doppler | the same as the Doppler repository codes it (the papers' anchors) |
| heft | HEFT: upward rank, earliest finish time, insertion, heterogeneous speeds |
| gp_dfs | METIS k-way partition + depth-first schedule (REGAL's XLA stand-in) |
| local_search | hill climbing over device moves and adjacent swaps, restarts, BRKGA's budget |
| hill_climb | the strongest simple baseline: climb from the best heuristic seed on the exact model |
| random | the best of `evals` uniform random chromosomes (IDRS: `sampling.idrs`) |
| enumerative | Doppler's Enumerative Optimizer over meta-op groups |
| cpsat | OR-Tools CP-SAT: best known solution and lower bound, with a time limit |
| quickp | QuickP: operator fusion + co-location, then CP-SAT on the smaller model |
| data_parallel | every op split on its batch, shard s on device s (a sharded graph's blocks) |
"""
from __future__ import annotations

from typing import Callable

from datasets import errors
from regal.baselines import (data_parallel, enumerative, exact, list_scheduling, local_search,
                             partition, sampling)
from regal.baselines.common import MethodResult, finish, score
from regal.scoring import performance

# name -> (run(problem, evals, seed, time_limit), what it reads besides the problem: a
# subset of {"evals", "time_limit", "seed", "engine"}, so `regal.optimize` can refuse a flag
# the method would ignore).
_BATCHED = frozenset({"evals", "seed", "engine"})
_SOLVER = frozenset({"time_limit", "seed"})
_METHODS: dict[str, tuple[Callable[..., MethodResult], frozenset[str]]] = {
    "critical_path": (lambda p, evals, seed, time_limit: list_scheduling.critical_path(p),
                      frozenset()),
    "critical_path_doppler": (
        lambda p, evals, seed, time_limit: list_scheduling.critical_path_doppler(p),
        frozenset()),
    "heft": (lambda p, evals, seed, time_limit: list_scheduling.heft(p), frozenset()),
    "gp_dfs": (lambda p, evals, seed, time_limit: partition.gp_dfs(p), frozenset()),
    "local_search": (lambda p, evals, seed, time_limit: local_search.local_search(p, evals, seed),
                     _BATCHED),
    "hill_climb": (lambda p, evals, seed, time_limit: local_search.hill_climb(p, evals, seed),
                   _BATCHED),
    "random": (lambda p, evals, seed, time_limit: sampling.random_search(p, evals, seed),
               _BATCHED),
    "enumerative": (lambda p, evals, seed, time_limit: enumerative.enumerative(p, seed),
                    frozenset({"seed"})),
    "cpsat": (lambda p, evals, seed, time_limit: exact.cpsat(p, time_limit, seed=seed), _SOLVER),
    "quickp": (lambda p, evals, seed, time_limit: exact.quickp(p, time_limit, seed=seed),
               _SOLVER),
    "data_parallel": (lambda p, evals, seed, time_limit: data_parallel.data_parallel(p),
                      frozenset()),
}
METHODS = tuple(_METHODS)
# Methods that plan the makespan only (they refuse the memory objectives).
MAKESPAN_ONLY = ("cpsat", "quickp")


def run_method(name: str, problem: performance.Problem, evals: int = 5000, seed: int = 0,
               time_limit: float = 10.0) -> MethodResult:
  """Runs baseline `name`; `evals` is the search budget, `time_limit` CP-SAT's (seconds)."""
  if name not in _METHODS:
    raise errors.ConfigError(f"unknown method {name!r}; known: brkga, {', '.join(METHODS)}")
  return _METHODS[name][0](problem, evals, seed, time_limit)


def reads(name: str) -> frozenset[str]:
  """What baseline `name` reads besides the problem (see `_METHODS`)."""
  return _METHODS[name][1]


__all__ = ["METHODS", "MAKESPAN_ONLY", "MethodResult", "finish", "reads", "run_method",
           "score"]
