"""Moves on a chromosome's genes: the one neighbourhood every climb uses.

A move is a few gene writes (indices and values), so it works under either decoder and keeps
every gene in [0, 1]; `apply_moves` turns a batch of moves into neighbour chromosomes. Every
function takes numpy or jnp arrays and answers in kind (like `chromosome.decode`): the
memetic climbers (`regal.search.local_moves`) run them compiled inside the search, the hill
climb and REGAL's local search (`regal.baselines.local_search`) on the host, with no compile.

* a device move of op v to device d swaps v's key for d with its largest key (under the direct
  decoder: v moves to d, nothing else changes);
* a cluster move takes v and the first members of a cluster of ops that share v's device to d
  together (device moves of each);
* an adjacent priority swap exchanges the priority keys of the ops at positions k and k + 1 of
  the priority order (so they trade places in it, and nothing else moves).

`enumerated_move_genes` numbers the single-op moves (device moves first, then swaps), so a
search can draw distinct moves.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from regal.scoring import chromosome as chromosome_lib


def _xp(array):
  return np if isinstance(array, np.ndarray) else jnp


def device_move_genes(chromosome, layout: chromosome_lib.Layout, op, device):
  """The (indices [..., 2], values [..., 2]) writes of moving `op` to `device`: its largest
  device key and its key for `device` trade places."""
  xp = _xp(chromosome)
  rows = chromosome[layout.affinity_slice].reshape(layout.num_ops, layout.num_devices)
  current = xp.argmax(rows[op], axis=-1)
  base = op * layout.num_devices
  return (xp.stack([base + current, base + device], -1),
          xp.stack([rows[op, device], rows[op, current]], -1))


def cluster_move_genes(chromosome, layout: chromosome_lib.Layout, clusters, op, device, size,
                       placement=None, kind=0):
  """The writes [..., 2 * S] of moving `op` and the first `size` - 1 other ops of its cluster
  `clusters[op, kind]` ([O, kinds, S] op ids, the op first, -1 past its end) that share its
  device to `device`; writes of ops left out point past the chromosome, so `apply_moves` drops
  them. `placement`: the chromosome's, when known."""
  xp = _xp(chromosome)
  if placement is None:
    placement = chromosome_lib.decode(chromosome, layout).placement
  members = clusters[op, kind]  # [..., S]
  kept = ((xp.arange(members.shape[-1]) < size[..., None]) & (members >= 0)
          & (placement[xp.maximum(members, 0)] == placement[op][..., None]))
  index, value = device_move_genes(chromosome, layout, xp.maximum(members, 0),
                                   xp.broadcast_to(device[..., None], members.shape))
  index = xp.where(kept[..., None], index, chromosome.shape[0])
  return (index.reshape(index.shape[:-2] + (-1,)), value.reshape(value.shape[:-2] + (-1,)))


def priority_swap_genes(chromosome, layout: chromosome_lib.Layout, order, position):
  """The (indices [..., 2], values [..., 2]) writes exchanging the priority keys of the ops at
  `position` and `position + 1` of `order` (`chromosome.priority_order`)."""
  xp = _xp(chromosome)
  offset = layout.num_ops * layout.num_devices
  first, second = order[position] + offset, order[position + 1] + offset
  return (xp.stack([first, second], -1), xp.stack([chromosome[second], chromosome[first]], -1))


def apply_moves(chromosome, writes):
  """Neighbours [B, n]: row b is the chromosome with the writes (indices [B, W], values
  [B, W]) of move b; indices past the chromosome are dropped (a move's indices are
  distinct)."""
  index, value = writes
  if isinstance(chromosome, np.ndarray):
    neighbours = np.repeat(chromosome[None], index.shape[0], 0)
    kept = index < chromosome.shape[0]
    rows = np.broadcast_to(np.arange(index.shape[0])[:, None], index.shape)
    neighbours[rows[kept], index[kept]] = value[kept]
    return neighbours
  rows = jnp.arange(index.shape[0])[:, None]
  neighbours = jnp.broadcast_to(chromosome, (index.shape[0],) + chromosome.shape)
  return neighbours.at[rows, index].set(value, mode="drop")


def single_op_moves(layout: chromosome_lib.Layout) -> int:
  """How many single-op moves a chromosome has: a device move to each other device per op,
  then an adjacent priority swap per pair of neighbouring positions."""
  return layout.num_ops * (layout.num_devices - 1) + max(layout.num_ops - 1, 0)


def enumerated_move_genes(chromosome, layout: chromosome_lib.Layout, moves):
  """The writes [len(moves), 2] of single-op moves by number (`single_op_moves`): move
  m < o * (D - 1) puts op m // (D - 1) on its (1 + m % (D - 1))-th next device (cyclically),
  a larger one swaps the ops at priority positions k and k + 1, k = m - o * (D - 1)."""
  xp = _xp(chromosome)
  num_ops, num_devices = layout.num_ops, layout.num_devices
  device_moves = num_ops * (num_devices - 1)
  op, shift = xp.divmod(xp.minimum(moves, max(device_moves - 1, 0)), max(num_devices - 1, 1))
  placement = chromosome_lib.decode(chromosome, layout).placement
  moved = device_move_genes(chromosome, layout, op, (placement[op] + 1 + shift) % num_devices)
  if num_ops < 2:  # No swaps.
    return moved
  order = chromosome_lib.priority_order(chromosome[layout.priority_slice])
  position = xp.clip(moves - device_moves, 0, num_ops - 2)
  swapped = priority_swap_genes(chromosome, layout, order, position)
  is_device_move = (moves < device_moves)[:, None]
  return tuple(xp.where(is_device_move, a, b) for a, b in zip(moved, swapped))


