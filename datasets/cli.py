"""What every command-line entry point shares: one-line errors, signals, --help.

`run_cli` runs an absl main: a `regal_datasets.errors.RegalError` (and a bad flag, a float flag that
is not finite, and ml_collections' config errors, `exit_bad_config`) becomes one stderr line +
exit 2, `--help` prints the module's flags by topic (its `FLAG_GROUPS`) + exit 0, and SIGINT /
SIGTERM exit 130 / 143. `watch_signals`, the first line of every CLI module (so imports are
covered), starts a thread that takes each signal at once; inside a `stoppable` block (BRKGA's
search, CP-SAT) the first signal only asks the block to stop (`stop_requested`), unless the
command runs with `stop_searches_early=False`. The interrupt line names `note_progress`'s last
note and `set_resume_hint`'s advice; `at_interrupt` cleanups run first (e.g. stopping a local
Ray cluster). Other exits: 3 infeasible (`exit_infeasible`), 4 / 5 some / all of a sweep's
trials failed (`exit_if_failed`).
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import signal
import sys
import threading
import time
from typing import Callable, Sequence

from regal_datasets.errors import RegalError

EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3  # regal.optimize: no solution found meets the memory limit.
EXIT_SOME_FAILED = 4  # A sweep or experiment finished, but some trials or graphs failed.
EXIT_ALL_FAILED = 5  # A sweep or experiment ran, and every trial or graph failed.
EXIT_ON_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal's number.


_signals: list[int] = []  # Signals that asked a stoppable block to stop.
_stoppable_depth = 0
_watching = False
_progress = ""  # Where a long run is, for the interrupt line (`note_progress`).
_resume_hint = ""  # How to go on after an interrupt (`set_resume_hint`).
_cleanups: list[Callable[[], None]] = []  # Run before exiting on a signal (`at_interrupt`).
# Whether a signal inside a `stoppable` block stops the block (the command then reports what
# it has) or the process: commands that write one report at the end must not report runs a
# signal cut short (`run_cli(..., stop_searches_early=False)`).
_stop_searches_early = True


def note_progress(text: str) -> None:
  """Records where a long run is ("step 12 of 100, saved"): an interrupt line names it."""
  global _progress
  _progress = text


def set_resume_hint(text: str) -> None:
  """What an interrupted run's user should do next: the interrupt line ends with it."""
  global _resume_hint
  _resume_hint = text


def at_interrupt(cleanup: Callable[[], None]) -> None:
  """Runs `cleanup` before the process exits on SIGINT or SIGTERM (it skips atexit): e.g. stop
  the helper processes a local Ray cluster started, which would otherwise outlive the run."""
  _cleanups.append(cleanup)


def stop_requested() -> bool:
  """Whether SIGINT or SIGTERM asked a `stoppable` block to end early."""
  return bool(_signals)


def exit_if_stopped() -> None:
  """For commands that record one run after another (resumable rows): a run a signal cut
  short must not be recorded as finished, and every later search would stop at once, so the
  process ends here, before the row is written (exit 130 / 143)."""
  if _signals:
    _exit_on_signal(f"interrupted by {signal.Signals(_signals[0]).name}: the unfinished run "
                    f"was not recorded")


@contextlib.contextmanager
def stoppable():
  """Marks a block that polls `stop_requested()` and then ends early with what it has (BRKGA
  at a generation boundary): the first signal during it stops the block, not the process."""
  global _stoppable_depth
  step = 1 if _stop_searches_early else 0
  _stoppable_depth += step
  try:
    yield
  finally:
    _stoppable_depth -= step


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


def watch_signals() -> None:
  """Takes SIGINT and SIGTERM from Python (see `_watch_signals`). Command-line modules call it
  first, before their heavy imports, so an interrupt while they load also ends in one line."""
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
  # A main thread that finishes while the watcher is ending the process waits for it.
  atexit.register(lambda: _exiting.locked() and _wait_for_the_signal_exit())


_LOADED_AT = time.time()  # Every command imports this module first.


def process_seconds() -> float:
  """Seconds since this process started: from the kernel's record where there is one (Linux),
  else since this module loaded (the interpreter's own start is then left out)."""
  try:
    with open("/proc/self/stat") as f:
      start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # Field 22: starttime.
    with open("/proc/uptime") as f:
      uptime = float(f.read().split()[0])
    return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
  except (OSError, ValueError, IndexError):
    return time.time() - _LOADED_AT


def init_ray(**options) -> None:
  """`ray.init(**options)` for a command: Ray's init takes SIGTERM (a Python handler that exits
  on the main thread with code 15, racing this module's, and its core worker's stack dump), so
  a command's handlers are put back: SIGINT and SIGTERM end it in one line, 130 / 143."""
  import ray
  ray.init(**options)
  if _watching and threading.current_thread() is threading.main_thread():
    for signum in EXIT_ON_SIGNAL:
      signal.signal(signum, lambda *_: None)


def _exit_with(message: str, code: int = EXIT_BAD_INPUT) -> None:
  print("error: " + " ".join(message.split()), file=sys.stderr)
  _ignore_signals_from_here()
  _end(code)


_ends_process = False  # `run_cli` as a command (its own argv): it ends the process itself.


def _end(code: int) -> None:
  """A command that has done and said all it will: its exit handlers run (Ray's shutdown among
  them), then the process ends without the interpreter's teardown of JAX, numba and their
  threads, which prints nothing and took 0.5-0.7 s of every run. Elsewhere (a caller gave
  `run_cli` its argv, e.g. to run many command lines in one process) SystemExit, as before."""
  if not _ends_process or sys.getprofile() is not None or sys.gettrace() is not None:
    sys.exit(code)  # Also under a profiler or a tracer (coverage): they write at exit.
  sys.stdout.flush()
  sys.stderr.flush()
  atexit._run_exitfuncs()  # pylint: disable=protected-access  # What exit would run first.
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)


def _ignore_signals_from_here() -> None:
  """The command has done and said all it will: a signal now changes nothing, so it is
  ignored. Left to Python, interpreter shutdown resets a handled signal to its default
  action, and one arriving during the seconds of teardown (JAX, Ray, numba) killed the
  finished command with no line and no documented exit code; Python leaves an ignored
  signal ignored."""
  if _watching and threading.current_thread() is threading.main_thread():
    for signum in EXIT_ON_SIGNAL:
      signal.signal(signum, signal.SIG_IGN)


def exit_infeasible(message: str) -> None:
  _exit_with(message, EXIT_INFEASIBLE)


def exit_if_failed(failed: int, total: int, what: str) -> None:
  """Ends a sweep or experiment whose `failed` of `total` trials or graphs failed: exit 5 when
  all did (and there were any), 4 when some did, with one line; returns when none did."""
  if failed and total:
    _exit_with(f"{failed} of {total} {what} failed (the summary names them)",
               EXIT_ALL_FAILED if failed == total else EXIT_SOME_FAILED)


_exiting = threading.Lock()  # Held by the one thread that ends the process on a signal.


def _wait_for_the_signal_exit() -> None:
  """Another thread is ending the process on a signal (its cleanups may take seconds): this
  one, e.g. the main thread finishing its work meanwhile, must not exit first with 0."""
  threading.Event().wait()


def _exit_on_signal(message: str) -> None:
  """Exits at once: after an interrupt, threads of JAX, numba or Ray may be mid-call, and a
  normal interpreter teardown can crash under them. Outputs are atomic, so none is partial.
  The line says where the run was and how to go on, when the command recorded them."""
  if not _exiting.acquire(blocking=False):
    _wait_for_the_signal_exit()
  parts = [message] + [part for part in (_progress and f"during {_progress}", _resume_hint)
                       if part]
  print("error: " + "; ".join(parts), file=sys.stderr)
  sys.stdout.flush()
  sys.stderr.flush()
  for cleanup in _cleanups:
    cleanup_thread = threading.Thread(target=cleanup, daemon=True)
    cleanup_thread.start()
    cleanup_thread.join(timeout=10.0)  # A cleanup that hangs must not keep the process.
  os._exit(EXIT_ON_SIGNAL.get(_signals[0], 130) if _signals else 130)


HELP_FLAGS = ("--help", "-help", "-h", "--h", "-?", "--helpshort", "-helpshort")
FULL_HELP_FLAGS = ("--helpfull", "-helpfull")


def _flag_line(flag, width: int = 100) -> str:
  import textwrap
  default = flag.default_as_str if flag.default is not None else None
  text = " ".join((flag.help or "").split())
  if default not in (None, "''", "'None'"):
    text += f" (default: {default.strip(chr(39))})"
  return textwrap.fill(text, width, initial_indent=f"  --{flag.name}: ",
                       subsequent_indent="      ")


def help_text(module, groups=None) -> str:
  """A command's help: its docstring, then its flags by topic (`groups`: (title, flag
  names)), or all of the module's own flags under one heading."""
  from absl import flags
  registered = {name: flags.FLAGS[name] for name in flags.FLAGS}
  if groups is None:
    own = flags.FLAGS.get_key_flags_for_module(module)
    groups = (("flags", sorted(f.name for f in own)),)
  listed = {name for _, names in groups for name in names}
  unknown = sorted(listed - set(registered))
  if unknown:  # A group naming a flag the module lacks is a bug of the module, not input.
    raise RuntimeError(f"help groups name unknown flags: {unknown}")
  parts = [(module.__doc__ or "").strip(), ""]
  for title, names in groups:
    parts.append(f"{title}:")
    parts.extend(_flag_line(registered[name]) for name in names)
    parts.append("")
  parts.append("--helpfull lists every flag, absl's and JAX's included.")
  return "\n".join(parts)


def _parse_flags(argv: Sequence[str]) -> list[str]:
  """absl's flag parsing, with a bad flag reported like any bad input: one line, exit 2.
  `--help` prints the command's flags by topic and exits 0 (absl's own exits 1 and leaves
  out flags defined in other modules, such as the device flags)."""
  from absl import flags
  asked = [arg.split("=", 1)[0] for arg in argv[1:]]
  if any(arg in HELP_FLAGS for arg in asked):
    print(help_text(_help_module, getattr(_help_module, "FLAG_GROUPS", None)))
    sys.exit(0)
  if any(arg in FULL_HELP_FLAGS for arg in asked):
    print(flags.FLAGS.get_help())
    sys.exit(0)
  try:
    rest = flags.FLAGS(argv)
  except flags.Error as error:
    message = str(error)
    if "Traceback (most recent call last)" in message:  # A config file raised: its last line.
      head = message.split(":", 1)[0]
      message = f"{head}: {message.strip().splitlines()[-1]}"
    _exit_with(f"{message} (--help lists the flags)")
  except RegalError as error:  # A config file's own validation, run while parsing.
    _exit_with(str(error))
  except (AttributeError, KeyError, SyntaxError) as error:  # ml_collections' config file.
    exit_bad_config(error, argv)
  _refuse_non_finite(flags.FLAGS)
  return rest


def _refuse_non_finite(flag_values) -> None:
  """No float flag takes NaN or infinity: absl's bounds let NaN through (every comparison
  with it is false), and no budget, time limit or tolerance means anything at infinity."""
  for name in flag_values:
    value = flag_values[name].value
    if isinstance(value, float) and not math.isfinite(value):
      _exit_with(f"--{name} must be a finite number, got {value} (--help lists the flags)")


def exit_bad_config(error: Exception, argv: Sequence[str]) -> None:
  """One line for what ml_collections raises on a config flag: an override naming no field
  (AttributeError or KeyError) or a config file that is not Python (SyntaxError)."""
  if isinstance(error, SyntaxError):
    _exit_with(f"{error.filename}, line {error.lineno}: {error.msg} (a config file)")
  field = str(error).strip("\"'")
  named = [arg.split("=", 1)[0] for arg in argv[1:] if arg.startswith("--config.")
           and field in arg.split("=", 1)[0].split(".")]
  _exit_with(f"{named[0] if named else '--config'}: the config has no field {field!r} "
             f"(--help lists the flags)")


_help_module = None  # The module whose --help `_parse_flags` prints (run_cli sets it).


def run_cli(main: Callable[[Sequence[str]], None], argv: Sequence[str] | None = None,
            stop_searches_early: bool = True) -> None:
  """Runs an absl main function: a `RegalError` becomes one line on stderr and exit 2; SIGINT
  or SIGTERM one line and exit 130 or 143 (inside a `stoppable` block, the first one ends the
  block early and main reports what it has before that exit, unless `stop_searches_early` is
  False: a command that writes one report at the end then stops at once, writing nothing);
  `--help` shows the flags of main's module, grouped by its `FLAG_GROUPS` if it has them, and
  exits 0."""
  from absl import app  # Deferred: library users need not import absl.
  global _help_module, _stop_searches_early, _ends_process
  _help_module = sys.modules.get(main.__module__)
  _stop_searches_early = stop_searches_early
  _ends_process = argv is None

  def guarded_main(argv: Sequence[str]) -> None:
    # JAX logs at INFO that it found no TPU on every machine without one: noise, not news.
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    watch_signals()
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
    _ignore_signals_from_here()
    _end(0)

  app.run(guarded_main, argv=None if argv is None else list(argv), flags_parser=_parse_flags)


def define_registered(name: str, default: str | None, registry, help_text: str,
                      also: Sequence[str] = ()):
  """A string flag whose value names a record of `registry` (`regal_datasets.registry`) or
  one of `also`: its choices are the registry's when the flags are read, so a record
  registered after the flag was defined is accepted; `--help` lists those of definition."""
  from absl import flags

  class RegisteredParser(flags.ArgumentParser):
    def parse(self, argument):
      if argument in registry or argument in also:
        return argument
      known = "|".join([*registry.names(), *(a for a in also if a not in registry)])
      raise ValueError(f"value should be one of <{known}>")

    def flag_type(self) -> str:
      return "string enum"

  known = "|".join([*registry.names(), *(a for a in also if a not in registry)])
  return flags.DEFINE(RegisteredParser(), name, default, f"<{known}>: {help_text}")
