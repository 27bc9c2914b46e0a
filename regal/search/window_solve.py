"""CP-SAT as a large-neighbourhood move on the delay model: re-solve a window of a schedule.

The insertion polish (`schedule_polish`) moves one op at a time and cannot walk back from a
few misplaced ops on many devices (`experiments/results/polish_oracle/`). This move frees a
window of the schedule at once: the `size` ops around a given op in start order choose their
devices and times exactly; the ops before the window keep their devices and times; the ops
after it keep their devices and their order on each device but may move in time (so the
window's gain reaches the end). The same move frees every op of two devices over the whole
horizon, re-placed between those two (`devices`; issue 81). CP-SAT minimizes the makespan from the incumbent as its hint,
for a fraction of a second; the answer is read back as a placement and an order by start time,
which the delay model runs no later than CP-SAT planned (it starts every op as early as its
device and inputs allow). Only on graphs whose times are integers on these devices (the
task-graph benchmarks') with every link alike: elsewhere `applies` says no and the polish
does not call it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from regal.baselines import cpsat_solve
from regal.scoring.native_common import link_time
from regal.scoring.delay.native import NativeDelayGraph


def applies(graph: NativeDelayGraph) -> bool:
  """Whether the move can model the graph exactly: every link alike (a transfer takes the
  same time between any two devices) and every op and transfer time a whole number (CP-SAT's
  integers)."""
  if graph.num_devices < 2:
    return False
  off = ~np.eye(graph.num_devices, dtype=bool)
  if np.ptp(graph.latency[off]) > 0 or np.ptp(graph.bandwidth[off]) > 0:
    return False
  durations = graph.cost[:, None] / graph.speed[None, :]
  transfers = [link_time(graph.latency, graph.bandwidth, size, 0, 1)
               for size in graph.pred_bytes[graph.pred_bytes >= 0]]
  values = np.concatenate([durations.ravel(), np.asarray(transfers, np.float64)])
  return bool(np.all(np.isfinite(values)) and np.all(values == np.floor(values)))


def window(order: np.ndarray, centre: int, size: int) -> np.ndarray:
  """The ops of the window: `size` consecutive ops of `order` (a start-time order) around
  op `centre`, as a boolean mask."""
  position = int(np.flatnonzero(order == centre)[0])
  first = int(np.clip(position - size // 2, 0, max(len(order) - size, 0)))
  mask = np.zeros(len(order), bool)
  mask[order[first:first + size]] = True
  return mask


class Incumbent(NamedTuple):
  """The schedule a re-solve starts from: each op's device, the ops by start time (`order`
  must list them by `start`), and the delay model's start and end times."""
  placement: np.ndarray
  order: np.ndarray
  start: np.ndarray
  end: np.ndarray


def resolve(graph: NativeDelayGraph, incumbent: Incumbent, free: np.ndarray, time_limit: float,
            seed: int = 0, devices: np.ndarray | None = None, compact: bool = False
            ) -> tuple[np.ndarray, np.ndarray, int] | None:
  """The ops of `free` (a mask over ops) re-solved: (placement, order by planned start,
  planned makespan: the delay model runs it no later), or None when CP-SAT found nothing
  better than the incumbent within `time_limit` seconds. The free ops choose among `devices`
  (default: all) and their times; the ops before the first free one in the incumbent's order
  keep their times; every other op keeps its device and its place in its device's sequence.
  With `compact`, better means (makespan, sum of op ends) lexicographically lower, as the
  insertion descent ranks schedules: one repair among several defects that each hold the
  makespan then counts."""
  from ortools.sat.python import cp_model  # Only the solvers need OR-Tools.
  placement, order, start, end = incumbent
  num_ops, num_devices = graph.num_ops, graph.num_devices
  choices = (np.arange(num_devices) if devices is None
             else np.asarray(devices, np.int64)).tolist()
  position = np.empty(num_ops, np.int64)
  position[order] = np.arange(num_ops)
  first = int(position[free].min())
  before = position < first
  duration = np.rint(graph.cost[:, None] / graph.speed[None, :]).astype(np.int64)
  incumbent = int(np.rint(end.max()))
  horizon = int(incumbent + duration.max(initial=0) * num_ops + 1)
  model = cp_model.CpModel()
  start_var, end_var, on = {}, {}, {}
  per_device: list[list] = [[] for _ in range(num_devices)]
  last_on_device: list[int | None] = [None] * num_devices
  for op in order.tolist():
    device = int(placement[op])
    if before[op]:
      start_var[op], end_var[op] = int(np.rint(start[op])), int(np.rint(end[op]))
      if duration[op, device] > 0:
        per_device[device].append(model.NewFixedSizeIntervalVar(start_var[op],
                                                                 int(duration[op, device]),
                                                                 f"b{op}"))
      continue
    start_var[op] = model.NewIntVar(0, horizon, f"s{op}")
    end_var[op] = model.NewIntVar(0, horizon, f"e{op}")
    model.AddHint(start_var[op], int(np.rint(start[op])))
    if free[op]:
      # A device the op may not take is a constant false: the constraints below stay alike.
      on[op] = [model.NewBoolVar(f"x{op}_{d}") if d in choices else model.NewConstant(0)
                for d in range(num_devices)]
      model.AddExactlyOne(on[op])
      for d in choices:
        model.AddHint(on[op][d], int(d == device))
        if duration[op, d] > 0:
          per_device[d].append(model.NewOptionalIntervalVar(
              start_var[op], int(duration[op, d]), end_var[op], on[op][d], f"i{op}_{d}"))
        else:
          model.Add(end_var[op] == start_var[op]).OnlyEnforceIf(on[op][d])
    else:  # After the window: its device, and its place in the device's sequence.
      model.Add(end_var[op] == start_var[op] + int(duration[op, device]))
      if duration[op, device] > 0:
        per_device[device].append(model.NewIntervalVar(start_var[op],
                                                        int(duration[op, device]),
                                                        end_var[op], f"a{op}"))
        previous = last_on_device[device]
        if previous is not None and not before[previous]:
          model.Add(start_var[op] >= end_var[previous])
        last_on_device[device] = op
  for intervals in per_device:
    model.AddNoOverlap(intervals)
  for dst in range(num_ops):
    if before[dst]:
      continue
    for k in range(graph.preds_ptr[dst], graph.preds_ptr[dst + 1]):
      src = int(graph.preds[k])
      model.Add(start_var[dst] >= end_var[src])
      if graph.pred_bytes[k] < 0:
        continue
      wait = int(np.rint(link_time(graph.latency, graph.bandwidth, graph.pred_bytes[k], 0, 1)))
      if wait <= 0:
        continue
      if src in on and dst in on:
        for d in range(num_devices):  # src on d, dst elsewhere: the transfer.
          model.Add(start_var[dst] >= end_var[src] + wait).OnlyEnforceIf(
              [on[src][d], on[dst][d].Not()])
      elif src in on:
        model.Add(start_var[dst] >= end_var[src] + wait).OnlyEnforceIf(
            on[src][int(placement[dst])].Not())
      elif dst in on:
        model.Add(start_var[dst] >= end_var[src] + wait).OnlyEnforceIf(
            on[dst][int(placement[src])].Not())
      elif placement[src] != placement[dst]:
        model.Add(start_var[dst] >= end_var[src] + wait)
  makespan = model.NewIntVar(0, horizon, "makespan")
  model.AddMaxEquality(makespan, list(end_var.values()))
  if compact:
    moving = [op for op in range(num_ops) if not before[op]]
    weight = horizon * len(moving) + 1  # Above any sum of the moving ops' ends.
    ranked = makespan * weight + sum(end_var[op] for op in moving)
    model.Add(makespan <= incumbent)
    model.Add(ranked <= incumbent * weight + int(np.rint(end[moving]).sum()) - 1)
    model.Minimize(ranked)
  else:
    model.Add(makespan <= incumbent - 1)  # Only a better schedule is worth reading back.
    model.Minimize(makespan)
  solver = cp_model.CpSolver()
  solver.parameters.max_time_in_seconds = float(time_limit)
  solver.parameters.num_workers = 1
  solver.parameters.random_seed = int(seed)
  status = cpsat_solve.solve(solver, model)
  if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
    return None
  new_placement = placement.copy()
  for op, row in on.items():
    new_placement[op] = int(np.argmax([solver.Value(v) for v in row]))
  planned = np.array([start_var[op] if before[op] else solver.Value(start_var[op])
                      for op in range(num_ops)], np.int64)
  return new_placement, np.lexsort((position, planned)), int(solver.Value(makespan))
