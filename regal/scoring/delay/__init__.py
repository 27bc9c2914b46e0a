"""The task-scheduling literature's delay model: ops in priority order, each as early as its
device and its inputs allow; transfers never contend. Runtime only; CP-SAT models it exactly.

`reference.simulate_delay` is the readable oracle; `native` the compiled host loop (also the
list decoder's and the polish's graph); `batched` the JAX version.
"""
from regal.scoring.model_record import Model


def _reference(graph, devices, placement, op_priority, transfer_priority, dtype):
  from regal.scoring.delay import reference
  del transfer_priority  # Every message leaves at once.
  return reference.simulate_delay(graph, devices, placement, op_priority, dtype=dtype)


def _native(graph, devices, memory: bool):
  from regal.scoring.delay import native
  del memory
  host_graph = native.build_native_delay_graph(graph, devices)
  return lambda placement, priority, transfer: (
      native.simulate(host_graph, placement, priority), None)


def _jax(graph, devices, dtype, memory: bool):
  import jax
  import jax.numpy as jnp

  from regal.scoring.delay import batched
  del memory
  data = jax.tree_util.tree_map(jnp.asarray, batched.build_delay_graph(graph, devices, dtype))
  return data, lambda data, placement, priority, transfer: (
      batched.makespan_batch(data, placement, priority), None)


MODEL = Model(
    "delay", "the task-scheduling literature's delay model (ops in priority order), runtime",
    reference=_reference, native=_native, jax=_jax, reads_transfer_priority=False,
    exact_solver=True)
