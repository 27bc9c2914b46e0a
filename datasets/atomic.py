"""Atomic file writes: a reader never sees a half-written output or checkpoint.

A write goes to `.NAME.PID.RANDOM.tmp` beside the target and is renamed onto it only when
complete. A process killed midway leaves that temp file behind; the next write beside it
removes temp files of processes that no longer run. Written files get the mode a plain
`open()` would give (the umask's, or the mode of the file replaced), not mkstemp's 0600.
"""
from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from typing import IO, Iterator, Sequence

from datasets import errors

CHART_EXTENSIONS = ("png", "pdf", "svg")


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def _process_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Another user's process: alive.
    return True
  return True


def remove_stale_temp_files(path: str) -> list[str]:
  """Removes the temp files a killed writer of `path` left behind; returns their paths."""
  directory, name = os.path.split(os.path.abspath(path))
  removed = []
  for temp in glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(name)}.*.tmp")):
    parts = os.path.basename(temp)[len(name) + 2:].split(".")
    if len(parts) == 3 and parts[0].isdigit() and not _process_alive(int(parts[0])):
      with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
        removed.append(temp)
  return removed


def _target_mode(path: str) -> int:
  try:
    return os.stat(path).st_mode & 0o7777
  except FileNotFoundError:
    return 0o666 & ~_umask()


@contextlib.contextmanager
def open_for_write(path: str, mode: str = "w") -> Iterator[IO]:
  """Yields a temp file beside `path`; renames it onto `path` only if the block succeeds."""
  if os.path.isdir(path):
    raise errors.ConfigError(f"{path}: is a directory, cannot write a file there")
  directory = os.path.dirname(os.path.abspath(path))
  try:
    os.makedirs(directory, exist_ok=True)
  except (FileExistsError, NotADirectoryError):
    raise errors.ConfigError(f"{path}: a parent of it is a file, not a directory") from None
  remove_stale_temp_files(path)
  prefix = f".{os.path.basename(path)}.{os.getpid()}."
  fd, temp_path = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
  try:
    os.fchmod(fd, _target_mode(path))
    with os.fdopen(fd, mode) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(temp_path, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temp_path)
    raise


def write_text(path: str, text: str) -> None:
  with open_for_write(path) as f:
    f.write(text)


def write_bytes(path: str, data: bytes) -> None:
  with open_for_write(path, "wb") as f:
    f.write(data)


def check_output(path: str, flag: str, inputs: Sequence[str] = (),
                 extensions: Sequence[str] = ()) -> None:
  """Refuses, before any work is done, an output path that could not be written or would
  replace an input: an existing directory, a parent that is a file or not writable, one of
  `inputs`, or (with `extensions`) a file name whose extension is not one of them."""
  where = f"{flag} {path}"
  if not path:
    raise errors.ConfigError(f"{flag}: empty path")
  if os.path.isdir(path):
    raise errors.ConfigError(f"{where}: is a directory")
  for source in inputs:
    if source and os.path.exists(source) and os.path.exists(path) and (
        os.path.samefile(source, path)):
      raise errors.ConfigError(f"{where}: is the input {source}, which it would overwrite")
  if extensions:
    extension = os.path.splitext(path)[1].lstrip(".").lower()
    if extension not in extensions:
      raise errors.ConfigError(f"{where}: the extension names the format; use one of "
                               f"{', '.join('.' + e for e in extensions)}")
  ancestor = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(ancestor):
    ancestor = os.path.dirname(ancestor)
  if not os.path.isdir(ancestor):
    raise errors.ConfigError(f"{where}: {ancestor} is a file, not a directory")
  if not os.access(ancestor, os.W_OK | os.X_OK):
    raise errors.ConfigError(f"{where}: {ancestor} is not writable")
