"""Baselines: every method the REGAL and Doppler papers compare against, on one scoring path.

Each method takes a `regal.scoring.performance.Problem` and returns a `MethodResult` (placement, op
order, objective under the problem's reference model, wall time). They are registered, with
what each reads, in the one method registry (`regal.app.methods`: `run_method(name, ...)` is
what `regal.optimize --method NAME` and the experiments call).

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

import importlib

# Each method's module loads when first named (`baselines.exact` loads OR-Tools, `partition`
# METIS): a run loads only what it runs, and the package's registries (`registries`) are read
# without JAX.
_METHOD_MODULES = ("data_parallel", "enumerative", "exact", "list_scheduling", "local_search",
                   "partition", "sampling")
_COMMON = ("MethodResult", "finish", "score")
__all__ = [*_COMMON, *_METHOD_MODULES]


def __getattr__(name: str):
  if name in _METHOD_MODULES:
    return importlib.import_module(f"regal.baselines.{name}")
  if name in _COMMON:
    return getattr(importlib.import_module("regal.baselines.common"), name)
  raise AttributeError(f"module 'regal.baselines' has no attribute {name!r}")
