"""Error types for bad input.

Every problem a user can cause (a malformed file, a cyclic graph, a negative cost, a device
count below one) raises a subclass of `RegalError` whose message is one line naming the
problem. Command-line entry points run through `regal_datasets.cli.run_cli`, which prints that line
to stderr and exits non-zero instead of showing a traceback.
"""
from __future__ import annotations


class RegalError(Exception):
  """Base class of all errors caused by bad user input."""


class GraphError(RegalError, ValueError):
  """A computation graph violates the graph model's invariants."""


class EmptyGraphError(GraphError):
  pass


class CycleError(GraphError):
  pass


class InvalidCostError(GraphError):
  pass


class UnknownNodeError(GraphError):
  pass


class DuplicateNameError(GraphError):
  pass


class MissingProducerError(GraphError):
  pass


class FormatError(RegalError, ValueError):
  """A file is malformed or cannot be represented in the requested format."""


class DeviceSpecError(RegalError, ValueError):
  """A device description is invalid."""


class ConfigError(RegalError, ValueError):
  """Settings contradict each other or a stored artifact."""


MAX_SEED = 2 ** 32 - 1  # The largest seed every generator takes (JAX keys, numpy, CP-SAT).


def brief(value) -> str:
  """A value as a one-line message shows it: a number of hundreds of digits cut short."""
  shown = repr(value) if isinstance(value, str) else str(value)
  return shown if len(shown) <= 24 else f"{shown[:12]}... ({len(shown)} characters)"
