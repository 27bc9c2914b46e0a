"""The Doppler simulator as a compiled host event loop: exact and batched.

Semantics: exactly those of `regal.scoring.doppler.reference.simulate_doppler` (the Doppler
repository's SimPy model, reproduced there), tie order included. Equal event times are frequent on
the Doppler graphs (costs are a few powers of two), and SimPy breaks them by the order in which it
scheduled the events, so this kernel replays SimPy's own queue instead of a "ready time, then op id"
rule: a binary heap of (time, event id) with the event id counting every schedule call that can
matter. The SimPy processes and what their events do when SimPy processes them:

* op v's inputs (an `AllOf` over one transfer process per distinct in-neighbour) complete:
  COND(v). v asks for its device: it joins the device's FIFO queue, and if the device has no
  user the queue's head is granted at once (REQ(head) is scheduled);
* REQ(v): v starts; a timeout TOUT_C(v) is scheduled after its duration;
* TOUT_C(v): v ends; the device loses its user at once, and two events are scheduled back to
  back: the release (it grants the queue's head) and `finished[v]` (it starts v's transfer
  processes, each a timeout TOUT_T after its delay). Nothing can come between two consecutive
  event ids, so one event RELFIN(v) does both;
* TOUT_T(e): the transfer process ends, which schedules its process event PROC_T(e);
* PROC_T(e): one input of e's consumer has delivered; the last one schedules COND. Each
  PROC_T is scheduled for the instant of its TOUT_T, so PROC_Ts run in their TOUT_Ts' order:
  the kernel counts a delivery at its TOUT_T and schedules only the last one's PROC_T (the
  others would only count, and leaving them out reorders nothing).

Events nothing waits on (a compute process's end, transfer processes of repeated (source, target)
pairs that no op waits for) are left out: they take event ids but never reorder the others. Events
for the current instant go to a FIFO instead of the heap: each was scheduled after every heap event
at that instant, so SimPy serves those first and the FIFO's in its own order; the heap keeps only
timeouts with a positive delay, by event id (what an event does is looked up by its id), and an op's
transfers wait there as one run sorted by (time, id) of which only the first is on the heap (a k-way
merge: the same order on a heap of ops instead of transfers), and a run's transfers at one instant
leave the heap together (their ids are consecutive, so nothing comes between them). The events left
out do count for the clock's last value: the makespan is the latest op end or transfer arrival,
repeated pairs included.

Times are float64 sums of float64 durations, as SimPy's clock adds Python numbers (exact for
the integer costs of Doppler files while sums stay below 2**53). `simulate` scores a
population over the cores (the kernel releases the GIL): the batched fitness of
`--model doppler` (through `regal.scoring.models`).
"""
from __future__ import annotations

import dataclasses

import numba
import numpy as np

from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring import native_common
from regal.scoring.native_common import link_time
from regal.scoring.doppler.reference import networkx_edge_order

COND, REQ, TOUT_C, RELFIN, TOUT_T, PROC_T = range(6)


@dataclasses.dataclass(frozen=True)
class DopplerGraph:
  """A graph and its devices as flat arrays: what the kernel reads."""
  compute_cost: np.ndarray  # [O] float64
  in_count: np.ndarray  # [O] int32 awaited deliveries (one per distinct in-neighbour)
  out_ptr: np.ndarray  # [O + 1] deliveries out_ptr[v]..out_ptr[v+1] leave v (creation order)
  delivery_dst: np.ndarray  # [E'] int32 consumer
  delivery_bytes: np.ndarray  # [E'] float64; -1: a control edge (no transfer time)
  edge_src: np.ndarray  # [E] int32 every edge (the readable loops' clock's last value)
  edge_dst: np.ndarray  # [E] int32
  edge_bytes: np.ndarray  # [E] float64; -1: control
  # Edges whose arrival no event marks: a repeated (source, target) pair's other tensors. The
  # kernel's clock already holds every other arrival (a delivery's TOUT_T, a control edge's
  # source end), so only these can move the makespan past the last event.
  unmarked_edges: np.ndarray  # [E''] int32 indices into edge_*
  speed: np.ndarray  # [D] float64
  bandwidth: np.ndarray  # [D, D] float64
  latency: np.ndarray  # [D, D] float64

  @property
  def num_ops(self) -> int:
    return self.compute_cost.shape[0]

  @property
  def num_devices(self) -> int:
    return self.speed.shape[0]


def build_doppler_graph(graph: Graph, devices: DeviceSpec) -> DopplerGraph:
  carried = np.where(graph.edge_is_control, -1.0, graph.edge_bytes).astype(np.float64)
  # SimPy's creation order; an op waits for the last-created process of each pair.
  kept: dict[tuple[int, int], int] = {}
  for src, dst, edge in networkx_edge_order(graph):
    kept[(src, dst)] = edge
  by_source = sorted(((src, position, edge) for position, ((src, _), edge)
                      in enumerate(kept.items())))
  edges = np.asarray([edge for _, _, edge in by_source], np.int64)
  sources = np.asarray([src for src, _, _ in by_source], np.int64)
  out_ptr = np.zeros(graph.num_ops + 1, np.int32)
  np.cumsum(np.bincount(sources, minlength=graph.num_ops), out=out_ptr[1:])
  delivery_dst = np.asarray(graph.edge_dst, np.int32)[edges] if len(edges) else np.zeros(
      0, np.int32)
  unmarked = np.ones(graph.num_edges, bool)
  unmarked[edges] = False
  unmarked &= carried >= 0
  return DopplerGraph(
      compute_cost=np.ascontiguousarray(graph.compute_cost, np.float64),
      in_count=np.bincount(delivery_dst, minlength=graph.num_ops).astype(np.int32),
      out_ptr=out_ptr,
      delivery_dst=delivery_dst,
      delivery_bytes=np.ascontiguousarray(carried[edges] if len(edges) else np.zeros(0)),
      edge_src=np.asarray(graph.edge_src, np.int32),
      edge_dst=np.asarray(graph.edge_dst, np.int32), edge_bytes=np.ascontiguousarray(carried),
      unmarked_edges=np.flatnonzero(unmarked).astype(np.int32),
      speed=np.ascontiguousarray(devices.speed, np.float64),
      bandwidth=np.ascontiguousarray(devices.bandwidth, np.float64),
      latency=np.ascontiguousarray(devices.latency, np.float64))


@numba.njit(inline="always")
def _before(time_a, eid_a, time_b, eid_b):
  return time_a < time_b or (time_a == time_b and eid_a < eid_b)


@numba.njit(inline="always")
def _schedule(times, eids, size, time, eid):
  """Pushes an event on the heap (what it does is looked up by its id); returns the new
  size."""
  i = size
  while i > 0:
    parent = (i - 1) >> 1
    if not _before(time, eid, times[parent], eids[parent]):
      break
    times[i], eids[i] = times[parent], eids[parent]
    i = parent
  times[i], eids[i] = time, eid
  return size + 1


@numba.njit(inline="always")
def _replace_first(times, eids, size, time, eid):
  """Puts an event in place of the heap's first (read before the call)."""
  i = 0
  while True:
    child = 2 * i + 1
    if child >= size:
      break
    if child + 1 < size and _before(times[child + 1], eids[child + 1], times[child],
                                    eids[child]):
      child += 1
    if not _before(times[child], eids[child], time, eid):
      break
    times[i], eids[i] = times[child], eids[child]
    i = child
  times[i], eids[i] = time, eid


@numba.njit(inline="always")
def _now_push(now_kinds, now_args, now_first, now_count, kind, arg):
  """Appends an event for the current instant to the FIFO ring; returns the new count."""
  slot = now_first + now_count
  if slot >= now_kinds.shape[0]:
    slot -= now_kinds.shape[0]
  now_kinds[slot], now_args[slot] = kind, arg
  return now_count + 1


@numba.njit(inline="always")
def _delay(num_bytes, src, dst, latency, bandwidth):
  if src == dst or num_bytes < 0:
    return 0.0
  return link_time(latency, bandwidth, num_bytes, src, dst)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _simulate(compute_cost, in_count, out_ptr, delivery_dst, delivery_bytes,
              edge_src, edge_dst, edge_bytes, unmarked_edges, speed, bandwidth, latency, placement,
              makespan_out, start_out, end_out):
  population, num_ops = placement.shape
  num_devices = speed.shape[0]
  num_deliveries = delivery_dst.shape[0]
  capacity = num_ops + num_deliveries + 1
  times = np.empty(capacity, np.float64)
  eids = np.empty(capacity, np.int32)
  # What each heap event does, by event id (ids count heap pushes, at most one per op and
  # delivery): the heap moves two numbers per level instead of four.
  event_kind = np.empty(capacity, np.int32)
  event_arg = np.empty(capacity, np.int32)
  # An op's transfers after its end form one sorted run (by (time, id)) of which only the
  # first waits on the heap: popping it puts the next in its place, one sift instead of a
  # push and a pop, on a heap of ops rather than of transfers.
  event_time = np.empty(capacity, np.float64)
  next_in_run = np.empty(capacity, np.int32)
  run = np.empty(max(1, num_deliveries), np.int32)
  now_kinds = np.empty(capacity, np.int32)
  now_args = np.empty(capacity, np.int32)
  missing = np.empty(num_ops, np.int32)
  queue_next = np.empty(num_ops, np.int32)
  queue_head = np.empty(num_devices, np.int32)
  queue_tail = np.empty(num_devices, np.int32)
  user = np.empty(num_devices, np.int32)
  end = np.empty(num_ops, np.float64)
  record = start_out.shape[0] > 0
  for p in range(population):
    place = placement[p]
    size = 0  # The heap: events after the current instant, by (time, event id).
    eid = 0  # Counts heap pushes: among equal times SimPy serves the earlier scheduled.
    # Events scheduled for the current instant, in event-id order: every one of them was
    # scheduled after the heap's events at this instant, so those run first.
    now_first = 0
    now_count = 0
    now = 0.0
    for v in range(num_ops):
      missing[v] = in_count[v]
      if in_count[v] == 0:
        now_kinds[now_count], now_args[now_count] = COND, v
        now_count += 1
    for d in range(num_devices):
      queue_head[d] = -1
      queue_tail[d] = -1
      user[d] = -1
    while size > 0 or now_count > 0:
      if size > 0 and (now_count == 0 or times[0] == now):
        now, first = times[0], eids[0]
        kind, arg = event_kind[first], event_arg[first]
        following = next_in_run[first]
        if kind == TOUT_T:
          # The run's next transfers at this instant are next in SimPy's order too: a run's
          # event ids are consecutive, and events for the current instant wait for the
          # heap's. All but the last are counted here; the last falls through below.
          while following >= 0 and event_time[following] == now:
            consumer = delivery_dst[arg]
            missing[consumer] -= 1
            if missing[consumer] == 0:
              now_count = _now_push(now_kinds, now_args, now_first, now_count, PROC_T, arg)
            arg = event_arg[following]
            following = next_in_run[following]
        if following >= 0:
          _replace_first(times, eids, size, event_time[following], following)
        else:
          size -= 1
          _replace_first(times, eids, size, times[size], eids[size])
      else:
        kind, arg = now_kinds[now_first], now_args[now_first]
        now_first += 1
        if now_first == capacity:
          now_first = 0
        now_count -= 1
      # What the event schedules: at most one event at this instant, and later ones.
      later_kind = -1
      if kind == PROC_T:
        later_kind, arg = COND, delivery_dst[arg]
      elif kind == TOUT_T:
        consumer = delivery_dst[arg]
        missing[consumer] -= 1
        if missing[consumer] == 0:
          later_kind = PROC_T
      elif kind == COND or kind == RELFIN:
        d = place[arg]
        if kind == COND:  # Join the device's queue, then SimPy's _trigger_put.
          queue_next[arg] = -1
          if queue_tail[d] < 0:
            queue_head[d] = arg
          else:
            queue_next[queue_tail[d]] = arg
          queue_tail[d] = arg
        head = queue_head[d]
        if user[d] < 0 and head >= 0:
          user[d] = head
          queue_head[d] = queue_next[head]
          if queue_head[d] < 0:
            queue_tail[d] = -1
          now_count = _now_push(now_kinds, now_args, now_first, now_count, REQ, head)
        if kind == RELFIN:  # finished[v]: its transfer processes wake in creation order.
          run_length = 0
          for delivery in range(out_ptr[arg], out_ptr[arg + 1]):
            delay = _delay(delivery_bytes[delivery], d, place[delivery_dst[delivery]],
                           latency, bandwidth)
            if now + delay == now:
              now_count = _now_push(now_kinds, now_args, now_first, now_count, TOUT_T, delivery)
            else:
              time = now + delay
              event_kind[eid], event_arg[eid], event_time[eid] = TOUT_T, delivery, time
              # Insertion sort by time; a later id goes after equal times.
              i = run_length
              while i > 0 and event_time[run[i - 1]] > time:
                run[i] = run[i - 1]
                i -= 1
              run[i] = eid
              run_length += 1
              eid += 1
          if run_length > 0:
            for i in range(run_length - 1):
              next_in_run[run[i]] = run[i + 1]
            next_in_run[run[run_length - 1]] = -1
            size = _schedule(times, eids, size, event_time[run[0]], run[0])
      elif kind == REQ:
        if record:
          start_out[p, arg] = now
        duration = compute_cost[arg] / speed[place[arg]]
        if now + duration == now:
          later_kind = TOUT_C
        else:
          event_kind[eid], event_arg[eid], next_in_run[eid] = TOUT_C, arg, -1
          size = _schedule(times, eids, size, now + duration, eid)
          eid += 1
      else:  # TOUT_C: the op ends and leaves its device at once.
        end[arg] = now
        user[place[arg]] = -1
        later_kind = RELFIN  # The release and finished[v]: consecutive, so one event.
      if later_kind >= 0:
        now_count = _now_push(now_kinds, now_args, now_first, now_count, later_kind, arg)
    # Events run in time order, so the clock's last value is the latest op end or marked
    # arrival.
    makespan = now
    if record:
      for v in range(num_ops):
        end_out[p, v] = end[v]
    for e in unmarked_edges:
      src = edge_src[e]
      arrival = end[src] + _delay(edge_bytes[e], place[src], place[edge_dst[e]], latency,
                                  bandwidth)
      makespan = max(makespan, arrival)
    makespan_out[p] = makespan


def simulate(graph: DopplerGraph, placement: np.ndarray, threads: int | None = None,
             record_times: bool = False):
  """Makespans [P] (float64, cost units) of placements [P, O]; with `record_times` also op
  starts and ends [P, O]. The population is split over `threads` (default: every core)."""
  placement = native_common.placement_argument(placement, graph.num_ops, graph.num_devices)
  population = placement.shape[0]
  makespan = np.empty(population, np.float64)
  shape = (population, graph.num_ops) if record_times else (0, 0)
  start, end = np.full(shape, np.nan), np.full(shape, np.nan)

  def run(rows: slice) -> None:
    _simulate(graph.compute_cost, graph.in_count, graph.out_ptr, graph.delivery_dst,
              graph.delivery_bytes, graph.edge_src, graph.edge_dst, graph.edge_bytes,
              graph.unmarked_edges, graph.speed,
              graph.bandwidth, graph.latency, placement[rows], makespan[rows],
              start[rows] if record_times else start, end[rows] if record_times else end)

  native_common.run_split(run, population, threads)
  return (makespan, start, end) if record_times else makespan
