"""What a performance model returns: the makespan, memory, and when everything ran."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from regal_datasets import errors


class Schedule(NamedTuple):
  """The timed outcome of running a placed, prioritized graph.

  Attributes:
    makespan: finish time of the last op.
    peak_memory: [D] the most bytes resident on each device at any time.
    op_start, op_end: [o] when each op ran (on the device its placement names).
    transfer_start, transfer_end: [t, D] when tensor t was sent to device j; NaN where it was
      not sent (same device as its producer, or no consumer there).
  """
  makespan: np.ndarray
  peak_memory: np.ndarray
  op_start: np.ndarray
  op_end: np.ndarray
  transfer_start: np.ndarray
  transfer_end: np.ndarray


def validate_placement(placement: np.ndarray, num_ops: int, num_devices: int) -> np.ndarray:
  """`placement` as an int array, or a one-line error naming what is wrong with it."""
  placement = np.asarray(placement)
  if placement.shape != (num_ops,):
    raise errors.ConfigError(f"placement has {placement.size} entries, the graph {num_ops} ops")
  if not np.issubdtype(placement.dtype, np.integer):
    raise errors.ConfigError("placement must hold integer device ids")
  bad = np.flatnonzero((placement < 0) | (placement >= num_devices))
  if len(bad):
    raise errors.ConfigError(f"op {int(bad[0])} is placed on device {int(placement[bad[0]])}, "
                             f"but there are {num_devices} devices (0..{num_devices - 1})")
  return placement.astype(np.int64)
