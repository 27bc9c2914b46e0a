"""How long a block of work spent compiling, so that reports can tell compiling from running.

JAX: tracing, lowering to MLIR and compiling a program, or loading it from the persistent
cache (`regal.startup`) or a kept executable (`regal_brkga.programs`), from monitoring events. numba: compiling a kernel (loading
one from its cache is not counted), outermost compiles only (a kernel's callees compile inside
it). Listeners are installed once per process; clocks may nest, and each hears everything
compiled, on any thread, while it runs.
"""
from __future__ import annotations

import threading
import time

import jax
from numba.core import event as numba_event

from regal_brkga import programs

JAX_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
              "/jax/core/compile/jaxpr_to_mlir_module_duration",
              "/jax/core/compile/backend_compile_duration",
              programs.LOADED)

_running: list["CompileClock"] = []
_lock = threading.Lock()
_installed = False


def _add(field: str, seconds: float) -> None:
  with _lock:
    for clock in _running:
      setattr(clock, field, getattr(clock, field) + seconds)


def _heard_jax(event: str, duration: float, **_) -> None:
  if event in JAX_EVENTS:
    _add("jax_seconds", duration)
  if event == "/jax/core/compile/backend_compile_duration":  # Compiled, or read from the cache.
    _add("jax_backend", 1)


def _heard_jax_event(event: str, **_) -> None:
  if event == "/jax/compilation_cache/cache_hits":
    _add("jax_cache_hits", 1)


class _NumbaCompiles(numba_event.Listener):
  """Times outermost numba compiles (per thread)."""

  def __init__(self):
    self.local = threading.local()

  def on_start(self, event) -> None:
    depth = getattr(self.local, "depth", 0)
    if depth == 0:
      self.local.start = time.perf_counter()
    self.local.depth = depth + 1

  def on_end(self, event) -> None:
    self.local.depth -= 1
    if self.local.depth == 0:
      _add("numba_seconds", time.perf_counter() - self.local.start)
      _add("numba_compiled", 1)


def _install() -> None:
  global _installed
  if not _installed:
    jax.monitoring.register_event_duration_secs_listener(_heard_jax)
    jax.monitoring.register_event_listener(_heard_jax_event)
    numba_event.register("numba:compile", _NumbaCompiles())
    _installed = True


class CompileClock:
  """`with CompileClock() as clock:` then `clock.seconds` (JAX and numba together),
  `clock.jax_seconds`, `clock.numba_seconds`, and `clock.compiled`: how many programs or
  kernels were compiled rather than loaded from a cache; readable while the block runs."""

  def __init__(self):
    self.jax_seconds = 0.0
    self.numba_seconds = 0.0
    self.jax_backend = self.jax_cache_hits = self.numba_compiled = 0

  @property
  def seconds(self) -> float:
    return self.jax_seconds + self.numba_seconds

  @property
  def compiled(self) -> int:
    """Programs and kernels compiled here: XLA's compiles its cache did not serve (a program
    holding a host callback never goes through the cache), and numba's."""
    return max(self.jax_backend - self.jax_cache_hits, 0) + self.numba_compiled

  def __enter__(self) -> "CompileClock":
    _install()
    with _lock:
      _running.append(self)
    return self

  def __exit__(self, *exc) -> None:
    with _lock:
      _running.remove(self)
