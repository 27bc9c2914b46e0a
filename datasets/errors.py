"""Error types for bad input, and the wrapper that turns them into one-line CLI errors.

Every problem a user can cause (a malformed file, a cyclic graph, a negative cost, a device
count below one) raises a subclass of `RegalError` whose message is one line naming the
problem. Command-line entry points run through `run_cli`, which prints that line to stderr
and exits non-zero instead of showing a traceback.
"""
from __future__ import annotations

import sys
from typing import Callable, Sequence


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


EXIT_BAD_INPUT = 2


def _exit_with(message: str) -> None:
  print("error: " + " ".join(message.split()), file=sys.stderr)
  sys.exit(EXIT_BAD_INPUT)


def run_cli(main: Callable[[Sequence[str]], None]) -> None:
  """Runs an absl main function, reporting `RegalError`s as one line on stderr."""
  from absl import app  # Deferred: library users need not import absl.

  def guarded_main(argv: Sequence[str]) -> None:
    try:
      main(argv)
    except RegalError as error:
      _exit_with(str(error))
    except OSError as error:  # Missing or unreadable files named on the command line.
      where = f": {error.filename}" if error.filename else ""
      _exit_with(f"{error.strerror or error}{where}")

  app.run(guarded_main)
