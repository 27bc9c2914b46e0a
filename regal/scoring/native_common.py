"""What the compiled host scorers (each model's `native.py`) share: their
argument checks, splitting a population over the cores, and the `jax.pure_callback` that lets
jitted code (`performance.make_fitness_fn`) call them."""
from __future__ import annotations

import concurrent.futures
import functools
import os
from typing import Callable

import numba
import numpy as np


def argument(array, dtype) -> np.ndarray:
  """C-contiguous, writeable, of `dtype`: numba compiles a separate kernel for read-only
  arrays (what JAX hands a callback), so every call passes the same types."""
  return np.require(array, dtype, ["C_CONTIGUOUS", "WRITEABLE"])


def placement_argument(placement, num_ops: int, num_devices: int) -> np.ndarray:
  placement = argument(placement, np.int32)
  if placement.ndim != 2 or placement.shape[1] != num_ops or (
      placement.size and (placement.min() < 0 or placement.max() >= num_devices)):
    raise ValueError(f"placement must be [P, {num_ops}] with devices in 0..{num_devices - 1}")
  return placement


@functools.lru_cache(maxsize=None)
def _pool(threads: int) -> concurrent.futures.ThreadPoolExecutor:
  return concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="native")


def run_split(run: Callable[[slice], None], population: int, threads: int | None) -> None:
  """Calls `run(rows)` on contiguous row slices covering the population, one per thread
  (default: one per CPU core); the kernels release the GIL, so the slices run in parallel."""
  threads = min(threads or os.cpu_count() or 1, max(population, 1))
  bounds = np.linspace(0, population, threads + 1).astype(int)
  chunks = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
  if threads == 1:
    run(chunks[0])
  else:
    list(_pool(threads).map(run, chunks))


def makespan_callback(score: Callable[..., np.ndarray], *operands):
  """`score(*host_arrays) -> makespans [P]` as a JAX operation over operands [..., n_i]
  (usable under `jit` and `vmap`): float32 makespans of the operands' batch shape."""
  import jax
  import jax.numpy as jnp

  batch = operands[0].shape[:-1]

  def host(*arrays):
    shape = arrays[0].shape[:-1]  # vmap may add leading axes.
    count = int(np.prod(shape))
    flat = [np.asarray(a).reshape((count,) + a.shape[len(shape):]) for a in arrays]
    return np.asarray(score(*flat), np.float32).reshape(shape)

  return jax.pure_callback(host, jax.ShapeDtypeStruct(batch, jnp.float32), *operands,
                           vmap_method="broadcast_all")


@numba.njit(inline="always")
def link_time(latency, bandwidth, num_bytes, src, dst):
  """A message's time between two different devices, in the arrays' dtype: the compiled
  loops' form of `regal_datasets.analysis.link_time` (whose callers here skip same-device and
  control dependencies first, as that rule does)."""
  return latency[src, dst] + num_bytes / bandwidth[src, dst]


# ----- binary min-heaps of keys, heap k in heaps[k * capacity:], sizes[k] ------------------
@numba.njit(inline="always")
def heap_push(heaps, sizes, capacity, row, value):
  base = row * capacity
  i = sizes[row]
  sizes[row] = i + 1
  while i > 0:
    parent = (i - 1) >> 1
    above = heaps[base + parent]
    if above <= value:
      break
    heaps[base + i] = above
    i = parent
  heaps[base + i] = value


@numba.njit(inline="always")
def heap_pop(heaps, sizes, capacity, row):
  base = row * capacity
  top = heaps[base]
  size = sizes[row] - 1
  sizes[row] = size
  last = heaps[base + size]
  i = 0
  while True:
    child = 2 * i + 1
    if child >= size:
      break
    smaller = heaps[base + child]
    if child + 1 < size:
      right = heaps[base + child + 1]
      if right < smaller:
        child += 1
        smaller = right
    if last <= smaller:
      break
    heaps[base + i] = smaller
    i = child
  heaps[base + i] = last
  return top


@numba.njit(inline="always")
def heap_key(priority_bits, index):
  """A heap key ordering items by larger priority first, ties to the lower index.

  `priority_bits` is a float32's bit pattern: mapped to an unsigned int with the float's
  order (negatives flipped, -0.0 equal to 0.0), inverted for descending order, and placed
  above the index; 31 bits for the index keep the key a non-negative int64.
  """
  bits = np.int64(priority_bits) & 0xFFFFFFFF
  if bits == 0x80000000:
    bits = 0
  ordered = (bits ^ 0xFFFFFFFF) if bits & 0x80000000 else (bits | 0x80000000)
  return ((ordered ^ 0xFFFFFFFF) << 31) | index
