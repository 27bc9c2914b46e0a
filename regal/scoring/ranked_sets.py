"""Ranked bitsets in JAX: sets of items kept in priority order as bits of uint32 words.

The performance models keep each device's ready ops (and each channel's waiting transfers) as
such a set: rank items once by priority, then the best member of a set is its first set bit,
found with `clz` on the first non-zero word, O(items / 32) instead of a scan over all items.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

WORD_BITS = 32
TOP_BIT = np.uint32(1 << 31)


def ranks(priority: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
  """(rank of each item, item at each rank): larger priority first, ties to the lower index."""
  order = sort_indices(-priority)
  rank = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=jnp.int32))
  return rank, order


def sort_indices(keys: jnp.ndarray) -> jnp.ndarray:
  """Indices that sort `keys` ascending, ties by index (a stable argsort) of a 1-D array.

  A bitonic network of reshapes and elementwise min/max: XLA's CPU sort handles one row at a
  time through a comparator call per comparison, about 3x slower on a population of rows.
  Comparing (key, index) pairs makes every pair distinct, so the result is exactly the stable
  order whatever the network's order of comparisons.
  """
  length = keys.shape[0]
  size = 1 << max(1, (length - 1).bit_length())
  key = jnp.concatenate([keys, jnp.full(size - length, jnp.inf, keys.dtype)])
  index = jnp.arange(size, dtype=jnp.int32)
  span = 2
  while span <= size:
    half = span // 2
    while half >= 1:
      blocks = size // (2 * half)
      k = key.reshape(blocks, 2, half)
      i = index.reshape(blocks, 2, half)
      ascending = jnp.asarray((np.arange(blocks) * 2 * half) & span == 0)[:, None]
      first_is_smaller = (k[:, 0] < k[:, 1]) | ((k[:, 0] == k[:, 1]) & (i[:, 0] < i[:, 1]))
      swap = first_is_smaller != ascending
      key = jnp.stack([jnp.where(swap, k[:, 1], k[:, 0]), jnp.where(swap, k[:, 0], k[:, 1])],
                      axis=1).reshape(size)
      index = jnp.stack([jnp.where(swap, i[:, 1], i[:, 0]), jnp.where(swap, i[:, 0], i[:, 1])],
                        axis=1).reshape(size)
      half //= 2
    span *= 2
  return index[:length]


def bit(rank: jnp.ndarray) -> jnp.ndarray:
  return jnp.right_shift(jnp.uint32(TOP_BIT), (rank % WORD_BITS).astype(jnp.uint32))


def add_small(array: jnp.ndarray, slots: jnp.ndarray, values: jnp.ndarray) -> jnp.ndarray:
  """array.at[..., slots].add(values) along the last axis of a small array, as a one-hot sum.

  array [B..., S]; slots and values [B..., M]. On a population, XLA's CPU scatter costs far
  more per element than an elementwise compare and sum over a few dozen slots.
  """
  hits = slots[..., :, None] == jnp.arange(array.shape[-1], dtype=slots.dtype)
  return array + jnp.sum(jnp.where(hits, values[..., :, None], 0), axis=-2, dtype=array.dtype)


def first_set(words: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
  """For each row of words: (any bit set, rank of the first set bit, word index)."""
  nonzero = words != 0
  word_index = jnp.argmax(nonzero, axis=-1).astype(jnp.int32)
  at_index = jnp.arange(words.shape[-1], dtype=jnp.int32) == word_index[..., None]
  word = jnp.sum(jnp.where(at_index, words, jnp.uint32(0)), axis=-1, dtype=jnp.uint32)
  rank = word_index * WORD_BITS + jax.lax.clz(word).astype(jnp.int32)
  return nonzero.any(axis=-1), rank, word_index


def gather_rows(array: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
  """array[p, index[p, ...]] for every row p: array [P, X, ...], index [P, ...].

  Written as one gather from the flattened array: the batched gather that `vmap` produces is
  several times slower on XLA's CPU backend and can force a copy of the whole array.
  """
  rows, width = array.shape[:2]
  offsets = (jnp.arange(rows, dtype=index.dtype) * width).reshape((rows,) + (1,) * (index.ndim - 1))
  return array.reshape((rows * width,) + array.shape[2:])[offsets + index]


def row_offsets(rows: int, width: int, index: jnp.ndarray) -> jnp.ndarray:
  return (jnp.arange(rows, dtype=index.dtype) * width).reshape((rows,) + (1,) * (index.ndim - 1))


def gather_flat(flat: jnp.ndarray, width: int, index: jnp.ndarray) -> jnp.ndarray:
  """flat[p * width + index[p, ...]]: row p of a [P * width] array, read at `index`."""
  return flat[row_offsets(index.shape[0], width, index) + index]


def set_flat(flat: jnp.ndarray, width: int, index: jnp.ndarray, values: jnp.ndarray,
             keep: jnp.ndarray) -> jnp.ndarray:
  """flat[p * width + index[p, ...]] = values where `keep`; other entries are dropped.

  Big per-chromosome state lives flat ([P * width]) and is updated by writing values computed
  from a read of the same entries: the write then depends on the read, so XLA's CPU backend
  updates the array in place. (A scatter-add independent of the read, a reshape inside the
  loop, or `vmap`'s batched scatter each made it copy the whole array every step.) Duplicate
  indices must carry equal values.
  """
  flat_index = jnp.where(keep, row_offsets(index.shape[0], width, index) + index, flat.shape[0])
  return flat.at[flat_index].set(values, mode="drop")


def scatter_rows(array: jnp.ndarray, index: jnp.ndarray, values: jnp.ndarray, *,
                 add: bool, keep: jnp.ndarray | None = None) -> jnp.ndarray:
  """array[p, index[p, ...]] (+)= values for every row p; entries where `keep` is False are
  dropped. array [P, X], index and values [P, ...]."""
  rows, width = array.shape
  offsets = (jnp.arange(rows, dtype=index.dtype) * width).reshape((rows,) + (1,) * (index.ndim - 1))
  flat_index = offsets + index
  if keep is not None:
    flat_index = jnp.where(keep, flat_index, rows * width)
  flat = array.reshape(-1)
  updated = (flat.at[flat_index].add(values, mode="drop") if add
             else flat.at[flat_index].set(values, mode="drop"))
  return updated.reshape(rows, width)
