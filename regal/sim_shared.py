"""Pieces both JAX performance models share: a placement's memory plan and the work-list walk.

Both models walk the same work lists (`regal.sim_graph`) with the same state layout for
requirements (`pending`) and tensor uses (`uses_left`), flat over the population (see
`regal.ranked_sets.set_flat`); they differ in how tasks are chosen and timed.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from regal.ranked_sets import first_occurrence, gather_flat, set_flat
from regal.sim_graph import CONTROL, DATA, SENDER, USE, SimGraph


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


def read_chunk(graph: SimGraph, work_pos: jnp.ndarray, work_end: jnp.ndarray,
               chunk: int) -> Chunk:
  """The next `chunk` entries of each chromosome's current work range."""
  index = work_pos[:, None] + jnp.arange(chunk, dtype=jnp.int32)
  entry = graph.work[jnp.minimum(index, graph.work.shape[0] - 1)]
  return Chunk(index < work_end[:, None], entry[..., 0], entry[..., 1], entry[..., 2])


def release_uses(graph: SimGraph, c: Chunk, uses_left: jnp.ndarray, resident: jnp.ndarray,
                 here: jnp.ndarray, sender: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
  """USE entries (inputs of an op that ended on `here`) and SENDER entries (a transfer that
  left `sender`) each remove one use; a tensor's last use on a device frees its bytes there.

  One chunk comes from one list, so all its use entries concern one device.
  """
  num_tensors, num_devices = graph.tensor_size.shape[0], graph.num_devices
  is_use = c.valid & ((c.kind == USE) | (c.kind == SENDER))
  device = jnp.where((c.valid & (c.kind == SENDER)).any(axis=1), sender, here)  # [P]
  slot = c.tensor * num_devices + device[:, None]
  width = num_tensors * num_devices
  same = ((slot[:, :, None] == slot[:, None, :]) & is_use[:, None, :]).sum(-1)
  after = gather_flat(uses_left, width, slot) - same  # Read once, then write once.
  uses_left = set_flat(uses_left, width, slot, after, is_use)
  freed = first_occurrence(slot, is_use) & (after == 0)
  freed_bytes = jnp.sum(jnp.where(freed, graph.tensor_size[c.tensor], 0), axis=1)
  on_device = jnp.arange(num_devices, dtype=jnp.int32) == device[:, None]
  return uses_left, resident - jnp.where(on_device, freed_bytes[:, None], 0)


def satisfy(graph: SimGraph, c: Chunk, pending: jnp.ndarray, op_device: jnp.ndarray,
            here: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """CONTROL entries, and DATA entries whose op runs on `here`, satisfy one requirement.

  Returns (pending, which entries satisfied, which entries made their op ready), an op made
  ready counted once even if it appears several times in the chunk.
  """
  num_ops = graph.op_mask.shape[0]
  satisfies = c.valid & ((c.kind == CONTROL) | ((c.kind == DATA) & (op_device == here[:, None])))
  hits = ((c.op[:, :, None] == c.op[:, None, :]) & satisfies[:, None, :]).sum(-1)
  after = gather_flat(pending, num_ops, c.op) - hits
  pending = set_flat(pending, num_ops, c.op, after, satisfies)
  return pending, satisfies, first_occurrence(c.op, satisfies) & (after == 0)
