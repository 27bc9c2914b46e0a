"""The delay model, batched in JAX: the batched stand-in for the Doppler simulator.

Semantics (`reference_models.simulate_delay` is the readable version): only the placement
matters. Ops are taken in the graph's topological order; op v on device d starts as soon as d
has finished the ops before it in that order and every input has arrived (a data edge across
devices delivers at the producer's end + latency + bytes / bandwidth, using the largest tensor
v reads from that producer; transfers never contend; control edges deliver at the producer's
end), and takes cost / speed[d]. A zero-time op occupies no device time.

This is the list schedulers' delay model (`regal.baselines.list_scheduling.simulate_in_order`)
with a fixed order, and the Doppler simulator's semantics except that Doppler serves a device's
ops first come, first served instead of in topological order. On the Doppler graphs its
makespans rank placements like the Doppler simulator's (Spearman 0.85 on FFNN and 0.77 on the
transformer block, over perturbed critical-path placements) where the WC model, whose transfers
queue on links, does not (0.25 on FFNN); so batched searches (BRKGA, local search, Doppler's
REINFORCE) score doppler problems with it and the reference model re-scores their answers.

One `lax.scan` over ops, `vmap`ped over the population: O(o * (K + D)) per chromosome.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from datasets.devices import DeviceSpec
from datasets.graph import Graph


@struct.dataclass
class DelayGraph:
  order: np.ndarray  # [o] ops in topological order
  pred_index: np.ndarray  # [o, K] distinct predecessors (padding: masked)
  pred_mask: np.ndarray  # [o, K]
  pred_bytes: np.ndarray  # [o, K] largest tensor read from the predecessor; -1: control only
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
  for (src, dst), size in sorted(largest.items()):
    preds[dst].append((src, size))
  width = max([len(p) for p in preds] + [1])
  pred_index = np.zeros((graph.num_ops, width), np.int32)
  pred_mask = np.zeros((graph.num_ops, width), bool)
  pred_bytes = np.zeros((graph.num_ops, width), dtype)
  for v, entries in enumerate(preds):
    for k, (src, size) in enumerate(entries):
      pred_index[v, k], pred_mask[v, k], pred_bytes[v, k] = src, True, size
  eye = np.eye(devices.num_devices, dtype=bool)
  return DelayGraph(order=np.asarray(graph.topological_order, np.int32), pred_index=pred_index,
                    pred_mask=pred_mask, pred_bytes=pred_bytes,
                    cost=np.asarray(graph.compute_cost, dtype),
                    speed=np.asarray(devices.speed, dtype),
                    latency=np.asarray(devices.latency, dtype),
                    bandwidth=np.where(eye, 1.0, devices.bandwidth).astype(dtype))


def simulate(g: DelayGraph, placement: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
  """(makespan [], end times [o]) of one placement [o]."""
  num_devices = g.speed.shape[0]
  dtype = g.cost.dtype

  def step(carry, op):
    free, end = carry
    device = placement[op]
    preds, mask, size = g.pred_index[op], g.pred_mask[op], g.pred_bytes[op]
    src = placement[preds]
    delay = g.latency[src, device] + jnp.maximum(size, 0) / g.bandwidth[src, device]
    delay = jnp.where((src == device) | (size < 0), 0, delay)
    ready = jnp.max(jnp.where(mask, end[preds] + delay, 0), initial=0).astype(dtype)
    duration = g.cost[op] / g.speed[device]
    busy = duration > 0
    start = jnp.where(busy, jnp.maximum(free[device], ready), ready)
    finish = start + duration
    free = free.at[device].set(jnp.where(busy, finish, free[device]))
    return (free, end.at[op].set(finish)), None

  initial = (jnp.zeros(num_devices, dtype), jnp.zeros(g.cost.shape[0], dtype))
  (_, end), _ = jax.lax.scan(step, initial, g.order)
  return jnp.max(end, initial=0).astype(dtype), end


def makespan_batch(g: DelayGraph, placement: jnp.ndarray) -> jnp.ndarray:
  """Makespans [P] of placements [P, o]."""
  return jax.vmap(lambda p: simulate(g, p)[0])(placement)
