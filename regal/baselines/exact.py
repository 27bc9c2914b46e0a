"""Best known solutions with OR-Tools CP-SAT, and the QuickP variant that solves a smaller model.

The model is the delay model of `list_scheduling` (Doppler's communication semantics): per op
a start, an end and one optional interval per device (exactly one present, its length the op's
time there); no overlap per device; for every dependency u -> v, start(v) >= end(u), plus the
transfer time when u and v sit on different devices and v reads a tensor of u; minimize the
makespan. On identical devices the labels are interchangeable, so devices are first used in
index order along a fixed node sequence (value precedence: it cut CP-SAT's unproven Sinnen
graphs within 5 s from 39 of 40 to 33). Redundant constraints lift the bound: per device, the
work it runs of a node's ancestors fits before the node starts, of its descendants after it
ends, plus one cheapest transfer where the node sits elsewhere (`_add_ancestor_loads`; with
one worker and 5 s, of 40 Sinnen graphs the default run left unproven the loads proved 9
instead of 1, and of 40 it still left unproven, the transfer term 18 instead of 1).
Every performance model's schedule is feasible here, so CP-SAT's proven bound is a lower bound
for all of them; its solution (placement + order by start time) is then scored by the
problem's own model like every other method's.

CP-SAT needs integer times: when the durations are not all integers (or are huge) the time unit
is chosen so the horizon spans about 10^7 units and durations are rounded *down*, which keeps
the bound valid (every real schedule maps onto a feasible scaled one). A time limit bounds the
search; without a proof the incumbent is returned (the critical-path schedule is its hint, so
there always is one).
"""
from __future__ import annotations

import time

import numpy as np

from regal_datasets import analysis, errors
from regal_datasets import graph as graph_lib
from regal_datasets.analysis import CONTROL_ONLY, Dependencies
from regal_datasets.devices import DeviceSpec
from regal.baselines import cpsat_solve, fusion, list_scheduling
from regal.baselines.common import MethodResult, finish
from regal.scoring import performance

HORIZON_UNITS = 10_000_000


def _identical_devices(devices: DeviceSpec) -> bool:
  off = ~np.eye(devices.num_devices, dtype=bool)
  return (np.all(devices.speed == devices.speed[0])
          and np.all(devices.bandwidth[off] == devices.bandwidth[off][0])
          and np.all(devices.latency[off] == devices.latency[off][0]))


def solve_delay_model(cost: np.ndarray, edges: list[tuple[int, int, float]],
                      devices: DeviceSpec, time_limit: float = 10.0, workers: int = 2,
                      seed: int = 0, same_device: list[list[int]] = (),
                      hint: np.ndarray | None = None, solver=None) -> dict:
  """CP-SAT on nodes with compute `cost` and dependency `edges` (src, dst, bytes). `solver`: a
  `cp_model.CpSolver` to solve with (another thread may call its `StopSearch`).

  Returns {placement, start, lower_bound, status, time_unit} (no placement when it found none).
  """
  from ortools.sat.python import cp_model  # Imported here: only this method needs OR-Tools.
  num_nodes, num_devices = len(cost), devices.num_devices
  duration = cost[:, None] / devices.speed[None, :]  # [n, D]
  delay = {}
  for src, dst, size in edges:
    for a in range(num_devices):
      for b in range(num_devices):
        delay[(src, dst, a, b)] = float(analysis.transfer_time(devices, size, a, b))
  horizon = float(duration.max(axis=1).sum() + sum(max(
      (delay[(s, d, a, b)] for a in range(num_devices) for b in range(num_devices)), default=0)
      for s, d, _ in edges))
  values = np.concatenate([duration.ravel(), np.fromiter(delay.values(), float)])
  integral = np.all(values == np.floor(values)) and horizon <= HORIZON_UNITS * 100
  unit = 1.0 if integral or horizon == 0 else horizon / HORIZON_UNITS
  to_units = lambda t: int(np.floor(t / unit + 1e-9))
  bound = to_units(horizon) + 1

  model = cp_model.CpModel()
  on = [[model.NewBoolVar(f"x{i}_{d}") for d in range(num_devices)] for i in range(num_nodes)]
  start = [model.NewIntVar(0, bound, f"s{i}") for i in range(num_nodes)]
  end = [model.NewIntVar(0, bound, f"e{i}") for i in range(num_nodes)]
  per_device = [[] for _ in range(num_devices)]
  for i in range(num_nodes):
    model.AddExactlyOne(on[i])
    for d in range(num_devices):
      per_device[d].append(model.NewOptionalIntervalVar(
          start[i], to_units(duration[i, d]), end[i], on[i][d], f"i{i}_{d}"))
  for intervals in per_device:
    model.AddNoOverlap(intervals)
  identical = num_devices > 1 and _identical_devices(devices) and num_nodes
  for src, dst, size in edges:
    model.Add(start[dst] >= end[src])
    if size == CONTROL_ONLY:
      continue
    for a in range(num_devices):
      for b in range(num_devices):
        wait = to_units(delay[(src, dst, a, b)])
        if a != b and wait > 0:
          model.Add(start[dst] >= end[src] + wait).OnlyEnforceIf([on[src][a], on[dst][b]])
  for group in same_device:
    for other in group[1:]:
      for d in range(num_devices):
        model.Add(on[other][d] == on[group[0]][d])
  if identical:
    sequence = _break_device_symmetry(model, on, cost)
    if hint is not None:  # Relabelled the same way, so the hint obeys the symmetry breaking.
      labels: dict[int, int] = {}
      for node in sequence:
        labels.setdefault(int(hint[node]), len(labels))
      hint = np.array([labels[int(d)] for d in hint], np.int64)
  makespan = model.NewIntVar(0, bound, "makespan")
  model.AddMaxEquality(makespan, end) if num_nodes else model.Add(makespan == 0)
  if num_devices > 1:
    _add_ancestor_loads(model, on, start, end, makespan, duration, to_units, edges, [
        0 if size == CONTROL_ONLY else min(to_units(delay[(src, dst, a, b)])
                                           for a in range(num_devices)
                                           for b in range(num_devices) if a != b)
        for src, dst, size in edges])
  # Redundant but strong for the bound: no device works longer than the makespan.
  for d in range(num_devices):
    model.Add(sum(to_units(duration[i, d]) * on[i][d] for i in range(num_nodes)) <= makespan)
  model.Minimize(makespan)
  if hint is not None:
    for i in range(num_nodes):
      for d in range(num_devices):
        model.AddHint(on[i][d], int(hint[i] == d))

  solver = solver or cp_model.CpSolver()
  solver.parameters.max_time_in_seconds = float(time_limit)
  solver.parameters.num_workers = int(workers)
  solver.parameters.random_seed = int(seed)
  status = cpsat_solve.solve(solver, model)
  if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
    return {"status": solver.StatusName(status), "lower_bound": float(
        solver.BestObjectiveBound() * unit), "time_unit": unit}
  placement = np.array([int(np.argmax([solver.Value(v) for v in row])) for row in on],
                       np.int64)
  starts = np.array([solver.Value(s) for s in start], float) * unit
  return {"status": solver.StatusName(status), "placement": placement, "start": starts,
          "lower_bound": float(solver.BestObjectiveBound() * unit), "time_unit": unit}


# The ancestor-load constraints hold one term per (node, relative, device): beyond this many
# terms the model would grow quadratically for a bound that matters on small graphs.
MAX_ANCESTOR_LOAD_TERMS = 400_000


def _reachable(num_nodes: int, edges, max_pairs: int) -> np.ndarray | None:
  """[n, n] bool: reach[a, b] when a path leads from a to b (a != b); None once more than
  `max_pairs` pairs are reachable (the closure is then not finished)."""
  src = np.array([e[0] for e in edges], np.int64)
  dst = np.array([e[1] for e in edges], np.int64)
  by_source = np.argsort(src, kind="stable")
  indptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=num_nodes))])
  successors = dst[by_source]
  order = graph_lib.kahn_order(num_nodes, (indptr, successors),
                               np.bincount(dst, minlength=num_nodes))
  reach = np.zeros((num_nodes, num_nodes), bool)
  pairs = 0
  for node in order[::-1]:
    for nxt in successors[indptr[node]:indptr[node + 1]]:
      reach[node, nxt] = True
      reach[node] |= reach[nxt]
    pairs += int(reach[node].sum())
    if pairs > max_pairs:
      return None
  return reach


def _add_ancestor_loads(model, on, start, end, makespan, duration, to_units, edges,
                        delay_units) -> None:
  """Redundant, for the bound: a node's ancestors all end before it starts, and its
  descendants all start after it ends, so whatever share of them a device runs fits before
  start(v) (after end(v)) on that device. CP-SAT's own relaxation sees device loads only
  against the makespan; these lift the bound of fork, join and tree graphs, where proofs
  hinge on how a node's relatives split over the devices. When v sits elsewhere than some of
  those relatives, a path between them changes device, which costs at least the cheapest
  transfer among them (`delay_units[e]`: edge e's least transfer between two devices)."""
  num_nodes, num_devices = duration.shape
  reach = _reachable(num_nodes, edges, MAX_ANCESTOR_LOAD_TERMS // (2 * num_devices))
  if reach is None:
    return
  units = [[to_units(duration[i, d]) for d in range(num_devices)] for i in range(num_nodes)]
  edge_src = np.array([e[0] for e in edges], np.int64)
  edge_dst = np.array([e[1] for e in edges], np.int64)
  delays = np.asarray(delay_units, np.int64)
  for v in range(num_nodes):
    for relatives, inner_edges, side in (
        (reach[:, v], reach[edge_src, v] & (reach[edge_dst, v] | (edge_dst == v)), "before"),
        (reach[v], reach[v, edge_dst] & (reach[v, edge_src] | (edge_src == v)), "after")):
      members = np.flatnonzero(relatives)
      if len(members) < 2:  # One relative: the precedence itself says as much.
        continue
      cheapest = int(delays[inner_edges].min()) if inner_edges.any() else 0
      for d in range(num_devices):
        load = sum(units[a][d] * on[a][d] for a in members)
        if cheapest > 0:  # + the transfer when some relative sits on d and v does not.
          some_on_d = model.NewBoolVar("")
          for a in members:
            model.AddImplication(on[a][d], some_on_d)
          load = load + cheapest * some_on_d - cheapest * on[v][d]
        if side == "before":
          model.Add(start[v] >= load)
        else:
          model.Add(makespan >= end[v] + load)


def _break_device_symmetry(model, on, cost: np.ndarray) -> list[int]:
  """Interchangeable devices: any solution can be relabelled so that devices are first used in
  index order along a fixed node sequence (the heaviest node first, then by index; relabelling
  keeps nodes that must share a device together). So a node may sit on device d > 0 only if an
  earlier node of the sequence sits on device d - 1 (value precedence), and the first node
  sits on device 0. Returns the sequence."""
  num_nodes, num_devices = len(on), len(on[0])
  heaviest = int(np.argmax(cost))
  sequence = [heaviest] + [i for i in range(num_nodes) if i != heaviest]
  model.Add(on[heaviest][0] == 1)
  for position, node in enumerate(sequence[1:], start=1):
    earlier = sequence[:position]
    for d in range(1, min(num_devices, position + 1)):
      model.AddBoolOr([on[j][d - 1] for j in earlier]).OnlyEnforceIf(on[node][d])
    for d in range(position + 1, num_devices):
      model.Add(on[node][d] == 0)  # Fewer earlier nodes than devices before d.
  return sequence


def _order_by_start(start: np.ndarray, topo_position: np.ndarray) -> np.ndarray:
  return np.lexsort((topo_position, start))


def _check_objective(problem: performance.Problem, method: str) -> None:
  if problem.objective != "runtime":
    raise errors.ConfigError(f"method {method} minimizes the makespan: use objective runtime")


def solve_graph(problem: performance.Problem, time_limit: float, workers: int = 2,
                seed: int = 0, hint: tuple[np.ndarray, np.ndarray] | None = None, solver=None
                ) -> tuple[np.ndarray, np.ndarray, dict]:
  """CP-SAT on the problem's whole graph: (placement, op order by start time, the solution's
  facts). `hint`: a (placement, order) to start from (default: the critical-path schedule),
  returned when the solver finds nothing within the limit."""
  graph, devices = problem.graph, problem.devices
  deps = Dependencies.of(graph)
  edges = [(src, dst, size) for dst in range(graph.num_ops)
           for src, size in zip(deps.preds[dst], deps.pred_bytes[dst])]
  if hint is None:
    hint = list_scheduling.critical_path_assignment(graph, devices)
  solution = solve_delay_model(graph.compute_cost, edges, devices, time_limit, workers, seed,
                               hint=hint[0], solver=solver)
  if "placement" not in solution:
    return hint[0], hint[1], solution
  topo_position = np.empty(graph.num_ops, np.int64)
  topo_position[graph.topological_order] = np.arange(graph.num_ops)
  return solution["placement"], _order_by_start(solution["start"], topo_position), solution


def cpsat(problem: performance.Problem, time_limit: float = 10.0, workers: int = 2,
          seed: int = 0) -> MethodResult:
  """CP-SAT on the whole graph: the best known solution and a proven lower bound."""
  _check_objective(problem, "cpsat")
  started = time.perf_counter()
  placement, order, solution = solve_graph(problem, time_limit, workers, seed)
  planned, _, _ = list_scheduling.simulate_in_order(problem.graph, problem.devices, placement,
                                                    order)
  return finish("cpsat", problem, placement, order, started, status=solution["status"],
                planned_makespan=planned, lower_bound=solution["lower_bound"],
                time_unit=solution["time_unit"], time_limit=time_limit)


def quickp(problem: performance.Problem, time_limit: float = 10.0, workers: int = 2,
           seed: int = 0, alpha: float | None = None) -> MethodResult:
  """QuickP: fuse cheap operators, co-locate critical pairs, then CP-SAT on the smaller model.

  Its bound holds for the fused model only (fusion restricts the solutions), so none is
  reported as the graph's lower bound."""
  _check_objective(problem, "quickp")
  started = time.perf_counter()
  graph, devices = problem.graph, problem.devices
  fused = fusion.fuse(graph, alpha)
  colocated = [sorted({int(fused.node_of[op]) for op in group})
               for group in fusion.colocation_groups(graph, devices)]
  colocated = [group for group in colocated if len(group) > 1]
  hint_ops, _ = list_scheduling.critical_path_assignment(graph, devices)
  hint = np.array([hint_ops[members[0]] for members in fused.members], np.int64)
  solution = solve_delay_model(fused.cost, fused.edges, devices, time_limit, workers, seed,
                               same_device=colocated, hint=hint)
  if "placement" in solution:
    node_device, node_start = solution["placement"], solution["start"]
  else:
    node_device, node_start = hint, np.zeros(len(hint))
  placement = node_device[fused.node_of]
  # Members run back to back: order by their node's start, then topologically.
  topo_position = np.empty(graph.num_ops, np.int64)
  topo_position[graph.topological_order] = np.arange(graph.num_ops)
  order = np.lexsort((topo_position, node_start[fused.node_of]))
  planned, _, _ = list_scheduling.simulate_in_order(graph, devices, placement, order)
  return finish("quickp", problem, placement, order, started, status=solution["status"],
                planned_makespan=planned, fused_nodes=len(fused.members),
                colocation_groups=len(colocated), time_limit=time_limit)
