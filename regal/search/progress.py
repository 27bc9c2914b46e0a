"""What a running search shows: one line, rewritten in place on a terminal, or a plain line now
and then in a log; and, at the end, why it stopped.

The compiled search calls back to the host once a generation (`brkga_search._time_up`, which
also checks its time limit); `SearchProgress.generation` turns that into the line
`  12,800 of 96,000 evaluations, best score 4907.5, 1.9 s of 10 s`. A terminal gets it at most
`TTY_INTERVAL` apart; anything else (a file, a pipe, CI) a plain line every `LOG_INTERVAL`.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Callable, TextIO

TTY_INTERVAL = 0.2  # seconds between rewrites of the line on a terminal
LOG_INTERVAL = 5.0  # seconds between plain lines elsewhere

# Why a search stopped before its budget (`brkga_search.SearchResult.stop_reason`).
STOP_REASONS = {
    "budget": "its evaluation budget was spent",
    "time_limit": "its time limit was reached",
    "signal": "SIGINT or SIGTERM stopped it",
    "caller": "the exact solver beside it proved its answer optimal",
}


class SearchProgress:
  """The live line of one search of `total` evaluations (`time_limit` seconds, or None)."""

  def __init__(self, total: int, time_limit: float | None = None,
               stream: TextIO | None = None, clock: Callable[[], float] = time.perf_counter):
    self.total, self.time_limit = total, time_limit
    self.stream = stream if stream is not None else sys.stdout
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self.clock = clock
    self.started = self.clock()
    self.last_shown = -math.inf
    self.shown = False

  def compiling(self) -> None:
    """Compilation comes first, once per size bucket and process: said as such."""
    self._write("  compiling the search for this graph's size (once per size and process)")

  def searching(self) -> None:
    """The search itself starts: elapsed time counts from here, as its time limit does."""
    self.started = self.clock()

  def generation(self, generation: int, evaluations: int, best: float) -> None:
    del generation
    now = self.clock()
    if now - self.last_shown < (TTY_INTERVAL if self.tty else LOG_INTERVAL):
      return
    elapsed = now - self.started
    limit = f" of {self.time_limit:g} s" if self.time_limit else ""
    self._write(f"  {evaluations:,} of {self.total:,} evaluations, best score {best:.6g}, "
                f"{elapsed:.1f} s{limit}")
    self.last_shown = now

  def close(self) -> None:
    """Ends a line left open on a terminal."""
    if self.tty and self.shown:
      self.stream.write("\n")
      self.stream.flush()
      self.shown = False

  def _write(self, text: str) -> None:
    if self.tty:
      self.stream.write("\r\033[K" + text)
      self.shown = True
    else:
      self.stream.write(text + "\n")
    self.stream.flush()
