"""The work-conserving model (Doppler, Algorithm 1), with peak memory: the default.

`reference.simulate_wc` is the readable oracle; `native` the compiled host loop (the scorer on
a CPU); `batched` the JAX version (the scorer on an accelerator). All three agree bit for bit in
float32.
"""
# The record loads nothing: each function imports its implementation when first called, so
# listing, describing and checking the models loads no scorer (`models` module doc).
from regal.scoring.model_record import Model


def _reference(graph, devices, placement, op_priority, transfer_priority, dtype):
  from regal.scoring.wc import reference
  return reference.simulate_wc(graph, devices, placement, op_priority, transfer_priority,
                               dtype=dtype)


def _native(graph, devices, memory: bool):
  from regal.scoring.wc import native
  return native.event_model_native(native.simulate)(graph, devices, memory)


def _native_completion(graph, devices, memory: bool):
  from regal.scoring.wc import native
  return native.event_model_native(native.simulate_with_completion)(graph, devices, memory)


def _jax(graph, devices, dtype, memory: bool):
  from regal.scoring.sim_graph import event_model_jax
  from regal.scoring.wc import batched
  return event_model_jax(batched.simulate_batch, always_memory=False)(graph, devices, dtype,
                                                                      memory)


MODEL = Model(
    "wc", "work-conserving asynchronous model (Doppler paper), with peak memory",
    reference=_reference, native=_native, jax=_jax, native_completion=_native_completion,
    memory=True, ports=True)
