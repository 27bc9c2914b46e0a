"""Atomic file writes: a reader never sees a half-written output or checkpoint."""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Iterator


@contextlib.contextmanager
def open_for_write(path: str, mode: str = "w") -> Iterator[IO]:
  """Yields a temp file beside `path`; renames it onto `path` only if the block succeeds."""
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, temp_path = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.",
                                   suffix=".tmp")
  try:
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
