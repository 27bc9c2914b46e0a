"""The suite's own set-up (`conftest.py`): what a test session leaves behind."""
import os
import pathlib
import shutil
import subprocess
import sys

RECORD = '''import os


def test_records_the_compilation_cache():
  with open("cache_dir.txt", "w") as f:
    f.write(os.environ["JAX_COMPILATION_CACHE_DIR"])
'''


def _session(directory: pathlib.Path, env: dict) -> str:
  """Runs a one-test session with the suite's conftest in `directory`; the cache it used."""
  done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         "record_test.py"], cwd=directory, env=env, capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 0, done.stdout + done.stderr
  return (directory / "cache_dir.txt").read_text()


def test_a_session_removes_the_compilation_cache_it_made_and_keeps_a_named_one(tmp_path):
  shutil.copy(pathlib.Path(__file__).with_name("conftest.py"), tmp_path)
  (tmp_path / "record_test.py").write_text(RECORD)
  env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
  env["TMPDIR"] = str(tmp_path)
  made = _session(tmp_path, env)
  assert made.startswith(str(tmp_path)) and not os.path.exists(made)
  named = tmp_path / "named_cache"
  named.mkdir()
  assert _session(tmp_path, {**env, "JAX_COMPILATION_CACHE_DIR": str(named)}) == str(named)
  assert named.is_dir()
