"""Spreading a population over every local device (CPU cores included).

XLA runs one while loop on one thread, so on a CPU a single device leaves the other cores
idle. `use_all_cpu_cores` (call it before JAX initialises) exposes each core as a host device;
`over_local_devices` then splits the population axis across the local devices with
`shard_map`, each shard looping on its own.
"""
from __future__ import annotations

import os
from typing import Callable

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from regal_datasets import errors

from regal.startup import use_all_cpu_cores  # noqa: F401  (the commands call it from here)


MAX_HOST_DEVICES = 64  # Each one holds its own buffers and threads: thousands exhaust memory.


def use_host_devices(count: int) -> bool:
  """At least `count` host devices (one per core at least) for executing placements on a CPU.

  Must run before JAX starts its backends; returns False (and changes nothing) after. It only
  touches the CPU backend: on a GPU machine the executor uses the GPUs as they are."""
  if count > MAX_HOST_DEVICES:
    raise errors.DeviceSpecError(f"{count} devices to run on: placements run on at most "
                                 f"{MAX_HOST_DEVICES} devices")
  from jax._src import xla_bridge
  if xla_bridge.backends_are_initialized():
    return False
  jax.config.update("jax_num_cpu_devices", max(count, os.cpu_count() or 1))
  return True


def over_local_devices(fn: Callable, population_size: int) -> Callable:
  """`fn(shared, *batched)` with the batched arguments' leading axis split across devices.

  Falls back to `fn` itself when there is one device or the population does not divide.
  """
  devices = jax.local_devices()
  if len(devices) == 1 or population_size % len(devices):
    return fn
  try:
    from jax import shard_map  # jax >= 0.7
    kwargs = {"check_vma": False}
  except ImportError:  # pragma: no cover - older JAX
    from jax.experimental.shard_map import shard_map
    kwargs = {"check_rep": False}
  mesh = Mesh(np.array(devices), ("population",))
  batched = PartitionSpec("population")

  def sharded(shared, *args):
    specs = (PartitionSpec(),) + (batched,) * len(args)
    return shard_map(fn, mesh=mesh, in_specs=specs, out_specs=batched, **kwargs)(shared, *args)

  return sharded
