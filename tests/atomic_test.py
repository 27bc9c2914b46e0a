"""Atomic writes: a failure midway leaves the old file and no temp file behind."""
import pytest

from datasets import atomic


def test_failed_write_keeps_old_content(tmp_path):
  target = tmp_path / "result.json"
  target.write_text("old")
  with pytest.raises(RuntimeError):
    with atomic.open_for_write(str(target)) as f:
      f.write("half of the new")
      raise RuntimeError("killed midway")
  assert target.read_text() == "old"
  assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_successful_write_replaces(tmp_path):
  target = tmp_path / "sub" / "result.bin"
  with atomic.open_for_write(str(target), "wb") as f:
    f.write(b"\x00new")
  assert target.read_bytes() == b"\x00new"
