"""The list-scheduling decoder: random keys -> a placement and op order by earliest finish time.

The direct decoder (`regal.scoring.chromosome.decode`) reads a placement off the device keys, so
most random chromosomes are poor schedules and BRKGA spends its budget finding sensible ones. This
decoder gives every chromosome a schedule's structure (the decoders of the memetic genetic
algorithms for DAG scheduling): the op keys are priorities; a list scheduler repeatedly takes
the ready op of largest key (ties: the lower id) and puts it on the device where it finishes
earliest under the delay model (inputs arrive after latency + bytes / bandwidth from another
device; a device runs one op at a time, in list order). The op's device keys bias that choice:
device d costs

    finish_d + bias * (1 - key[op, d]) * mean_duration

and the cheapest wins (ties: the lower device). With bias 0 the keys only break ties and the
decoder is EFT list scheduling; a large bias gives back the direct decoder's argmax. A device
key of exactly 1 places the op there outright (the first such device): random keys are below 1,
while `chromosome.encode` writes 1 for a seed's device, so seeds (critical path, HEFT, GP + DFS,
...) keep their placement under this decoder, children inherit such rows from them gene by
gene, and a local device move (which trades the row's largest key with the target's) moves a
placed op to its new device. The decoded
op priorities are the list order (first scheduled: 1, falling evenly), so every model runs the
ops in the order the decoder planned them; transfer priorities pass through unchanged.

The chromosome layout is the direct decoder's, so seeds, policies and the local moves work on
either. `decode_reference` is the readable version; `decode` (numba, bit-exact with it in
float32) is what searches call.
"""
from __future__ import annotations

import numba
import numpy as np

from regal_datasets import analysis
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import native_common
from regal.scoring.native_common import heap_key, heap_pop, heap_push, link_time
from regal.scoring.delay.native import NativeDelayGraph, reset_ready

DEFAULT_BIAS = 0.0


def mean_duration(graph: NativeDelayGraph) -> np.float32:
  """The unit of the device-key bias: the mean op duration over ops and devices."""
  if graph.num_ops == 0:
    return np.float32(0)
  return np.float32(np.mean(graph.cost) * np.mean(np.float32(1) / graph.speed))


def decode_reference(graph: NativeDelayGraph, chromosome: np.ndarray,
                     layout: chromosome_lib.Layout, bias: float = DEFAULT_BIAS
                     ) -> chromosome_lib.Decoded:
  """One chromosome [n], readable and slow: (placement, list-order priorities, transfer
  priorities), in float32 like `decode`."""
  f32 = np.float32
  chromosome = np.asarray(chromosome, f32)
  keys = chromosome[layout.affinity_slice].reshape(layout.num_ops, layout.num_devices)
  priority = chromosome[layout.priority_slice]
  unit = f32(f32(bias) * mean_duration(graph))
  placement = np.full(layout.num_ops, -1, np.int32)
  end = np.zeros(layout.num_ops, f32)
  free = np.zeros(layout.num_devices, f32)

  def start_on(op: int, device: int) -> tuple[f32, f32]:
    """(start, duration) of `op` on `device` after the ops already placed."""
    arrival = f32(0)
    for k in range(graph.preds_ptr[op], graph.preds_ptr[op + 1]):
      src, size = graph.preds[k], graph.pred_bytes[k]
      arrival = max(arrival, end[src] + analysis.link_time(
          graph.latency, graph.bandwidth, size, placement[src], device))
    duration = graph.cost[op] / graph.speed[device]
    return (max(free[device], arrival) if duration > 0 else arrival), duration

  preds = [set(graph.preds[graph.preds_ptr[v]:graph.preds_ptr[v + 1]].tolist())
           for v in range(layout.num_ops)]
  order: list[int] = []
  while len(order) < layout.num_ops:
    ready = [v for v in range(layout.num_ops) if placement[v] < 0 and preds[v] <= set(order)]
    op = min(ready, key=lambda v: (-priority[v], v))
    allowed = range(layout.num_devices)
    if np.any(keys[op] == 1):
      allowed = [int(np.flatnonzero(keys[op] == 1)[0])]
    costs = {}
    for device in allowed:
      start, duration = start_on(op, device)
      costs[device] = (start + duration) + unit * (f32(1) - keys[op, device])
    device = min(costs, key=lambda d: (costs[d], d))
    start, duration = start_on(op, device)
    end[op] = start + duration
    if duration > 0:
      free[device] = end[op]
    placement[op] = device
    order.append(op)
  transfer = chromosome[layout.transfer_slice].reshape(layout.num_tensors, layout.num_devices)
  return chromosome_lib.Decoded(
      placement=placement, op_priority=chromosome_lib.order_priorities(
          np.asarray(order)).astype(np.float32), transfer_priority=transfer)


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _decode(cost, in_degree, preds_ptr, preds, pred_bytes, succs_ptr, succs, speed, bandwidth,
            latency, keys, priority_bits, unit, placement_out, priority_out):
  population, num_ops = priority_bits.shape
  num_devices = speed.shape[0]
  heap = np.empty(max(num_ops, 1), np.int64)
  heap_size = np.zeros(1, np.int64)
  missing = np.empty(num_ops, np.int32)
  end = np.empty(num_ops, np.float32)
  free = np.empty(num_devices, np.float32)
  arrival = np.empty(num_devices, np.float32)
  scale = np.float64(max(num_ops, 1))
  for p in range(population):
    place = placement_out[p]
    bits = priority_bits[p]
    reset_ready(in_degree, bits, heap, heap_size, missing, free)
    position = 0
    while heap_size[0] > 0:
      op = np.int32(heap_pop(heap, heap_size, num_ops, 0) & 0x7FFFFFFF)
      for d in range(num_devices):
        arrival[d] = np.float32(0)
      for k in range(preds_ptr[op], preds_ptr[op + 1]):
        src = preds[k]
        for d in range(num_devices):
          time = end[src]
          if place[src] != d and pred_bytes[k] >= 0:
            time = time + link_time(latency, bandwidth, pred_bytes[k], place[src], d)
          arrival[d] = max(arrival[d], time)
      forced = -1
      for d in range(num_devices):
        if keys[p, op, d] == 1:
          forced = d
          break
      best = -1
      best_cost = np.float32(0)
      for d in range(num_devices):
        if forced >= 0 and d != forced:
          continue
        duration = cost[op] / speed[d]
        start = max(free[d], arrival[d]) if duration > 0 else arrival[d]
        value = (start + duration) + unit * (np.float32(1) - keys[p, op, d])
        if best < 0 or value < best_cost:
          best, best_cost = d, value
      duration = cost[op] / speed[best]
      start = max(free[best], arrival[best]) if duration > 0 else arrival[best]
      end[op] = start + duration
      if duration > 0:
        free[best] = end[op]
      place[op] = best
      # `chromosome.order_priorities`, computed the same way (float64, then rounded).
      priority_out[p, op] = np.float32(1.0 - np.float64(position) / scale)
      position += 1
      for k in range(succs_ptr[op], succs_ptr[op + 1]):
        succ = succs[k]
        missing[succ] -= 1
        if missing[succ] == 0:
          heap_push(heap, heap_size, num_ops, 0, heap_key(bits[succ], succ))


def decode(graph: NativeDelayGraph, chromosomes: np.ndarray, layout: chromosome_lib.Layout,
           bias: float = DEFAULT_BIAS, threads: int | None = None) -> chromosome_lib.Decoded:
  """Chromosomes [P, n] -> placements [P, o] int32, list-order priorities [P, o] and transfer
  priorities [P, t, D] (module doc); split over `threads` (default: every core)."""
  chromosomes = native_common.argument(chromosomes, np.float32)
  population = chromosomes.shape[0]
  keys = np.ascontiguousarray(chromosomes[:, layout.affinity_slice].reshape(
      population, layout.num_ops, layout.num_devices))
  priority_bits = np.ascontiguousarray(chromosomes[:, layout.priority_slice]).view(np.int32)
  unit = np.float32(np.float32(bias) * mean_duration(graph))
  placement = np.zeros((population, layout.num_ops), np.int32)
  priority = np.zeros((population, layout.num_ops), np.float32)

  def run(rows: slice) -> None:
    _decode(graph.cost, graph.in_degree, graph.preds_ptr, graph.preds, graph.pred_bytes,
            graph.succs_ptr, graph.succs, graph.speed, graph.bandwidth, graph.latency,
            keys[rows], priority_bits[rows], unit, placement[rows], priority[rows])

  native_common.run_split(run, population, threads)
  transfer = chromosomes[:, layout.transfer_slice].reshape(population, layout.num_tensors,
                                                           layout.num_devices)
  return chromosome_lib.Decoded(placement=placement, op_priority=priority,
                                transfer_priority=transfer)
