"""Decoders, one record each, registered by name (as `models` registers the performance models):
how a chromosome of random keys becomes an assignment (placement, op priorities, transfer
priorities) that a model schedules. Adding a decoder is one record and `register`; nothing
else branches on a decoder's name.

* `direct` (`chromosome.decode`): each op on the device of its largest key, priorities and
  transfer priorities read straight off the genes; pure JAX, so a population splits over the
  local devices.
* `list` (`list_decoder.decode`): a list scheduler by earliest finish time on the delay model
  places ops in priority order (device keys as a bias); the transfer keys are read as genes.
* `consumer` (`consumer_transfers`): the direct decoder, with each transfer sent in its
  readers' priority instead of its own genes (for models that order transfers).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from regal_datasets.registry import Registry
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import consumer_transfers, registries
from regal.scoring.model_record import Model

Decoded = chromosome_lib.Decoded
HostDecode = Callable[[np.ndarray], Decoded]


@dataclasses.dataclass(frozen=True)
class Decoder:
  """A decoder: `host(problem, bias)` -> chromosomes [P, n] -> Decoded (numpy);
  `traced(problem, chromosomes, bias)` the same under `jit`; `bucket_host(problem, own,
  bucket)`, where given, a compiled host pass straight from the padded bucket layout (else the
  chromosomes are cut to the problem's own layout first). The facts the search reads:
  `shardable` (pure JAX: a population may split over local devices); `identity` (the genes
  are the assignment's keys, so its answers need no re-encoding for the direct decoder);
  `derives_transfers` (transfer priorities come from the op priorities, so the chromosome
  needs no transfer genes); `reads_priority(model)` (it reads the priority genes itself for
  `model`, so priority moves matter even where the model ignores priorities);
  `unsupported(model)` (why it cannot serve `model`, or None)."""
  name: str
  host: Callable[[Any, float], HostDecode]
  traced: Callable[[Any, jnp.ndarray, float], Decoded]
  shardable: bool = False
  identity: bool = False
  derives_transfers: bool = False
  reads_priority: Callable[["Model"], bool] = lambda model: False
  unsupported: Callable[["Model"], str | None] = lambda model: None
  bucket_host: Callable[[Any, chromosome_lib.Layout, chromosome_lib.Layout],
                        HostDecode] | None = None


_REGISTRY: Registry[Decoder] = registries.DECODERS  # Built-in names declared there.
register = _REGISTRY.register  # Adds a decoder (a name once).
unregister = _REGISTRY.unregister  # Takes one out (a test's toy).
get = _REGISTRY.get  # A decoder by name (an unknown one: one line naming the known ones).
names = _REGISTRY.names


# ----- the built-in decoders ----------------------------------------------------------------
def _direct_host(problem, bias: float) -> HostDecode:
  del bias
  layout = problem.layout
  return lambda chromosomes: chromosome_lib.decode(np.asarray(chromosomes, np.float32), layout)


def _direct_traced(problem, chromosomes: jnp.ndarray, bias: float) -> Decoded:
  del bias
  return jax.vmap(lambda c: chromosome_lib.decode(c, problem.layout))(chromosomes)


def _list_host(problem, bias: float) -> HostDecode:
  # Loaded here: the list scheduler runs on the delay model's compiled graph.
  from regal.scoring import list_decoder
  from regal.scoring.delay import native as native_delay
  graph = native_delay.build_native_delay_graph(problem.graph, problem.devices)
  return lambda chromosomes: list_decoder.decode(graph, chromosomes, problem.layout, bias)


def _list_traced(problem, chromosomes: jnp.ndarray, bias: float) -> Decoded:
  """A host callback (placement and priorities), the transfer keys read in JAX."""
  layout = problem.layout
  decode = _list_host(problem, bias)
  batch = chromosomes.shape[0]
  placement, priority = jax.pure_callback(
      lambda c: tuple(decode(np.asarray(c))[:2]),
      (jax.ShapeDtypeStruct((batch, layout.num_ops), jnp.int32),
       jax.ShapeDtypeStruct((batch, layout.num_ops), jnp.float32)), chromosomes)
  transfer = chromosomes[:, layout.transfer_slice].reshape(batch, layout.num_tensors,
                                                          layout.num_devices)
  return Decoded(placement, priority, transfer)


def _consumer_host(problem, bias: float) -> HostDecode:
  del bias
  return consumer_transfers.decoder(problem.graph, problem.layout)


def _consumer_traced(problem, chromosomes: jnp.ndarray, bias: float) -> Decoded:
  """The direct decoder's placement and op priorities, the transfer priorities read off them
  in a host callback."""
  del bias
  layout = problem.layout
  direct = _direct_traced(problem, chromosomes, 0.0)
  edges = consumer_transfers.readers(problem.graph)
  transfer = jax.pure_callback(
      lambda placement, priority: consumer_transfers.transfer_priorities(
          edges, np.asarray(placement), np.asarray(priority), layout.num_devices),
      jax.ShapeDtypeStruct((chromosomes.shape[0], layout.num_tensors, layout.num_devices),
                           jnp.float32), direct.placement, direct.op_priority)
  return Decoded(direct.placement, direct.op_priority, transfer)


def _consumer_bucket(problem, own: chromosome_lib.Layout,
                     bucket: chromosome_lib.Layout) -> HostDecode:
  return consumer_transfers.bucket_decoder(problem.graph, own, bucket)


DIRECT = register(Decoder("direct", _direct_host, _direct_traced, shardable=True,
                          identity=True))
LIST = register(Decoder("list", _list_host, _list_traced,
                        reads_priority=lambda model: True))
CONSUMER = register(Decoder(
    "consumer", _consumer_host, _consumer_traced, derives_transfers=True,
    reads_priority=lambda model: model.reads_transfer_priority,
    unsupported=lambda model: None if model.reads_transfer_priority else (
        f"--decoder consumer orders transfers, which the {model.name} model does not read: "
        f"use direct"),
    bucket_host=_consumer_bucket))
BUILT_IN = names()  # `regal.optimize --decoder` offers these (`app.choices.DECODERS`).
