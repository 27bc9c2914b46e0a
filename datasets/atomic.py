"""Atomic file writes: a reader never sees a half-written output or checkpoint.

A write goes to `.NAME.PID.RANDOM.tmp` beside the target (NAME cut so the temp name stays
within the file system's limit) and is renamed onto it only when complete. A command that
SIGINT or SIGTERM ends midway removes its temp files on the way out; a process killed outright
leaves its temp file behind, and the next write beside it removes temp files of processes that
no longer run. Written files get the mode a plain `open()` would give (the umask's, or the
mode of the file replaced), not mkstemp's 0600. As with `open()`, a symlink is written through
(its target gets the new content; the link stays) and a device node or FIFO such as /dev/null
is written in place, never replaced by a regular file. Errors name the path asked for, not the
temp file.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import stat
import tempfile
from typing import IO, Iterator, Sequence

from regal_datasets import cli, errors

CHART_EXTENSIONS = ("png", "pdf", "svg")
# ".NAME.PID.RANDOM.tmp" must fit NAME_MAX (255 bytes on Linux): PID up to 7 digits, mkstemp's
# 8 random characters, three dots and ".tmp" leave this much of the name.
_TEMP_NAME_BYTES = 255 - (1 + 7 + 1 + 8 + 4) - 8


# Temp files being written now: a command that a signal ends mid-write removes them on its way
# out (`regal_datasets.cli.at_interrupt`), instead of leaving them for the next write to clear.
_WRITING: set[str] = set()


def _remove_temp_files_being_written() -> None:
  for temp_path in list(_WRITING):
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temp_path)


cli.at_interrupt(_remove_temp_files_being_written)


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


def _temp_stem(name: str) -> str:
  """The part of a file name its temp files start with: whole, or cut to fit the limit at a
  character boundary (names are bytes on disk)."""
  encoded = os.fsencode(name)
  if len(encoded) <= _TEMP_NAME_BYTES:
    return name
  stem = os.fsdecode(encoded[:_TEMP_NAME_BYTES])
  while stem and "\udc80" <= stem[-1] <= "\udcff":  # A character cut in two: drop its bytes.
    stem = stem[:-1]
  return stem


def remove_stale_temp_files(path: str) -> list[str]:
  """Removes the temp files a killed writer of `path` left behind; returns their paths."""
  directory, name = os.path.split(os.path.abspath(path))
  stem = _temp_stem(name)
  removed = []
  for temp in glob.glob(os.path.join(glob.escape(directory), f".{glob.escape(stem)}.*.tmp")):
    parts = os.path.basename(temp)[len(stem) + 2:].split(".")
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


def _target(path: str) -> tuple[str, bool]:
  """(the file a write of `path` lands in, whether it is written in place): symlinks are
  followed; a device node or FIFO cannot be replaced, only written."""
  real = os.path.realpath(path)
  try:
    mode = os.stat(real).st_mode
  except OSError:  # Absent (or a name too long to exist): a new regular file.
    return real, False
  return real, not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _cannot_write(path: str, error: OSError) -> errors.ConfigError:
  return errors.ConfigError(f"{path}: cannot write it ({error.strerror or error})")


@contextlib.contextmanager
def open_for_write(path: str, mode: str = "w") -> Iterator[IO]:
  """Yields a temp file beside `path`; renames it onto `path` only if the block succeeds."""
  if os.path.isdir(path) or path.endswith(os.sep):
    raise errors.ConfigError(f"{path}: is a directory, cannot write a file there")
  target, in_place = _target(path)
  if in_place:
    try:
      f = open(target, mode)  # pylint: disable=consider-using-with
    except OSError as error:
      raise _cannot_write(path, error) from None
    with f:
      yield f
    return
  directory = os.path.dirname(target)
  try:
    os.makedirs(directory, exist_ok=True)
  except (FileExistsError, NotADirectoryError):
    raise errors.ConfigError(f"{path}: a parent of it is a file, not a directory") from None
  except OSError as error:
    raise _cannot_write(path, error) from None
  remove_stale_temp_files(target)
  prefix = f".{_temp_stem(os.path.basename(target))}.{os.getpid()}."
  try:
    fd, temp_path = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
  except OSError as error:
    raise _cannot_write(path, error) from None
  _WRITING.add(temp_path)
  try:
    os.fchmod(fd, _target_mode(target))
    with os.fdopen(fd, mode) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    os.replace(temp_path, target)
  except BaseException as error:
    with contextlib.suppress(FileNotFoundError):
      os.unlink(temp_path)
    if isinstance(error, OSError) and error.filename in (None, temp_path):
      raise _cannot_write(path, error) from None
    raise
  finally:
    _WRITING.discard(temp_path)


def cut_partial_line(path: str) -> bool:
  """Cuts a last line that a killed run left without its newline, so the next record starts
  on a line of its own instead of being glued to it (and lost with it); True if it cut one."""
  if not os.path.exists(path):
    return False
  with open(path, "rb+") as f:
    data = f.read()
    if not data or data.endswith(b"\n"):
      return False
    f.truncate(data.rfind(b"\n") + 1)
  return True


def append_json_line(path: str, record: dict) -> None:
  """A crash-safe journal append: one JSON line, synced to disk before returning, after
  cutting a partial line a kill left (`cut_partial_line`). A kill at any instant loses at
  most the record being written, never one already returned."""
  directory = os.path.dirname(path)
  if directory:
    os.makedirs(directory, exist_ok=True)
  cut_partial_line(path)
  with open(path, "a") as f:
    f.write(json.dumps(record) + "\n")
    f.flush()
    os.fsync(f.fileno())


def read_json_lines(path: str) -> list[dict]:
  """The JSON objects of a journal, in order; lines that do not parse (a line cut by a
  kill) are skipped; a missing file holds none."""
  records = []
  if not os.path.exists(path):
    return records
  with open(path) as f:
    for line in f:
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        continue
      if isinstance(record, dict):
        records.append(record)
  return records


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
  if path.endswith(os.sep):
    raise errors.ConfigError(f"{where}: names a directory (it ends with {os.sep}); give a file "
                             f"name")
  for source in inputs:
    if source and os.path.exists(source) and os.path.exists(path) and (
        os.path.samefile(source, path)):
      raise errors.ConfigError(f"{where}: is the input {source}, which it would overwrite")
  if extensions:
    extension = os.path.splitext(path)[1].lstrip(".").lower()
    if extension not in extensions:
      raise errors.ConfigError(f"{where}: the extension names the format; use one of "
                               f"{', '.join('.' + e for e in extensions)}")
  target, in_place = _target(path)
  if in_place:
    if not os.access(target, os.W_OK):
      raise errors.ConfigError(f"{where}: is not writable")
    return
  ancestor = _nearest_directory(os.path.dirname(target), where)
  if not os.access(ancestor, os.W_OK | os.X_OK):
    raise errors.ConfigError(f"{where}: {ancestor} is not writable")
  _probe(where, ancestor, os.path.basename(target) if ancestor == os.path.dirname(target)
         else "probe")


def check_outputs(named: Sequence[tuple[str, str | None, Sequence[str]]],
                  inputs: Sequence[str] = ()) -> None:
  """`check_output` of each (flag, path or None, extensions), and no two on one file."""
  given = [(flag, path, extensions) for flag, path, extensions in named if path]
  for flag, path, extensions in given:
    check_output(path, flag, inputs, extensions)
  paths = [os.path.realpath(path) for _, path, _ in given]
  if len(set(paths)) < len(paths):
    raise errors.ConfigError(f"{', '.join(flag for flag, _, _ in given)} must name different "
                             f"files")


def check_output_dir(path: str, flag: str) -> None:
  """Refuses, before any work, a folder output that is a file, lies under one, or cannot be
  written (tried by creating a file in it or its nearest existing parent)."""
  where = f"{flag} {path}"
  if not path:
    raise errors.ConfigError(f"{flag}: empty path")
  if os.path.exists(path) and not os.path.isdir(path):
    raise errors.ConfigError(f"{where}: is a file; it names a folder")
  _probe(where, _nearest_directory(os.path.abspath(path), where), "probe")


def _nearest_directory(path: str, where: str) -> str:
  """`path` or its nearest existing parent, which must be a directory (a write creates the
  rest)."""
  while not os.path.exists(path):
    path = os.path.dirname(path)
  if not os.path.isdir(path):
    raise errors.ConfigError(f"{where}: {path} is a file, not a directory")
  return path


def _probe(where: str, directory: str, name: str) -> None:
  """Creates and removes a temp file as the write will, so that what permissions alone do not
  tell (a read-only or special file system, a name too long for it) fails now, not after the
  work."""
  try:
    fd, temp_path = tempfile.mkstemp(dir=directory, prefix=f".{_temp_stem(name)}.{os.getpid()}.",
                                     suffix=".tmp")
  except OSError as error:
    raise errors.ConfigError(f"{where}: cannot write there ({error.strerror or error})") from None
  os.close(fd)
  os.unlink(temp_path)
  name_max = os.pathconf(directory, "PC_NAME_MAX")
  if len(os.fsencode(name)) > name_max:
    raise errors.ConfigError(f"{where}: the file name is longer than the {name_max} bytes the "
                             f"file system allows")
