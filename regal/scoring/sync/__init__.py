"""REGAL's synchronous-transfer model (REGAL section 3.1), with peak memory.

`reference.simulate_synchronous` is the readable oracle; `native` the compiled host loop and
`batched` the JAX version, both over the WC model's graphs (`wc.native.NativeGraph`,
`sim_graph.SimGraph`).
"""
from regal.scoring.model_record import Model


def _reference(graph, devices, placement, op_priority, transfer_priority, dtype):
  from regal.scoring.sync import reference
  return reference.simulate_synchronous(graph, devices, placement, op_priority,
                                        transfer_priority, dtype=dtype)


def _native(graph, devices, memory: bool):
  from regal.scoring.sync import native
  from regal.scoring.wc.native import event_model_native
  return event_model_native(native.simulate)(graph, devices, memory)


def _jax(graph, devices, dtype, memory: bool):
  from regal.scoring.sim_graph import event_model_jax
  from regal.scoring.sync import batched
  return event_model_jax(batched.simulate_batch, always_memory=True)(graph, devices, dtype,
                                                                     memory)


MODEL = Model(
    "sync", "REGAL's synchronous-transfer model, with peak memory",
    reference=_reference, native=_native, jax=_jax, memory=True)
