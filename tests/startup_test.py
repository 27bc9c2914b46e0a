"""What `regal.startup` sets before the libraries load: a numba cache entry that cannot be read
(truncated by a kill or a full disk, or corrupted) is a miss, and the next run writes it anew,
where numba alone fails every later run until the file is deleted by hand."""
import os
import subprocess
import sys

KERNEL = """
import regal  # Sets the caches up, as every command does.
import numba

@numba.njit(cache=True)
def plus_one(x):
  return x + 1

print(plus_one(41))
"""


def _run(script, cache):
  # The caches under `cache` alone (a set NUMBA_CACHE_DIR would win over REGAL_CACHE_DIR).
  env = {name: value for name, value in os.environ.items()
         if name not in ("NUMBA_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR")}
  return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                        env={**env, "REGAL_CACHE_DIR": str(cache)}, timeout=120)


def test_an_unreadable_kernel_cache_entry_is_compiled_and_written_again(tmp_path):
  script, cache = tmp_path / "kernel.py", tmp_path / "cache"
  script.write_text(KERNEL)
  assert _run(script, cache).stdout.strip() == "42"
  entries = [p for p in (cache / "numba").rglob("*") if p.suffix in (".nbi", ".nbc")]
  assert {p.suffix for p in entries} == {".nbi", ".nbc"}
  for corrupted in (".nbi", ".nbc"):  # The index, then the compiled entry.
    for path in entries:
      if path.suffix == corrupted:
        path.write_bytes(path.read_bytes()[:20])
    run = _run(script, cache)
    assert run.returncode == 0 and run.stdout.strip() == "42", run.stderr[-2000:]
    assert _run(script, cache).stdout.strip() == "42"  # Written anew: read back.
