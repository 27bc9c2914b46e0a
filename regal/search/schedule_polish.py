"""Iterated insertion search on the delay model: the schedule-space polish after BRKGA (issue 69).

The delay model runs a schedule given as a placement and a topological op order: each op, in order,
on its device as soon as the device is free and its inputs arrived
(`regal.scoring.delay.reference.simulate_delay`). Only each device's sequence matters, so a move
takes one op out and inserts it into any device's sequence at any slot its dependencies allow
(between its last predecessor and its first successor in the order): the insertion neighbourhood of
list-scheduling local searches, which random keys reach only by luck (a device change and the right
priority at once). The search:

* descends: takes the ops on a critical path (no slack: start + longest path to the end = the
  makespan; only they can shorten it) in random order, scores every insertion of one at once
  and takes the first that lowers (makespan, sum of op ends), lexicographically; the sum
  compacts the schedule while the makespan plateaus, so equal-makespan steps still progress;
* after each accepted move re-sorts the order by start time (a topological order that runs
  the same schedule), so an op's window is the time between its inputs and its readers;
* at a local optimum kicks the best schedule so far (`KICK_OPS` random insertions) and
  descends again, keeping a local optimum that is no longer than the best (iterated local
  search);
* every `WINDOW_AFTER_KICKS` kicks without a shorter schedule (with a deadline, where
  `window_solve.applies`), re-solves the best schedule's window of `WINDOW_OPS` ops around a
  critical op exactly with CP-SAT: one-op moves cannot walk back from a few misplaced ops on
  many devices (`experiments/results/polish_oracle/`), a window re-placed at once can (on
  request, `MOVE_SETS`, in turn with every op of two devices re-solved: measured not to pay in
  `experiments/results/issue81/`);
* stops at the structural lower bound (then the answer is proven optimal), the evaluation
  budget, or the deadline.

Every score is one O(ops + dependencies) pass of `_score`, bit-exact in float32 with the
reference model (tests); the loops are numba, run in slices of `SLICE_EVALS` evaluations
so the host can watch the clock. Measured in `experiments/results/task_graph_table/polish/` and
`polish_windows/`.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numba
import numpy as np

from regal_datasets import cli
from regal.scoring import bounds, models, performance
from regal.scoring import chromosome as chromosome_lib
from regal.scoring.delay import reference as delay_reference
from regal.scoring.delay.native import NativeDelayGraph, build_native_delay_graph
from regal.scoring.native_common import link_time
from regal.search import window_solve

# Evaluations per compiled slice between clock checks (~0.05-0.5 s on the task graphs).
SLICE_EVALS = 20_000
# Random insertions per kick from the best schedule (chosen on the constructed training set:
# experiments/results/task_graph_table/polish/).
KICK_OPS = 1
# The exact window move: how many ops it frees, its CP-SAT seconds, and after how many kicks
# without a better schedule it is tried (screened on the training instances: 40 ops after 5
# kicks against 40 after 20, 80 after 5 and 20 after 3 in 0.3 s; see the polish report).
WINDOW_OPS = 40
WINDOW_SECONDS = 0.5
WINDOW_AFTER_KICKS = 5
# The exact moves the polish takes turns with: "window" (the ops around a critical op in time)
# and "pair" (every op of two devices, re-placed between them over the whole horizon; issue 81,
# measured in experiments/results/issue81/).
LARGE_MOVES = ("window",)


@dataclasses.dataclass(frozen=True)
class ExactMoves:
  """Which exact moves the polish takes turns with, and when: at a local optimum after
  `WINDOW_AFTER_KICKS` kicks without a shorter schedule, and also whenever `every_seconds`
  passed since the last one (large graphs: few kicks happen in a run)."""
  moves: tuple[str, ...] = LARGE_MOVES
  every_seconds: float = float("inf")
  # Keep a re-solve that lowers (makespan, sum of op ends) lexicographically, not only one
  # that lowers the makespan (`window_solve.resolve(compact=True)`).
  compact: bool = False
  seconds: float = WINDOW_SECONDS  # CP-SAT's seconds per move.


# The polishes a run may ask for (`RunConfig.polish`, beside "off").
MOVE_SETS = {"auto": ExactMoves(), "insertions": ExactMoves(()),
             "pairs": ExactMoves(("window", "pair")),
             "pairs_timed": ExactMoves(("window", "pair"), every_seconds=1.0),
             "compact": ExactMoves(compact=True),
             "long_windows": ExactMoves(seconds=3.0)}


def applies(problem: performance.Problem) -> bool:
  """Whether the polish runs on `problem`: the delay model's makespan on several devices."""
  return (models.get(problem.model).exact_solver and problem.objective == "runtime"
          and problem.devices.num_devices > 1 and problem.graph.num_ops > 1)


@dataclasses.dataclass(frozen=True)
class PolishResult:
  placement: np.ndarray  # [o] int64
  order: np.ndarray  # [o] int64 a topological order
  makespan: float  # the delay model's, float32 as the search's scorer
  start_makespan: float
  evaluations: int
  moves: int  # accepted improving insertions
  kicks: int
  windows: int  # exact window re-solves (`window_solve`)
  improving_windows: int  # those that gave a shorter schedule
  seconds: float
  stop_reason: str  # "bound", "budget", "time" or "stopped" (a proof elsewhere, a signal)

  def chromosome(self, layout: chromosome_lib.Layout) -> np.ndarray:
    return chromosome_lib.encode(self.placement, self.order, layout)


# ----- scoring --------------------------------------------------------------------------
@numba.njit(inline="always")
def _device_of(op, placement, moved, moved_device):
  return moved_device if op == moved else placement[op]


@numba.njit(inline="always")
def _run_op(op, device, placement, moved, moved_device, cost, preds_ptr, preds, pred_bytes,
            speed, bandwidth, latency, start, end, free):
  ready = np.float32(0)
  for k in range(preds_ptr[op], preds_ptr[op + 1]):
    src = preds[k]
    arrival = end[src]
    src_device = _device_of(src, placement, moved, moved_device)
    if src_device != device and pred_bytes[k] >= 0:
      arrival = arrival + link_time(latency, bandwidth, pred_bytes[k], src_device, device)
    ready = max(ready, arrival)
  duration = cost[op] / speed[device]
  begin = max(free[device], ready) if duration > 0 else ready
  start[op] = begin
  end[op] = begin + duration
  if duration > 0:
    free[device] = end[op]


@numba.njit(nogil=True, cache=True)
def _score(order, placement, moved, moved_device, insert_at, cost, preds_ptr, preds, pred_bytes,
           speed, bandwidth, latency, start, end, free):
  """(makespan, sum of ends) of `order` and `placement`, with op `moved` (-1: none) taken
  out of its place and run on `moved_device` just before order[insert_at] (at the end when
  insert_at = len(order)). Fills start and end."""
  num_ops = order.shape[0]
  for d in range(free.shape[0]):
    free[d] = np.float32(0)
  for i in range(num_ops + 1):
    if i == insert_at and moved >= 0:
      _run_op(moved, moved_device, placement, moved, moved_device, cost, preds_ptr, preds,
              pred_bytes, speed, bandwidth, latency, start, end, free)
    if i == num_ops:
      break
    op = order[i]
    if op == moved:
      continue
    _run_op(op, placement[op], placement, moved, moved_device, cost, preds_ptr, preds,
            pred_bytes, speed, bandwidth, latency, start, end, free)
  makespan = np.float32(0)
  total = 0.0
  for v in range(num_ops):
    makespan = max(makespan, end[v])
    total += end[v]
  return makespan, total


# ----- moves ----------------------------------------------------------------------------
@numba.njit(inline="always")
def _window(op, position, preds_ptr, preds, succs_ptr, succs, num_ops):
  """The order indices op may be inserted before: lo + 1 .. hi (hi = num_ops: the end)."""
  lo = -1
  for k in range(preds_ptr[op], preds_ptr[op + 1]):
    lo = max(lo, position[preds[k]])
  hi = num_ops
  for k in range(succs_ptr[op], succs_ptr[op + 1]):
    hi = min(hi, position[succs[k]])
  return lo, hi


@numba.njit(inline="always")
def _apply(order, position, placement, op, device, insert_at):
  """Moves op to `device`, just before order[insert_at], in place."""
  placement[op] = device
  old = position[op]
  if insert_at > old:  # Shift the ops between one place to the left.
    for i in range(old, insert_at - 1):
      order[i] = order[i + 1]
      position[order[i]] = i
    order[insert_at - 1] = op
    position[op] = insert_at - 1
  else:
    for i in range(old, insert_at, -1):
      order[i] = order[i - 1]
      position[order[i]] = i
    order[insert_at] = op
    position[op] = insert_at


@numba.njit(inline="always")
def _by_start(order, position, start):
  """Re-sorts order by start time (stable: ties keep the current order, a topological one)."""
  keys = np.empty(order.shape[0], np.float32)
  for i in range(order.shape[0]):
    keys[i] = start[order[i]]
  sorted_order = order[np.argsort(keys, kind="mergesort")]
  for i in range(order.shape[0]):
    order[i] = sorted_order[i]
    position[order[i]] = i


@numba.njit(inline="always")
def _critical(order, placement, start, end, makespan, succs_ptr, succs, preds_ptr, preds,
              pred_bytes, bandwidth, latency, tail, next_on_device, last_on_device):
  """Ops with no slack: start + the longest path from their start to the end >= makespan."""
  num_ops = order.shape[0]
  for d in range(last_on_device.shape[0]):
    last_on_device[d] = -1
  for i in range(num_ops - 1, -1, -1):
    op = order[i]
    device = placement[op]
    next_on_device[op] = last_on_device[device]
    if end[op] > start[op]:
      last_on_device[device] = op
  for i in range(num_ops - 1, -1, -1):
    op = order[i]
    device = placement[op]
    longest = np.float32(0)
    following = next_on_device[op]
    if following >= 0 and end[op] > start[op]:
      longest = tail[following]
    for k in range(succs_ptr[op], succs_ptr[op + 1]):
      succ = succs[k]
      delay = np.float32(0)
      if placement[succ] != device:
        for j in range(preds_ptr[succ], preds_ptr[succ + 1]):
          if preds[j] == op and pred_bytes[j] >= 0:
            delay = link_time(latency, bandwidth, pred_bytes[j], device, placement[succ])
      longest = max(longest, delay + tail[succ])
    tail[op] = (end[op] - start[op]) + longest
  critical = np.zeros(num_ops, np.bool_)
  for v in range(num_ops):
    critical[v] = start[v] + tail[v] >= makespan * np.float32(1 - 1e-6)
  return critical


@numba.njit(nogil=True, cache=True)
def _descend(order, position, placement, budget, cost, preds_ptr,
             preds, pred_bytes, succs_ptr, succs, speed, bandwidth, latency, bound, start, end,
             free, tail, next_on_device, last_on_device):
  """First-improvement insertions of critical ops until none improves (or the budget ends).
  Returns (makespan, sum of ends, evaluations, moves, at a local optimum)."""
  num_ops = order.shape[0]
  num_devices = speed.shape[0]
  evaluations = 0
  moves = 0
  makespan, total = _score(order, placement, -1, 0, num_ops, cost, preds_ptr, preds,
                           pred_bytes, speed, bandwidth, latency, start, end, free)
  while True:  # start, end, makespan and total are the current schedule's here.
    if makespan <= bound:
      return makespan, total, evaluations, moves, False
    critical = _critical(order, placement, start, end, makespan, succs_ptr, succs, preds_ptr,
                         preds, pred_bytes, bandwidth, latency, tail, next_on_device,
                         last_on_device)
    candidates = np.flatnonzero(critical)
    np.random.shuffle(candidates)
    improved = False
    for op in candidates:
      lo, hi = _window(op, position, preds_ptr, preds, succs_ptr, succs, num_ops)
      for device in range(num_devices):
        for at in range(lo + 1, hi + 1):
          # One insertion per slot of the device's sequence: before each of its ops in the
          # window, or after the last (before order[hi]).
          if at < hi and (order[at] == op or placement[order[at]] != device):
            continue
          if device == placement[op] and (at == position[op] or at == position[op] + 1):
            continue  # Where it is already.
          if evaluations >= budget:
            return makespan, total, evaluations, moves, False
          evaluations += 1
          trial, trial_total = _score(order, placement, op, device, at, cost, preds_ptr,
                                      preds, pred_bytes, speed, bandwidth, latency, start,
                                      end, free)
          if trial < makespan or (trial == makespan and trial_total < total):
            _apply(order, position, placement, op, device, at)
            makespan, total = _score(order, placement, -1, 0, num_ops, cost, preds_ptr,
                                     preds, pred_bytes, speed, bandwidth, latency, start,
                                     end, free)
            _by_start(order, position, start)  # The same schedule: its times stand.
            moves += 1
            improved = True
            break
        if improved:
          break
      if improved:
        break
    if not improved:
      return makespan, total, evaluations, moves, True


@numba.njit(nogil=True, cache=True)
def _kick(order, position, placement, kick_ops, preds_ptr, preds, succs_ptr, succs,
          num_devices, cost, pred_bytes, speed, bandwidth, latency, start, end, free):
  """`kick_ops` random insertions (any op, device and slot of its window)."""
  num_ops = order.shape[0]
  for _ in range(kick_ops):
    op = np.random.randint(num_ops)
    lo, hi = _window(op, position, preds_ptr, preds, succs_ptr, succs, num_ops)
    at = np.random.randint(lo + 1, hi + 1)
    _apply(order, position, placement, op, np.random.randint(num_devices), at)
  _score(order, placement, -1, 0, num_ops, cost, preds_ptr, preds, pred_bytes, speed,
         bandwidth, latency, start, end, free)
  _by_start(order, position, start)


@numba.njit(nogil=True, cache=True)
def _seed(seed):
  np.random.seed(seed)


# ----- the search -------------------------------------------------------------------------
def _arrays(graph: NativeDelayGraph):
  return (graph.cost, graph.preds_ptr, graph.preds, graph.pred_bytes, graph.speed,
          graph.bandwidth, graph.latency)


def score(graph: NativeDelayGraph, placement: np.ndarray, order: np.ndarray
          ) -> tuple[float, np.ndarray, np.ndarray]:
  """(makespan, op starts, op ends) of a placement and topological order, float32."""
  num_ops = graph.num_ops
  start, end = np.zeros(num_ops, np.float32), np.zeros(num_ops, np.float32)
  makespan, _ = _score(np.asarray(order, np.int64), np.asarray(placement, np.int64), -1, 0,
                       num_ops, *_arrays(graph), start, end,
                       np.zeros(graph.num_devices, np.float32))
  return float(makespan), start, end


def polish(problem: performance.Problem, placement: np.ndarray, order: np.ndarray,
           seed: int = 0, evals: int = 1_000_000, deadline: float = np.inf,
           graph: NativeDelayGraph | None = None,
           should_stop: Callable[[], bool] | None = None,
           exact: ExactMoves = ExactMoves()) -> PolishResult:
  """The iterated insertion search from a placement and op order (the module doc), for at
  most `evals` evaluations, until `time.perf_counter()` reaches `deadline` or `should_stop()`
  turns true (an exact solver's proof), or SIGINT / SIGTERM asks the run to stop. With a
  deadline and `exact.moves`, every `WINDOW_AFTER_KICKS` kicks without a better schedule (or
  `exact.every_seconds`) one of them, in turn, re-solves part of the best schedule exactly
  (`window_solve`, where it applies)."""
  started = time.perf_counter()
  graph = graph or build_native_delay_graph(problem.graph, problem.devices)
  num_ops, num_devices = graph.num_ops, graph.num_devices
  order = np.asarray(delay_reference.priority_topological_order(
      problem.graph, chromosome_lib.order_priorities(np.asarray(order))), np.int64)
  placement = np.asarray(placement, np.int64).copy()
  position = np.empty(num_ops, np.int64)
  position[order] = np.arange(num_ops)
  start, end = np.zeros(num_ops, np.float32), np.zeros(num_ops, np.float32)
  free = np.zeros(num_devices, np.float32)
  scratch = (np.zeros(num_ops, np.float32), np.zeros(num_ops, np.int64),
             np.zeros(num_devices, np.int64))
  bound = np.float32(bounds.target(bounds.structural_lower_bound(problem)))  # Met: proven.
  arrays = _arrays(graph)
  links = (graph.preds_ptr, graph.preds, graph.succs_ptr, graph.succs)
  _seed(seed)
  makespan, total = _score(order, placement, -1, 0, num_ops, *arrays, start, end, free)
  start_makespan = float(makespan)
  best = (makespan, total, order.copy(), placement.copy())
  evaluations = moves = kicks = stale = 0
  solved_windows = improving_windows = 0
  windows = bool(exact.moves) and np.isfinite(deadline) and window_solve.applies(graph)
  last_exact = time.perf_counter()
  rng = np.random.default_rng(seed)
  stop_reason = "budget"
  while True:
    if best[0] <= bound:
      stop_reason = "bound"
      break
    if time.perf_counter() >= deadline:
      stop_reason = "time"
      break
    if cli.stop_requested() or (should_stop is not None and should_stop()):
      stop_reason = "stopped"
      break
    if evaluations >= evals:
      break
    budget = min(SLICE_EVALS, evals - evaluations)
    makespan, total, spent, accepted, settled = _descend(
        order, position, placement, budget, graph.cost, graph.preds_ptr,
        graph.preds, graph.pred_bytes, graph.succs_ptr, graph.succs, graph.speed,
        graph.bandwidth, graph.latency, bound, start, end, free, *scratch)
    evaluations += spent
    moves += accepted
    if makespan < best[0]:
      stale = 0
    if makespan <= best[0]:  # Equal makespans walk the plateau.
      best = (makespan, total, order.copy(), placement.copy())
    due = (settled and stale >= WINDOW_AFTER_KICKS
           or time.perf_counter() - last_exact >= exact.every_seconds)
    if windows and due and best[0] > bound:
      stale = 0
      solved_windows += 1
      move = _EXACT_MOVES[exact.moves[(solved_windows - 1) % len(exact.moves)]]
      resolved = move(graph, best, rng, deadline, seed + solved_windows, exact)
      last_exact = time.perf_counter()
      if resolved is not None:
        improving_windows += 1
        order[:], placement[:] = resolved
        position[order] = np.arange(num_ops)
        continue  # Descend from the better schedule.
    if settled and best[0] > bound:
      stale += 1
      order[:], placement[:] = best[2], best[3]
      position[order] = np.arange(num_ops)
      _kick(order, position, placement, KICK_OPS, *links, num_devices, graph.cost,
            graph.pred_bytes, graph.speed, graph.bandwidth, graph.latency, start, end, free)
      kicks += 1
  return PolishResult(placement=best[3], order=best[2], makespan=float(best[0]),
                      start_makespan=start_makespan, evaluations=evaluations, moves=moves,
                      kicks=kicks, windows=solved_windows, improving_windows=improving_windows,
                      seconds=time.perf_counter() - started, stop_reason=stop_reason)


def _exact_move(graph: NativeDelayGraph, best, rng: np.random.Generator, deadline: float,
                seed: int, exact: ExactMoves, choose: Callable
                ) -> tuple[np.ndarray, np.ndarray] | None:
  """The ops `choose(graph, placement, critical, by_start, rng)` frees in the best schedule
  (a mask, and the devices they may take or None: any) re-solved by CP-SAT: (order by start,
  placement) when the delay model runs it better (`improves`), else None."""
  seconds = min(exact.seconds, deadline - time.perf_counter())
  if seconds <= 0.05:
    return None
  order, placement = best[2].copy(), best[3].copy()
  makespan, start, end = score(graph, placement, order)
  critical = _critical_of(graph, order, placement, start, end, makespan)
  by_start = order[np.argsort(start[order], kind="stable")]
  free, devices = choose(graph, placement, critical, by_start, rng)
  resolved = window_solve.resolve(graph, window_solve.Incumbent(placement, by_start, start, end),
                                  free, seconds, seed, devices=devices, compact=exact.compact)
  return _if_better(graph, resolved, makespan, end, exact.compact)


def _window_move(graph: NativeDelayGraph, best, rng: np.random.Generator, deadline: float,
                 seed: int, exact: ExactMoves = ExactMoves()
                 ) -> tuple[np.ndarray, np.ndarray] | None:
  """The best schedule's window around one of its critical ops (drawn), re-solved."""
  def choose(graph, placement, critical, by_start, rng):
    centre = int(rng.choice(np.flatnonzero(critical)))
    return window_solve.window(by_start, centre, WINDOW_OPS), None
  return _exact_move(graph, best, rng, deadline, seed, exact, choose)


def improves(makespan: float, end: np.ndarray, old_makespan: float, old_end: np.ndarray,
             compact: bool) -> bool:
  """Whether a schedule is better than the old one: a lower makespan, or with `compact` the
  same makespan and a lower sum of op ends."""
  if compact and makespan == old_makespan:
    return float(end.sum(dtype=np.float64)) < float(old_end.sum(dtype=np.float64))
  return makespan < old_makespan


def _if_better(graph: NativeDelayGraph, resolved, makespan: float, end: np.ndarray,
               compact: bool) -> tuple[np.ndarray, np.ndarray] | None:
  """A re-solve's (order by start, placement) when the delay model runs it better than the
  incumbent (`makespan`, `end`), else None."""
  if resolved is None:
    return None
  new_placement, new_order, _ = resolved
  new_makespan, new_start, new_end = score(graph, new_placement, new_order)
  if not improves(new_makespan, new_end, makespan, end, compact):
    return None
  return new_order[np.argsort(new_start[new_order], kind="stable")], new_placement


def _critical_of(graph: NativeDelayGraph, order: np.ndarray, placement: np.ndarray,
                 start: np.ndarray, end: np.ndarray, makespan: float) -> np.ndarray:
  num_ops, num_devices = graph.num_ops, graph.num_devices
  return _critical(order, placement, start, end, np.float32(makespan), graph.succs_ptr,
                   graph.succs, graph.preds_ptr, graph.preds, graph.pred_bytes,
                   graph.bandwidth, graph.latency, np.zeros(num_ops, np.float32),
                   np.zeros(num_ops, np.int64), np.zeros(num_devices, np.int64))


def critical_pair(graph: NativeDelayGraph, placement: np.ndarray, critical: np.ndarray,
                  rng: np.random.Generator) -> tuple[int, int]:
  """Two devices to re-solve together, drawn from the critical path: the ends of a transfer
  between two critical ops (its two devices could run the pair without it), else a critical
  op's device and any other."""
  pairs = set()
  for dst in np.flatnonzero(critical):
    for k in range(graph.preds_ptr[dst], graph.preds_ptr[dst + 1]):
      src = int(graph.preds[k])
      if critical[src] and placement[src] != placement[dst]:
        pairs.add((min(placement[src], placement[dst]), max(placement[src], placement[dst])))
  if pairs and rng.random() < 0.5:
    a, b = sorted(pairs)[int(rng.integers(len(pairs)))]
    return int(a), int(b)
  a = int(placement[rng.choice(np.flatnonzero(critical))])
  others = np.delete(np.arange(graph.num_devices), a)
  return a, int(rng.choice(others))


def _pair_move(graph: NativeDelayGraph, best, rng: np.random.Generator, deadline: float,
               seed: int, exact: ExactMoves = ExactMoves()
               ) -> tuple[np.ndarray, np.ndarray] | None:
  """Every op of two devices drawn by `critical_pair` re-placed between them and re-ordered
  over the whole horizon, the other ops on their devices in their order."""
  def choose(graph, placement, critical, by_start, rng):
    pair = np.asarray(critical_pair(graph, placement, critical, rng))
    return np.isin(placement, pair), pair
  return _exact_move(graph, best, rng, deadline, seed, exact, choose)


_EXACT_MOVES = {"window": _window_move, "pair": _pair_move}
