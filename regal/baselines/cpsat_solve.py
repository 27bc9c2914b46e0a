"""CP-SAT's Solve as every caller runs it: stopped by SIGINT / SIGTERM the way BRKGA is.

OR-Tools catches SIGINT itself by default (`catch_sigint_signal`): it then takes the signal
from the command (which went on and reported the solver's partial answer as a finished one,
`interrupted: false`, exit 0), and on leaving it resets SIGINT to the default action (a later
signal killed the process with nothing written). Here OR-Tools' handler is off, the command's
signal watcher (`regal_datasets.cli`) takes the signal, and inside a `cli.stoppable` block a
thread stops the solver (`StopSearch`, asked until Solve returns: a stop asked before the
search starts would be lost); outside one, the process ends at once, as for any other work.
"""
from __future__ import annotations

import threading

from regal_datasets import cli

POLL_SECONDS = 0.02


def solve(solver, model) -> int:
  """`solver.Solve(model)`'s status; a signal inside `cli.stoppable` stops it early."""
  solver.parameters.catch_sigint_signal = False
  done = threading.Event()

  def stop_on_signal() -> None:
    while not done.wait(POLL_SECONDS):
      if cli.stop_requested():
        solver.StopSearch()

  watcher = threading.Thread(target=stop_on_signal, daemon=True, name="cpsat-stop")
  with cli.stoppable():
    watcher.start()
    try:
      return solver.Solve(model)
    finally:
      done.set()
      watcher.join()
