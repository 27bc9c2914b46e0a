"""Pipeline max-load as a constraint program (OR-Tools CP-SAT), over any split: the exact
solver for workloads small enough, and a proven lower bound on the others.

Variables: on[c, d], class c on device d (each accelerator, and the CPU side when there is
one), exactly one per class; a class with an op only a CPU runs is on the CPU side; each
accelerator holds at most the cap. For an op u and an accelerator a, received[u, a] is forced
to 1 when a reader of u is on a and u is not (u's output is received once per accelerator), and
sent[u, a] when u is on a and a reader of u is not (sent once). An accelerator's load is its
ops' latencies plus the costs of what it sends and receives; the CPU side's is its ops' CPU
latencies; the objective is the largest load. Accelerators are interchangeable, so their
loads are ordered (any split can be renumbered to satisfy it).

CP-SAT needs integers: times are scaled by `scale / the largest load term` and rounded down,
and so are sizes, so the solver's bound, scaled back, never exceeds the true optimum; its
split is checked and scored again exactly (`pipeline.violations`, `pipeline.max_load`). The
rounding can put a load up to (its terms x one unit) below its true value, so a split the
solver proves OPTIMAL may score that much above the bound: it is then optimal to the solver's
resolution (`SolvedSplit.proven`: within the rounding's reach and 1e-4 of the bound), not by
the bound alone.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from regal_datasets.formats.profiled import CPU, Workload
from regal.baselines import cpsat_solve
from regal.scoring import bounds
from regal.scoring.throughput import reference as pipeline


# The relative gap up to which an OPTIMAL answer of the rounded model counts as optimal: the
# one tolerance of "proven" (`scoring.bounds.PROVEN_TOLERANCE`); the rounding can leave a load
# that far below its true value.
OPTIMALITY_TOLERANCE = bounds.PROVEN_TOLERANCE


@dataclasses.dataclass(frozen=True)
class SolvedSplit:
  device: np.ndarray | None  # None: no split found in time
  max_load: float  # exact, of `device`; inf without one
  lower_bound: float  # proven: no split has a smaller max-load
  status: str
  seconds: float
  # How far the rounding to integers can put one load below its true value: with status
  # OPTIMAL, a split within this of the bound is optimal to the solver's resolution.
  resolution: float = 0.0
  from_hint: bool = False  # The hint scored better than any split the solver returned.

  @property
  def proven(self) -> bool:
    """Optimal to the solver's resolution: OPTIMAL, and the split above the bound by no more
    than the rounding explains and `OPTIMALITY_TOLERANCE` of it."""
    excess = self.max_load - self.lower_bound
    return self.status == "OPTIMAL" and excess <= min(
        self.resolution, OPTIMALITY_TOLERANCE * self.lower_bound)


def solve(workload: Workload, time_limit: float = 10.0, hint: np.ndarray | None = None,
          workers: int = 2, seed: int = 0, scale: float = 1e6) -> SolvedSplit:
  """The least max-load split CP-SAT finds in `time_limit` seconds, and its proven bound."""
  from ortools.sat.python import cp_model
  started = time.perf_counter()
  groups = workload.group_members()
  accelerators = workload.max_accelerators
  has_cpu = workload.max_cpus > 0
  devices = list(range(accelerators)) + ([CPU] if has_cpu else [])
  graph = workload.graph
  readers = [set() for _ in range(workload.num_ops)]
  for tensor, reader in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()):
    readers[int(graph.tensor_producer[tensor])].add(reader)
  biggest = max(float(workload.accelerator_latency.sum() + 2 * workload.output_cost.sum()),
                float(workload.cpu_latency.sum()), 1e-300)
  unit = biggest / scale  # One integer step, in time.
  to_int = lambda value: int(math.floor(value / unit))  # noqa: E731 (rounded down: a bound)
  model = cp_model.CpModel()
  on = {(c, d): model.NewBoolVar(f"on_{c}_{d}") for c in range(len(groups)) for d in devices}
  for c, members in enumerate(groups):
    model.AddExactlyOne(on[c, d] for d in devices)
    if not workload.on_accelerator[members].all():
      model.Add(on[c, CPU] == 1)
  for a in range(accelerators):
    # Sizes rounded down: every split that fits in bytes fits here (the bound stays valid); a
    # split that fits only here is caught by the check below.
    model.Add(sum(int(math.floor(workload.memory[m].sum())) * on[c, a]
                  for c, m in enumerate(groups)) <= int(math.floor(workload.accelerator_memory)))
  of = workload.colocation
  horizon = int(scale) + 1
  loads = []
  for a in range(accelerators):
    terms = [to_int(workload.accelerator_latency[groups[c]].sum()) * on[c, a]
             for c in range(len(groups))]
    for u in range(workload.num_ops):
      if not readers[u] or workload.output_cost[u] <= 0:
        continue
      cost = to_int(workload.output_cost[u])
      received = model.NewBoolVar(f"received_{u}_{a}")
      sent = model.NewBoolVar(f"sent_{u}_{a}")
      for v in readers[u]:
        if of[v] == of[u]:
          continue  # One class, one device: never a transfer.
        model.Add(received >= on[of[v], a] - on[of[u], a])
        model.Add(sent >= on[of[u], a] - on[of[v], a])
      terms += [cost * received, cost * sent]
    load = model.NewIntVar(0, horizon, f"load_{a}")
    model.Add(load == sum(terms))
    loads.append(load)
  for a in range(accelerators - 1):
    model.Add(loads[a] >= loads[a + 1])
  worst = model.NewIntVar(0, horizon, "max_load")
  model.AddMaxEquality(worst, loads + ([sum(to_int(workload.cpu_latency[groups[c]].sum()) *
                                            on[c, CPU] for c in range(len(groups)))]
                                       if has_cpu else []))
  model.Minimize(worst)
  if hint is not None:
    for c, members in enumerate(groups):
      for d in devices:
        model.AddHint(on[c, d], int(hint[members[0]] == d))
  solver = cp_model.CpSolver()
  solver.parameters.max_time_in_seconds = float(time_limit)
  solver.parameters.num_workers = int(workers)
  solver.parameters.random_seed = int(seed)
  status = cpsat_solve.solve(solver, model)
  bound = float(solver.BestObjectiveBound()) * unit
  device = None
  value = np.inf
  if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
    device = np.full(workload.num_ops, CPU, np.int64)
    for c, members in enumerate(groups):
      device[members] = next(d for d in devices if solver.Value(on[c, d]))
    value = pipeline.max_load(workload, device)
    if pipeline.violations(workload, device):
      device, value = None, np.inf
  # A solver stopped early (a signal, the time limit) can return a split worse than the hint
  # it started from; the hint is a split too.
  hint_value = (pipeline.max_load(workload, hint) if hint is not None and
                not pipeline.violations(workload, hint) else np.inf)
  from_hint = hint_value < value
  if from_hint:
    device, value = np.asarray(hint, np.int64).copy(), hint_value
  terms = len(groups) + 2 * sum(1 for u in range(workload.num_ops)
                                if readers[u] and workload.output_cost[u] > 0)
  return SolvedSplit(device=device, max_load=value, lower_bound=bound,
                     status=solver.StatusName(status), seconds=time.perf_counter() - started,
                     resolution=terms * unit, from_hint=bool(from_hint))
