"""Parameters resident on the devices that read them (issue 83): the memory a split graph holds
before its step starts and keeps after it, beside the tensors the models track.

A split graph (`regal.parallelism.shard_imported`) has no parameter ops: each op lists the
regions of parameters it reads (`metadata["resident_reads"]`: [tensor, region, bytes]). A
device holds every distinct region an op placed on it reads, once, for the whole step, so its
peak memory is the models' peak plus those bytes. `held_bytes` is the readable reference;
`ResidentParameters.per_device` the batched form the scorers use (numpy or JAX).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from regal_datasets.graph import Graph


def held_bytes(graph: Graph, placement: np.ndarray, num_devices: int) -> list[float]:
  """Per device, the bytes of each distinct parameter region an op placed there reads."""
  held: list[dict] = [dict() for _ in range(num_devices)]
  for op, reads in enumerate(graph.metadata.get("resident_reads") or []):
    for tensor, region, size in reads:
      held[int(placement[op])][(tensor, str(region))] = float(size)
  return [sum(h.values()) for h in held]


@dataclasses.dataclass(frozen=True, eq=False)
class ResidentParameters:
  """The reads of a split graph's resident regions, as flat arrays."""
  reader: np.ndarray  # [E] int32: the op of each read.
  region: np.ndarray  # [E] int32: the region it reads (an index into `region_bytes`).
  region_bytes: np.ndarray  # [R] float32.

  def per_device(self, placement, num_devices: int):
    """[..., D] resident bytes on each device for placements [..., O] (numpy or JAX)."""
    if isinstance(placement, np.ndarray):
      devices = placement[..., self.reader]
      held = np.zeros((*placement.shape[:-1], len(self.region_bytes), num_devices), bool)
      index = np.indices(devices.shape)[:-1]
      held[(*index, np.broadcast_to(self.region, devices.shape), devices)] = True
      return np.einsum("...rd,r->...d", held.astype(np.float32), self.region_bytes)
    import jax.numpy as jnp  # Deferred: the host scorers need no JAX.
    one_hot = placement[..., self.reader, None] == jnp.arange(num_devices)  # [..., E, D]
    held = jnp.zeros((*placement.shape[:-1], len(self.region_bytes), num_devices), bool)
    held = held.at[..., self.region, :].max(one_hot)
    return jnp.einsum("...rd,r->...d", held.astype(jnp.float32), self.region_bytes)


def of(graph: Graph) -> ResidentParameters | None:
  """The graph's resident reads, or None where it has none (every graph but a split one)."""
  reads = graph.metadata.get("resident_reads") or []
  keys: dict = {}
  reader, region, sizes = [], [], []
  for op, op_reads in enumerate(reads):
    for tensor, extent, size in op_reads:
      key = (tensor, str(extent))
      if key not in keys:
        keys[key] = len(sizes)
        sizes.append(float(size))
      reader.append(op)
      region.append(keys[key])
  if not reader:
    return None
  return ResidentParameters(np.asarray(reader, np.int32), np.asarray(region, np.int32),
                            np.asarray(sizes, np.float32))
