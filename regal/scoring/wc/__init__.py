"""The work-conserving model (Doppler, Algorithm 1), with peak memory: the default.

`reference.simulate_wc` is the readable oracle; `native` the compiled host loop (the scorer on
a CPU); `batched` the JAX version (the scorer on an accelerator). All three agree bit for bit in
float32.
"""
from regal.scoring.model_record import Model
from regal.scoring.sim_graph import event_model_jax
from regal.scoring.wc import batched, native, reference


def _reference(graph, devices, placement, op_priority, transfer_priority, dtype):
  return reference.simulate_wc(graph, devices, placement, op_priority, transfer_priority,
                               dtype=dtype)


MODEL = Model(
    "wc", "work-conserving asynchronous model (Doppler paper), with peak memory",
    reference=_reference, native=native.event_model_native(native.simulate),
    jax=event_model_jax(batched.simulate_batch, always_memory=False),
    native_completion=native.event_model_native(native.simulate_with_completion), memory=True)
