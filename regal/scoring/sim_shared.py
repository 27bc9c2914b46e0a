"""Pieces both JAX performance models share: a placement's memory plan and the work-list walk.

Both models walk the same work lists (`regal.scoring.sim_graph`) with the same state layout for
requirements (`pending`) and tensor uses (`uses_left`), flat over the population (see
`regal.scoring.ranked_sets.set_flat`); they differ in how tasks are chosen and timed.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from regal.scoring.ranked_sets import gather_flat, set_flat
from regal.scoring.sim_graph import REQ, SENDER, USE, SimGraph


class MemoryPlan(NamedTuple):
  home: jnp.ndarray  # [T] device of each tensor's producer
  needs_transfer: jnp.ndarray  # [T, D] a consumer on device j, producer elsewhere
  uses_left: jnp.ndarray  # [T, D] uses of t on j: consumer edges there, plus sends from home
  end_release: jnp.ndarray  # [O] bytes an op frees when it ends: extra memory, unused outputs


def memory_plan(graph: SimGraph, placement: jnp.ndarray) -> MemoryPlan:
  """What a placement implies for transfers and memory (one chromosome, before the loop)."""
  num_ops, num_tensors = graph.op_mask.shape[0], graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  home = placement[graph.tensor_producer]
  consumer_device = placement[graph.data_edge_consumer]
  edge_uses = jnp.zeros(num_tensors * num_devices, jnp.int32).at[
      graph.data_edge_tensor * num_devices + consumer_device].add(
          graph.data_edge_mask.astype(jnp.int32)).reshape(num_tensors, num_devices)
  at_home = jnp.arange(num_devices, dtype=jnp.int32)[None, :] == home[:, None]
  needs_transfer = (edge_uses > 0) & ~at_home
  uses_left = edge_uses + jnp.where(at_home, needs_transfer.sum(axis=1, keepdims=True), 0)
  unused_at_home = uses_left[jnp.arange(num_tensors), home] == 0
  end_release = graph.extra_memory + jnp.zeros(num_ops, graph.extra_memory.dtype).at[
      graph.tensor_producer].add(jnp.where(unused_at_home, graph.tensor_size, 0))
  return MemoryPlan(home, needs_transfer, uses_left, end_release)


class Chunk(NamedTuple):
  valid: jnp.ndarray  # [P, K]
  kind: jnp.ndarray
  tensor: jnp.ndarray
  op: jnp.ndarray
  n_always: jnp.ndarray
  n_local: jnp.ndarray


def read_chunk(graph: SimGraph, work_pos: jnp.ndarray, work_end: jnp.ndarray,
               chunk: int) -> Chunk:
  """The next `chunk` entries of each chromosome's current work range."""
  index = work_pos[:, None] + jnp.arange(chunk, dtype=jnp.int32)
  entry = graph.work[jnp.minimum(index, graph.work.shape[0] - 1)]
  return Chunk(index < work_end[:, None], entry[..., 0], entry[..., 1], entry[..., 2],
               entry[..., 3], entry[..., 4])


def release_uses(graph: SimGraph, c: Chunk, uses_left: jnp.ndarray, resident: jnp.ndarray,
                 here: jnp.ndarray, sender: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
  """USE entries (inputs of an op that ended on `here`) and SENDER entries (a transfer that
  left `sender`) each remove one use; a tensor's last use on a device frees its bytes there.

  One chunk comes from one list, so all its use entries concern one device, and each names a
  different tensor.
  """
  num_tensors, num_devices = graph.tensor_size.shape[0], graph.num_devices
  is_use = c.valid & ((c.kind == USE) | (c.kind == SENDER))
  device = jnp.where((c.valid & (c.kind == SENDER)).any(axis=1), sender, here)  # [P]
  slot = c.tensor * num_devices + device[:, None]
  width = num_tensors * num_devices
  after = gather_flat(uses_left, width, slot) - c.n_local  # Read once, then write once.
  uses_left = set_flat(uses_left, width, slot, after, is_use)
  freed = is_use & (after == 0)
  freed_bytes = jnp.sum(jnp.where(freed, graph.tensor_size[c.tensor], 0), axis=1)
  on_device = jnp.arange(num_devices, dtype=jnp.int32) == device[:, None]
  return uses_left, resident - jnp.where(on_device, freed_bytes[:, None], 0)


def satisfy(graph: SimGraph, c: Chunk, pending: jnp.ndarray, op_device: jnp.ndarray,
            here: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """REQ entries meet their op's control requirements, and its data requirements if the op
  runs on `here`. Returns (pending, which entries met any, which made their op ready)."""
  num_ops = graph.op_mask.shape[0]
  met = jnp.where(c.valid & (c.kind == REQ),
                  c.n_always + jnp.where(op_device == here[:, None], c.n_local, 0), 0)
  satisfies = met > 0
  after = gather_flat(pending, num_ops, c.op) - met
  pending = set_flat(pending, num_ops, c.op, after, satisfies)
  return pending, satisfies, satisfies & (after == 0)
