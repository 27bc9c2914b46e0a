"""Atomic writes: a failure midway leaves the old file and no temp file behind."""
import os
import stat

import pytest

from regal_datasets import atomic, errors


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


def test_written_files_take_the_umask_mode_or_keep_the_replaced_ones(tmp_path):
  old = os.umask(0o022)
  try:
    fresh = tmp_path / "fresh.json"
    atomic.write_text(str(fresh), "x")
    assert fresh.stat().st_mode & 0o777 == 0o644
    kept = tmp_path / "kept.json"
    kept.write_text("old")
    kept.chmod(0o640)
    atomic.write_text(str(kept), "new")
    assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_text() == "new"
  finally:
    os.umask(old)


def test_temp_files_of_dead_writers_are_removed_by_the_next_write(tmp_path):
  import subprocess
  import sys
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True).stdout.strip()
  stale = tmp_path / f".result.json.{dead}.abc123.tmp"  # What a SIGKILL midway leaves.
  live = tmp_path / f".result.json.{1}.xyz789.tmp"  # pid 1 runs: a writer still at work.
  stale.write_text("")
  live.write_text("")
  atomic.write_text(str(tmp_path / "result.json"), "{}")
  assert not stale.exists() and live.exists()


@pytest.mark.parametrize("make, flag, inputs, extensions, message", [
    (lambda d: d / "graph.json", "--out", ["graph.json"], (), "which it would overwrite"),
    (lambda d: d / "chart.pdf.txt", "--gantt", [], atomic.CHART_EXTENSIONS, "use one of"),
    (lambda d: d / "file" / "r.json", "--out", [], (), "is a file, not a directory"),
    (lambda d: d, "--out", [], (), "is a directory"),
])
def test_outputs_are_checked_before_any_work(tmp_path, make, flag, inputs, extensions, message):
  (tmp_path / "graph.json").write_text("{}")
  (tmp_path / "file").write_text("")
  with pytest.raises(atomic.errors.ConfigError, match=message):
    atomic.check_output(str(make(tmp_path)), flag,
                        [str(tmp_path / name) for name in inputs], extensions)
  atomic.check_output(str(tmp_path / "new" / "deeper" / "r.json"), "--out",
                      [str(tmp_path / "graph.json")])  # Creatable: fine.


def test_a_symlink_is_written_through_and_a_device_in_place(tmp_path):
  """As open() would: the link stays and its target gets the content; /dev/null stays a
  character device (a rename onto it would have replaced it by a regular file)."""
  target = tmp_path / "target.json"
  target.write_text("old")
  link = tmp_path / "link.json"
  link.symlink_to(target)
  atomic.check_output(str(link), "--out")
  atomic.write_text(str(link), "new")
  assert link.is_symlink() and target.read_text() == "new"
  atomic.check_output(os.devnull, "--out")
  atomic.write_text(os.devnull, "discarded")
  assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
  with pytest.raises(errors.ConfigError, match="is the input"):
    atomic.check_output(str(link), "--out", [str(target)])


def test_the_longest_legal_name_is_written_and_errors_name_the_users_path(tmp_path):
  """A 245-byte name is legal, but ".NAME.PID.RANDOM.tmp" beside it passed 255 bytes; and a
  write that fails names the path asked for, not the temp file."""
  path = tmp_path / ("n" * 240 + ".json")
  atomic.check_output(str(path), "--out")
  atomic.write_text(str(path), "ok")
  assert path.read_text() == "ok" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]
  with pytest.raises(errors.ConfigError, match="longer than the 255 bytes"):
    atomic.check_output(str(tmp_path / ("n" * 300)), "--out")
  with pytest.raises(errors.ConfigError) as raised:
    atomic.write_text("/proc/regal_test_output.json", "x")
  assert str(raised.value).startswith("/proc/regal_test_output.json: cannot write it")
  with pytest.raises(errors.ConfigError, match="names a directory"):
    atomic.check_output(str(tmp_path / "folder") + os.sep, "--out")
