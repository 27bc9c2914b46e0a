"""Jitted programs whose executables are kept on disk, so a later process runs them without
tracing or lowering them again.

JAX's persistent compilation cache keeps executables, but a new process still traces each
program and lowers it to MLIR to find its entry: in a cached default run, 0.9 s of the 1.2 s
spent compiling (`experiments/results/startup/startup.md`). A `Program` is `jax.jit(fn)` that
keeps each executable it compiles (JAX's ahead-of-time serialization) under a key of
everything the executable depends on: the function's name, a digest of the source of the
packages it runs, its arguments' structure, shapes, dtypes and static values, and JAX's
version, configuration and devices. A later process loads it (a read and a deserialization)
instead; an entry that cannot be read is compiled and written again. Nothing is kept unless
`REGAL_PROGRAM_CACHE` names a folder (`regal.startup` sets it beside JAX's cache).

Loading is timed as JAX times compiling, as the monitoring event `LOADED` (seconds), so that
a clock of compile time counts it too.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
import time
from typing import Any, Callable

import jax
from jax.experimental import serialize_executable

CACHE_ENV = "REGAL_PROGRAM_CACHE"
LOADED = "/regal/programs/load_duration"  # A monitoring event: seconds spent loading one.
FORMAT = 2  # Of the files written; a change invalidates every entry.


@functools.lru_cache(maxsize=None)
def _source_digest(packages: tuple[str, ...]) -> str:
  """A digest of every source file of the loaded packages (their folders, sorted)."""
  digest = hashlib.sha256()
  for package in packages:
    module = sys.modules.get(package)
    for folder in getattr(module, "__path__", ()):
      for root, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for name in sorted(files):
          if name.endswith(".py"):
            path = os.path.join(root, name)
            digest.update(path.encode())
            with open(path, "rb") as f:
              digest.update(f.read())
  return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _environment() -> str:
  """What else an executable depends on: JAX's versions, its configuration, the devices."""
  import jaxlib
  config = sorted((name, repr(value)) for name, value in jax.config.values.items())
  return repr((FORMAT, jax.__version__, jaxlib.__version__, config,
               os.environ.get("XLA_FLAGS", ""), [repr(d) for d in jax.devices()]))


_typeof = getattr(jax, "typeof", None) or jax.core.get_aval  # `typeof` from JAX 0.4.36.
_cache_hits = [0]  # Executables JAX's persistent cache has served in this process.


def _heard(event: str, **_) -> None:
  if event == "/jax/compilation_cache/cache_hits":
    _cache_hits[0] += 1


jax.monitoring.register_event_listener(_heard)


def _abstract(leaf: Any) -> str:
  """A leaf's type as the executable sees it: shape, dtype after JAX's canonicalization, and
  weak type (a Python scalar's); part of the key on disk."""
  try:
    return str(_typeof(leaf))
  except TypeError:
    return repr(leaf)


def _quick(leaf: Any) -> Any:
  """What tells one call's leaf from another's within a process, cheaply (`_abstract` is
  read only when a signature is new)."""
  shape = getattr(leaf, "shape", None)
  if shape is None:
    return type(leaf)
  return (type(leaf), shape, leaf.dtype, getattr(leaf, "weak_type", False))


class Program:
  """`jax.jit(fn, static_argnums)`, whose executables are kept on disk (module doc). Called as
  the function is; `packages`: the top-level packages whose source it runs (their digest is
  part of the key)."""

  def __init__(self, fn: Callable, static_argnums: tuple[int, ...] = (),
               packages: tuple[str, ...] = ("regal_brkga",)):
    self.fn, self.static = fn, tuple(static_argnums)
    self.packages = tuple(sorted(set(packages) | {"regal_brkga"}))
    self.jitted = jax.jit(fn, static_argnums=self.static)
    self.name = f"{fn.__module__}.{getattr(fn, '__qualname__', repr(fn))}"
    self._compiled: dict[Any, Callable] = {}
    functools.update_wrapper(self, fn)

  def __call__(self, *args):
    static = tuple(args[i] for i in self.static)
    dynamic = [arg for i, arg in enumerate(args) if i not in self.static]
    leaves, treedef = jax.tree.flatten(dynamic)
    quick = (treedef, static, tuple(_quick(leaf) for leaf in leaves))
    compiled = self._compiled.get(quick)
    if compiled is None:
      signature = (treedef, static, tuple(_abstract(leaf) for leaf in leaves))
      compiled = self._compiled[quick] = self._executable(args, signature)
    return compiled(*dynamic)

  def _executable(self, args, signature) -> Callable:
    folder = os.environ.get(CACHE_ENV)
    if not folder:
      return self.jitted.lower(*args).compile()
    key = hashlib.sha256(repr((self.name, _source_digest(self.packages), _environment(),
                                signature)).encode()).hexdigest()
    path = os.path.join(folder, f"{self.fn.__name__}-{key[:40]}.bin")
    started = time.perf_counter()
    try:
      with open(path, "rb") as f:
        payload, in_tree, out_tree, device_ids = pickle.load(f)
      by_id = {device.id: device for device in jax.devices()}
      compiled = serialize_executable.deserialize_and_load(
          payload, in_tree, out_tree, execution_devices=[by_id[i] for i in device_ids])
    except Exception:  # pylint: disable=broad-except  # Missing, partial, or from elsewhere.
      compiled = None
    if compiled is not None:
      jax.monitoring.record_event_duration_secs(LOADED, time.perf_counter() - started)
      return compiled
    # An executable JAX's own cache loaded does not serialize whole (XLA's CPU client then
    # fails to run the copy: "Function ... not found"). Named after its key, the program is
    # one no entry of JAX's cache holds, so it compiles here; it is kept only if it did.
    hits = _cache_hits[0]
    compiled = jax.jit(_named(self.fn, f"{self.fn.__name__}_{key[:16]}"),
                       static_argnums=self.static).lower(*args).compile()
    if _cache_hits[0] == hits:
      _write(path, compiled)
    return compiled


def _named(fn: Callable, name: str) -> Callable:
  """`fn` under another name (the name of the program JAX lowers it to)."""
  def renamed(*args):
    return fn(*args)
  renamed.__name__ = renamed.__qualname__ = name
  return renamed


def _write(path: str, compiled) -> None:
  """Keeps `compiled` at `path`, whole or not at all; a cache that cannot be written only costs
  the next process a compile."""
  temporary = None
  try:
    devices = [device.id for device in compiled.runtime_executable().local_devices()]
    blob = pickle.dumps((*serialize_executable.serialize(compiled), devices))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".program-")
    with os.fdopen(handle, "wb") as f:
      f.write(blob)
    os.replace(temporary, path)  # A reader never sees half an entry.
  except Exception:  # pylint: disable=broad-except  # Unwritable, or not serializable.
    if temporary is not None and os.path.exists(temporary):
      os.remove(temporary)
