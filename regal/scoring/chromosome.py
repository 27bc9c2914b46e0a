"""REGAL's chromosome (appendix A.5): random keys that decode into placement and schedule.

A chromosome for a graph with o ops, t tensors and d devices is a vector in [0, 1]^(o*d + o + t*d):

    [ affinities (o x d, row-major) | node priorities (o) | transfer priorities (t x d) ]

* placement: each op goes to the device of highest affinity (ties: the lowest device id);
* node priorities: a larger key runs earlier; ties go to the lower op id;
* transfer priority [t, j]: the priority of sending tensor t to device j; larger goes first,
  ties to the lower tensor id.

`decode` works on numpy and JAX arrays alike (numpy stays numpy; jnp `vmap`s over a population).
`encode` is its inverse for seeding: a placement and an op order -> a chromosome that decodes
back to exactly them.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from regal_datasets import errors


UNSET_TRANSFER = 0.5  # Every transfer priority equal: lower tensor ids first.


class Layout(NamedTuple):
  """Sizes of a chromosome's three parts (static: part of the compiled shape)."""
  num_ops: int
  num_tensors: int
  num_devices: int

  @property
  def size(self) -> int:
    return self.num_ops * self.num_devices + self.num_ops + self.num_tensors * self.num_devices

  @property
  def affinity_slice(self) -> slice:
    return slice(0, self.num_ops * self.num_devices)

  @property
  def priority_slice(self) -> slice:
    start = self.num_ops * self.num_devices
    return slice(start, start + self.num_ops)

  @property
  def transfer_slice(self) -> slice:
    start = self.num_ops * self.num_devices + self.num_ops
    return slice(start, self.size)


class Decoded(NamedTuple):
  placement: jnp.ndarray  # [o] int32 device of each op.
  op_priority: jnp.ndarray  # [o] larger runs first.
  transfer_priority: jnp.ndarray  # [t, d] larger is sent first.


def decode(chromosome: jnp.ndarray, layout: Layout) -> Decoded:
  """Placement and priorities of a chromosome [..., n] (leading axes: a population). numpy
  in, numpy out (no JAX dispatch); else jnp."""
  xp = np if isinstance(chromosome, np.ndarray) else jnp
  batch = chromosome.shape[:-1]
  affinity = chromosome[..., layout.affinity_slice].reshape(
      batch + (layout.num_ops, layout.num_devices))
  placement = xp.argmax(affinity, axis=-1).astype(xp.int32)  # First maximum: lowest id.
  return Decoded(placement=placement, op_priority=chromosome[..., layout.priority_slice],
                 transfer_priority=chromosome[..., layout.transfer_slice].reshape(
                     batch + (layout.num_tensors, layout.num_devices)))


def priority_order(op_priority, num_ops=None):
  """Ops from first to last by priority: larger key first, ties to the lower id (numpy or
  jnp, like `decode`). `num_ops` (may be traced): only the first `num_ops` are real; the
  padded ones come after them."""
  xp = np if isinstance(op_priority, (np.ndarray, list, tuple)) else jnp
  op_priority = xp.asarray(op_priority)
  ids = xp.arange(op_priority.shape[-1])
  if num_ops is not None:
    op_priority = xp.where(ids < num_ops, op_priority, -xp.inf)
  return xp.lexsort((ids, -op_priority))


def assignment(chromosome: np.ndarray, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
  """(placement [o], op order [o]) one chromosome decodes to on the host, both int64: what
  results report, executors run and `encode` turns back into a chromosome."""
  decoded = decode(np.asarray(chromosome, np.float32), layout)
  return (np.asarray(decoded.placement, np.int64),
          priority_order(np.asarray(decoded.op_priority)).astype(np.int64))


def encode(placement: np.ndarray, order: np.ndarray, layout: Layout,
           transfer_priority: np.ndarray | None = None) -> np.ndarray:
  """A chromosome that decodes to `placement` and whose priority order is `order`.

  Affinities are 1 for the chosen device and 0 elsewhere; priorities fall evenly from 1 along
  `order`; transfer priorities default to 0.5 (all equal: lower tensor ids first).
  """
  placement = np.asarray(placement)
  order = np.asarray(order)
  num_ops, num_tensors, num_devices = layout
  if placement.shape != (num_ops,) or order.shape != (num_ops,):
    raise errors.ConfigError(f"placement and order need {num_ops} entries, got "
                             f"{placement.shape[0]} and {order.shape[0]}")
  if placement.min(initial=0) < 0 or placement.max(initial=0) >= num_devices:
    raise errors.ConfigError(f"placement names a device outside 0..{num_devices - 1}")
  if sorted(order.tolist()) != list(range(num_ops)):
    raise errors.ConfigError("order must list every op exactly once")
  affinity = np.zeros((num_ops, num_devices))
  affinity[np.arange(num_ops), placement] = 1.0
  priority = order_priorities(order)
  if transfer_priority is None:
    transfer_priority = np.full((num_tensors, num_devices), UNSET_TRANSFER)
  return np.concatenate([affinity.ravel(), priority, np.asarray(transfer_priority).ravel()])


def order_priorities(order: np.ndarray) -> np.ndarray:
  """Priority keys [o] (float64) whose priority order is `order`: falling evenly from 1 along
  it. The one map from an op order to keys: `encode` (so the hill climb's and every seed's),
  the list decoder, the delay model's planners and the executor's predictions use it."""
  rank = np.empty(len(order))
  rank[np.asarray(order)] = np.arange(len(order))
  return 1.0 - rank / max(len(order), 1)


def to_bucket(layout: Layout, bucket: Layout,
              genes: np.ndarray, fill: float = 1.0) -> np.ndarray:
  """Per-gene values on a graph's layout, placed into the bucket layout (padding: fill). A
  bucket without transfer genes (no schedule reads them: `performance.reads_transfer_genes`)
  drops them; `from_bucket` gives them back as `UNSET_TRANSFER`."""
  genes = np.asarray(genes)
  out = np.full(bucket.size, fill, genes.dtype)
  affinity = np.full((bucket.num_ops, bucket.num_devices), fill, genes.dtype)
  affinity[:layout.num_ops] = genes[layout.affinity_slice].reshape(layout.num_ops, -1)
  out[bucket.affinity_slice] = affinity.ravel()
  priority = np.full(bucket.num_ops, fill, genes.dtype)
  priority[:layout.num_ops] = genes[layout.priority_slice]
  out[bucket.priority_slice] = priority
  transfer = np.full((bucket.num_tensors, bucket.num_devices), fill, genes.dtype)
  kept = min(layout.num_tensors, bucket.num_tensors)  # A bucket may carry no transfer genes.
  transfer[:kept] = genes[layout.transfer_slice].reshape(layout.num_tensors,
                                                         layout.num_devices)[:kept]
  out[bucket.transfer_slice] = transfer.ravel()
  return out


def from_bucket(layout: Layout, bucket: Layout,
                genes: np.ndarray) -> np.ndarray:
  """A bucket-layout chromosome's genes of the graph's own layout (inverse of `to_bucket`)."""
  return from_bucket_batch(layout, bucket, np.asarray(genes)[None])[0]


def from_bucket_batch(layout: Layout, bucket: Layout, genes: np.ndarray) -> np.ndarray:
  """`from_bucket` of a batch [P, bucket.size] -> [P, layout.size]."""
  genes = np.asarray(genes)
  batch = genes.shape[0]
  affinity = genes[:, bucket.affinity_slice].reshape(batch, bucket.num_ops, -1)[:, :layout.num_ops]
  priority = genes[:, bucket.priority_slice][:, :layout.num_ops]
  transfer = genes[:, bucket.transfer_slice].reshape(batch, bucket.num_tensors,
                                                     bucket.num_devices)[:, :layout.num_tensors]
  if bucket.num_tensors < layout.num_tensors:  # A bucket without transfer genes: encode's.
    transfer = np.full((batch, layout.num_tensors, layout.num_devices), UNSET_TRANSFER,
                       genes.dtype)
  return np.concatenate([affinity.reshape(batch, -1), priority, transfer.reshape(batch, -1)],
                        axis=1)
