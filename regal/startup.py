"""What a regal process sets up before JAX and numba load: where compiled code persists
between runs (JAX's compilation cache and numba's kernels), and one host device per core.

A run compiles its search programs and scoring kernels once; the next run of the same shapes
loads them (`experiments/results/startup/startup.md` measures what each cache saves). They live
under `$REGAL_CACHE_DIR` (default `$XDG_CACHE_HOME/regal`, else `~/.cache/regal`):
`jax/` (JAX's cache), `programs/` (the host search's executables, loaded without tracing:
`regal_brkga.programs`) and `numba/`. `REGAL_CACHE_DIR=off` leaves JAX and numba to their own
defaults (JAX keeps no programs; numba keeps kernels beside its sources, where writable) and
keeps no executables; `JAX_COMPILATION_CACHE_DIR`, `REGAL_PROGRAM_CACHE` or `NUMBA_CACHE_DIR`,
when set, win. Concurrent runs share both: numba writes each kernel to a
temporary file and renames it; JAX writes an entry whole under a key of its content, and a run
that reads an entry while another is still writing it compiles the program itself (JAX warns
once). JAX's cache is unbounded (a default run's programs take ~2 MB; delete the directory to
reclaim it): bounding it turns on an eviction that breaks on entries a run without the bound
wrote. So is `programs/` (~2.6 MB a graph size, kept per version of the source: entries of an
older version are never read again, and the folder may be deleted at any time).

The caches are set through the environment before JAX or numba load (importing `regal` does
it), so that subprocesses and Ray workers inherit them; where JAX loaded first without a cache
of its own, its configuration is updated too. A numba cache entry that cannot be read (a file
truncated by a full disk or a kill, or corrupted) is a miss: the kernel compiles again and its
entry is written anew, where numba would fail every later run (`tolerate_unreadable_kernels`).
Nothing here imports JAX or numba: a command line can refuse a mistake before they load.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

def cache_root() -> str | None:
  """The directory both caches live under; None: left to JAX's and numba's defaults."""
  root = os.environ.get("REGAL_CACHE_DIR")
  if root == "off":
    return None
  if not root:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    root = os.path.join(base, "regal")
  return root


def use_persistent_caches() -> None:
  """Points JAX and numba at the caches (`cache_root`) unless told otherwise; every compiled
  JAX program is kept, however quickly it compiled (the search compiles many small ones)."""
  tolerate_unreadable_kernels()
  root = cache_root()
  if root is None:
    return
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(root, "jax"))
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(root, "numba"))
  os.environ.setdefault("REGAL_PROGRAM_CACHE", os.path.join(root, "programs"))
  jax = sys.modules.get("jax")
  if jax is not None and jax.config.jax_compilation_cache_dir is None:
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs",
                      float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))


_NUMBA_CACHING = "numba.core.caching"


def _tolerant(caching) -> None:
  """numba's cache file reader, with an unreadable index or entry read as a miss (numba then
  compiles and saves the entry over it)."""
  cache_file = caching.IndexDataCacheFile
  if getattr(cache_file, "_regal_tolerant", False):
    return
  load_index, load_data = cache_file._load_index, cache_file._load_data

  def _load_index(self):
    try:
      return load_index(self)
    except Exception:  # pylint: disable=broad-except  # pickle raises many kinds on garbage.
      return {}

  def _load_data(self, name):
    try:
      return load_data(self, name)
    except OSError:
      raise
    except Exception as error:  # pylint: disable=broad-except
      raise OSError(f"unreadable numba cache entry {name}") from error  # `load`: a miss.

  cache_file._load_index, cache_file._load_data = _load_index, _load_data
  cache_file._regal_tolerant = True


class _AfterNumbaCaching(importlib.abc.MetaPathFinder):
  """Makes numba's cache reader tolerant (`_tolerant`) as soon as numba loads it."""

  def find_spec(self, fullname, path, target=None):
    if fullname != _NUMBA_CACHING:
      return None
    spec = importlib.machinery.PathFinder.find_spec(fullname, path)
    if spec is None or spec.loader is None:
      return spec
    execute = spec.loader.exec_module

    def exec_module(module):
      execute(module)
      _tolerant(module)

    spec.loader.exec_module = exec_module
    return spec


def tolerate_unreadable_kernels() -> None:
  """numba reads an unreadable cache entry as a miss, from whenever it loads (now, if it has)."""
  if _NUMBA_CACHING in sys.modules:
    _tolerant(sys.modules[_NUMBA_CACHING])
  elif not any(isinstance(finder, _AfterNumbaCaching) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AfterNumbaCaching())


_HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def use_all_cpu_cores() -> None:
  """Asks XLA for one host device per CPU core (`regal.scoring.parallel` spreads a
  population over them); no effect once JAX has started its backends."""
  flags = os.environ.get("XLA_FLAGS", "")
  if _HOST_DEVICES_FLAG not in flags:
    os.environ["XLA_FLAGS"] = f"{flags} {_HOST_DEVICES_FLAG}={os.cpu_count() or 1}".strip()
