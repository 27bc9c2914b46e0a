"""The Doppler repository's simulator (placement only), runtime, in Doppler's time units.

`reference.simulate_doppler` reproduces it on SimPy (the oracle); `native` is its compiled
host loop. No JAX version.
"""
import numpy as np

from regal.scoring.doppler import reference  # Its units (SimPy and NumPy: light).
from regal.scoring.model_record import Model


def _reference(graph, devices, placement, op_priority, transfer_priority, dtype):
  del op_priority, transfer_priority, dtype  # It orders by its own event queue, in float64.
  return reference.simulate_doppler(graph, devices, placement)


def _native(graph, devices, memory: bool):
  from regal.scoring.doppler import native
  del memory
  host_graph = native.build_doppler_graph(graph, devices)
  return lambda placement, priority, transfer: (
      native.simulate(host_graph, placement).astype(np.float32), None)


MODEL = Model(
    "doppler", "the Doppler repository's simulator (placement only), runtime",
    reference=_reference, native=_native, reads_op_priority=False,
    reads_transfer_priority=False, native_float32_only=False,
    time_scale=1.0 / reference.DOPPLER_TIME_SCALE, time_unit="Doppler units",
    units=reference.doppler_units)
