"""The delay model, batched in JAX (the accelerator path; on a CPU `regal.scoring.delay.native`
scores it).

Semantics (`regal.scoring.delay.reference.simulate_delay` is the readable version): ops are taken in
the priority-driven topological order of their priorities (repeatedly the ready op of largest
priority, ties to the lower id); op v on device d starts as soon as d has finished the ops before it
in that order and every input has arrived (a data edge across devices delivers at the producer's end
+ latency + bytes / bandwidth, using the largest tensor v reads from that producer; transfers never
contend; control edges deliver at the producer's end), and takes cost / speed[d]. A zero-time op
occupies no device time. Priorities falling along the graph's topological order give the
placement-only model of the list schedulers (`regal.baselines.list_scheduling.simulate_in_order`
with that order).

This is the classic model of the task-scheduling literature (Sinnen's and Kasahara's benchmark
sets, whose optima `regal_experiments.task_graph_table` compares against). One `lax.scan` over the
schedule's steps (each picks the next op and times it), `vmap`ped over the population:
O(o * (o + K + D)) per chromosome.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from regal_datasets import analysis
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph


@struct.dataclass
class DelayGraph:
  pred_index: np.ndarray  # [o, K] distinct predecessors (padding: masked)
  pred_mask: np.ndarray  # [o, K]
  pred_bytes: np.ndarray  # [o, K] largest tensor read from the predecessor; -1: control only
  succ_index: np.ndarray  # [o, S] distinct successors (padding: index o, dropped)
  in_degree: np.ndarray  # [o] distinct predecessors
  cost: np.ndarray  # [o]
  speed: np.ndarray  # [D]
  latency: np.ndarray  # [D, D]
  bandwidth: np.ndarray  # [D, D] (diagonal 1: never used)


def build_delay_graph(graph: Graph, devices: DeviceSpec, dtype=np.float32) -> DelayGraph:
  largest: dict[tuple[int, int], float] = {}
  for src, dst, is_control, size in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(),
                                        graph.edge_is_control.tolist(),
                                        graph.edge_bytes.tolist()):
    carried = -1.0 if is_control else size
    largest[(src, dst)] = max(largest.get((src, dst), -1.0), carried)
  preds = [[] for _ in range(graph.num_ops)]
  succs = [[] for _ in range(graph.num_ops)]
  for (src, dst), size in sorted(largest.items()):
    preds[dst].append((src, size))
    succs[src].append(dst)
  width = max([len(p) for p in preds] + [1])
  succ_width = max([len(s) for s in succs] + [1])
  pred_index = np.zeros((graph.num_ops, width), np.int32)
  pred_mask = np.zeros((graph.num_ops, width), bool)
  pred_bytes = np.zeros((graph.num_ops, width), dtype)
  succ_index = np.full((graph.num_ops, succ_width), graph.num_ops, np.int32)
  for v, entries in enumerate(preds):
    for k, (src, size) in enumerate(entries):
      pred_index[v, k], pred_mask[v, k], pred_bytes[v, k] = src, True, size
  for v, entries in enumerate(succs):
    succ_index[v, :len(entries)] = entries
  eye = np.eye(devices.num_devices, dtype=bool)
  return DelayGraph(pred_index=pred_index, pred_mask=pred_mask, pred_bytes=pred_bytes,
                    succ_index=succ_index, in_degree=pred_mask.sum(axis=1).astype(np.int32),
                    cost=np.asarray(graph.compute_cost, dtype),
                    speed=np.asarray(devices.speed, dtype),
                    latency=np.asarray(devices.latency, dtype),
                    bandwidth=np.where(eye, 1.0, devices.bandwidth).astype(dtype))


def simulate(g: DelayGraph, placement: jnp.ndarray, op_priority: jnp.ndarray
             ) -> tuple[jnp.ndarray, jnp.ndarray]:
  """(makespan [], end times [o]) of one placement [o] and priorities [o]."""
  num_ops, num_devices = g.cost.shape[0], g.speed.shape[0]
  dtype = g.cost.dtype
  op_priority = jnp.asarray(op_priority, jnp.float32)

  def step(carry, _):
    free, end, waiting = carry
    # Ties to the lower id: argmax returns the first maximum.
    op = jnp.argmax(jnp.where(waiting == 0, op_priority, -jnp.inf))
    device = placement[op]
    preds, mask, size = g.pred_index[op], g.pred_mask[op], g.pred_bytes[op]
    src = placement[preds]
    delay = analysis.link_time(g.latency, g.bandwidth, size, src, device, xp=jnp)
    ready = jnp.max(jnp.where(mask, end[preds] + delay, 0), initial=0).astype(dtype)
    duration = g.cost[op] / g.speed[device]
    busy = duration > 0
    start = jnp.where(busy, jnp.maximum(free[device], ready), ready)
    finish = start + duration
    free = free.at[device].set(jnp.where(busy, finish, free[device]))
    waiting = waiting.at[op].set(-1).at[g.succ_index[op]].add(-1, mode="drop")
    return (free, end.at[op].set(finish), waiting), None

  initial = (jnp.zeros(num_devices, dtype), jnp.zeros(num_ops, dtype), g.in_degree)
  (_, end, _), _ = jax.lax.scan(step, initial, None, length=num_ops)
  return jnp.max(end, initial=0).astype(dtype), end


def makespan_batch(g: DelayGraph, placement: jnp.ndarray, op_priority: jnp.ndarray
                   ) -> jnp.ndarray:
  """Makespans [P] of placements and priorities [P, o]."""
  return jax.vmap(lambda p, q: simulate(g, p, q)[0])(placement, op_priority)
