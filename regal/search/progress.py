"""What a running search or training shows: one line, rewritten in place on a terminal, or a
plain line now and then in a log (`LiveLine`); and, at the end, why a search stopped.

The search tells the host once a generation (`brkga_search._time_up`, which
also checks its time limit); `SearchProgress.generation` turns that into the line
`  12,800 of 96,000 evaluations, best objective 4907.5, 1.9 s of 10 s`, the best in the unit
the summary prints it in (`Reporter.shown`: 2.7503 ms, 122.627 Doppler units), and a last line
when the search ends. A terminal gets it at most `TTY_INTERVAL` apart; anything else (a file, a
pipe, CI) a plain line every `LOG_INTERVAL`.
"""
from __future__ import annotations

import dataclasses
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
    "bound": "its best met the lower bound (proven optimal)",
}


def _plain(objective: float) -> str:
  return f"{objective:.6g}"


def _printed(line: str) -> None:
  print(line, flush=True)


@dataclasses.dataclass(frozen=True)
class Reporter:
  """Where a run's progress goes: `say(line)` prints a lasting line (the search's start);
  `shown(objective)` writes an objective (the model's own value) as the summary will, in its
  unit (`regal.app.units`; the run sets it once the unit is known)."""
  say: Callable[[str], None] = _printed
  shown: Callable[[float], str] = _plain


class LiveLine:
  """A status line on `stream` (default stdout): on a terminal rewritten in place, at most
  every `TTY_INTERVAL`; elsewhere a plain line at most every `log_interval`. `say` writes a
  lasting line (closing an open one first)."""

  def __init__(self, stream: TextIO | None = None,
               clock: Callable[[], float] = time.perf_counter,
               log_interval: float = LOG_INTERVAL):
    self.stream = stream if stream is not None else sys.stdout
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self.clock, self.log_interval = clock, log_interval
    self.last_shown = -math.inf
    self.open = False

  def due(self) -> bool:
    """Whether an `update` now would show."""
    interval = TTY_INTERVAL if self.tty else self.log_interval
    return self.clock() - self.last_shown >= interval

  def update(self, text: str, force: bool = False) -> None:
    if not (force or self.due()):
      return
    self.last_shown = self.clock()
    if self.tty:
      self.stream.write("\r\033[K" + text)
      self.open = True
    else:
      self.stream.write(text + "\n")
    self.stream.flush()

  def say(self, text: str) -> None:
    self.close()
    self.stream.write(text + "\n")
    self.stream.flush()

  def close(self) -> None:
    """Ends a line left open on a terminal."""
    if self.open:
      self.stream.write("\n")
      self.stream.flush()
      self.open = False


class SearchProgress:
  """The live line of one search of `total` evaluations (`time_limit` seconds, or None)."""

  def __init__(self, total: int, time_limit: float | None = None,
               stream: TextIO | None = None, clock: Callable[[], float] = time.perf_counter,
               shown: Callable[[float], str] = _plain):
    self.total, self.time_limit, self.shown = total, time_limit, shown
    self.line = LiveLine(stream, clock)
    self.clock = clock
    self.started = self.clock()

  def compiling(self) -> None:
    """Compilation comes first, once per size bucket (later processes load it from the
    persistent caches, `regal.startup`); which of the two happened is said at the end
    (`finished`)."""
    self.line.update("  preparing the search for this graph's size (compiled once, then loaded "
                     "from the cache)", force=True)
    self.line.last_shown = -math.inf  # The first generation shows at once.

  def searching(self) -> None:
    """The search itself starts: elapsed time counts from here, as its time limit does."""
    self.started = self.clock()

  def due(self) -> bool:
    """Whether a `generation` now would show (the caller may skip working out the best)."""
    return self.line.due()

  def generation(self, generation: int, evaluations: int, best: float,
                 compiling: float = 0.0) -> None:
    """After a generation: `best` the best objective so far (not the search's score, which
    may carry a tie-breaker); `compiling`: the seconds since `searching` spent compiling (not
    search time)."""
    del generation
    if self.line.due():
      self.line.update(self._text(evaluations, best, self.clock() - self.started - compiling))

  def finished(self, evaluations: int, best: float, seconds: float,
               compile_seconds: float = 0.0, compiled: bool = False,
               kept: bool = True) -> None:
    """The last line, whenever the one before it showed: the search's answer (`best`, as the
    summary reports it) after `seconds` of search; then how its programs were had: `compiled`
    (this run compiled some) or loaded from the caches, in `compile_seconds`; `kept`: whether
    a cache keeps them for later runs (not a program holding a host callback)."""
    self.line.update(self._text(evaluations, best, seconds), force=True)
    self.line.close()
    later = ("later runs of this size load them" if kept else
             "it holds a host callback, which no cache keeps: every run compiles it")
    self.line.say(f"  the search's programs were compiled ({compile_seconds:.2f} s; {later})"
                  if compiled else
                  f"  the search's programs were loaded from the cache ({compile_seconds:.2f} s)")

  def _text(self, evaluations: int, best: float, elapsed: float) -> str:
    limit = f" of {self.time_limit:g} s" if self.time_limit else ""
    return (f"  {evaluations:,} of {self.total:,} evaluations, best objective "
            f"{self.shown(best)}, {elapsed:.1f} s{limit}")

  def close(self) -> None:
    """Ends a line left open on a terminal."""
    self.line.close()
