"""Error types for bad input, and the wrapper that turns them into one-line CLI errors.

Every problem a user can cause (a malformed file, a cyclic graph, a negative cost, a device
count below one) raises a subclass of `RegalError` whose message is one line naming the
problem. Command-line entry points run through `run_cli`, which prints that line to stderr
and exits non-zero instead of showing a traceback.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
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
EXIT_INFEASIBLE = 3  # regal.optimize: no solution found meets the memory limit.
EXIT_ON_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal's number.


_signals: list[int] = []  # Signals that asked a stoppable block to stop.
_stoppable_depth = 0
_watching = False


def stop_requested() -> bool:
  """Whether SIGINT or SIGTERM asked a `stoppable` block to end early."""
  return bool(_signals)


@contextlib.contextmanager
def stoppable():
  """Marks a block that polls `stop_requested()` and then ends early with what it has (BRKGA
  at a generation boundary): the first signal during it stops the block, not the process."""
  global _stoppable_depth
  _stoppable_depth += 1
  try:
    yield
  finally:
    _stoppable_depth -= 1


def _watch_signals(read_fd: int) -> None:
  """Reads the numbers of the signals that arrive. Python runs signal handlers on the main
  thread only, and not while it waits in compiled code (a jitted search, a solver), so the
  decision is taken here, at once: the first signal inside a stoppable block asks it to stop;
  any other ends the process."""
  while True:
    data = os.read(read_fd, 64)
    if not data:
      return
    for signum in data:
      if signum not in EXIT_ON_SIGNAL:  # Another handler's signal (the fd gets them all).
        continue
      first_inside_stoppable = _stoppable_depth and not _signals
      _signals.append(signum)
      if not first_inside_stoppable:
        _exit_on_signal(f"interrupted by {signal.Signals(_signals[0]).name}")


def _install_signal_watch() -> None:
  global _watching
  if _watching:
    return
  _watching = True
  read_fd, write_fd = os.pipe()
  os.set_blocking(write_fd, False)
  signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
  for signum in EXIT_ON_SIGNAL:
    signal.signal(signum, lambda *_: None)  # The watcher acts; Python must not raise too.
  threading.Thread(target=_watch_signals, args=(read_fd,), daemon=True,
                   name="signal-watch").start()


def _exit_with(message: str, code: int = EXIT_BAD_INPUT) -> None:
  print("error: " + " ".join(message.split()), file=sys.stderr)
  sys.exit(code)


def exit_infeasible(message: str) -> None:
  _exit_with(message, EXIT_INFEASIBLE)


def _exit_on_signal(message: str) -> None:
  """Exits at once: after an interrupt, threads of JAX, numba or Ray may be mid-call, and a
  normal interpreter teardown can crash under them. Outputs are atomic, so none is partial."""
  print("error: " + message, file=sys.stderr)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(EXIT_ON_SIGNAL.get(_signals[0], 130) if _signals else 130)


def _parse_flags(argv: Sequence[str]) -> list[str]:
  """absl's flag parsing, with a bad flag reported like any bad input: one line, exit 2."""
  from absl import flags
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    message = str(error)
    if "Traceback (most recent call last)" in message:  # A config file raised: its last line.
      head = message.split(":", 1)[0]
      message = f"{head}: {message.strip().splitlines()[-1]}"
    _exit_with(f"{message} (--helpshort lists the flags)")
  except RegalError as error:  # A config file's own validation, run while parsing.
    _exit_with(str(error))


def run_cli(main: Callable[[Sequence[str]], None], argv: Sequence[str] | None = None) -> None:
  """Runs an absl main function: a `RegalError` becomes one line on stderr and exit 2; SIGINT
  or SIGTERM one line and exit 130 or 143 (inside a `stoppable` block, the first one ends the
  block early and main reports what it has before that exit)."""
  from absl import app  # Deferred: library users need not import absl.

  def guarded_main(argv: Sequence[str]) -> None:
    # JAX logs at INFO that it found no TPU on every machine without one: noise, not news.
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    _install_signal_watch()
    try:
      main(argv)
    except RegalError as error:
      _exit_with(str(error))
    except OSError as error:  # Missing or unreadable files named on the command line.
      where = f": {error.filename}" if error.filename else ""
      _exit_with(f"{error.strerror or error}{where}")
    if _signals:
      _exit_on_signal(f"interrupted by {signal.Signals(_signals[0]).name}: stopped early, the "
                      f"best found so far is reported above")

  app.run(guarded_main, argv=None if argv is None else list(argv), flags_parser=_parse_flags)
