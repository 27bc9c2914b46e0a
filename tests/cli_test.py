"""The command-line entry points: they work, and bad input gives one line and a non-zero exit."""
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT


def run(*args, env_extra=None):
  env = {**os.environ, **(env_extra or {})}
  return subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, capture_output=True,
                        text=True, env=env, timeout=120)


def assert_one_line_error(result, message):
  assert result.returncode == 2, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
  assert message in lines[0]
  assert "Traceback" not in result.stderr


def test_build_default_dataset_into_cache(tmp_path):
  result = run("regal_datasets.build", "--num_train", "4", "--num_valid", "2", "--num_test", "2",
               env_extra={"REGAL_DATA_DIR": str(tmp_path)})
  assert result.returncode == 0, result.stderr
  assert "train" in result.stdout and "valid" in result.stdout
  (folder,) = list(tmp_path.iterdir())
  summary = json.loads((folder / "summary.json").read_text())
  assert summary["splits"]["train"]["graphs"] == 8
  assert summary["splits"]["test"]["graphs"] == 2


def test_build_rejects_bad_config(tmp_path):
  result = run("regal_datasets.build", "--num_test=-3", "--out", str(tmp_path / "d"))
  assert_one_line_error(result, "flag --num_test=-3: -3 is not an integer in the range [1,")
  assert not (tmp_path / "d").exists()


def test_convert_round_trip(tmp_path, shared_graphs):
  source = shared_graphs / "doppler" / "chain_mm_112nodes.txt"
  out = tmp_path / "chain.json"
  result = run("regal_datasets.convert", "--graph", str(source), "--out", str(out))
  assert result.returncode == 0, result.stderr
  assert "76 ops" in result.stdout and "80 data edges" in result.stdout
  back = tmp_path / "chain.txt"
  assert run("regal_datasets.convert", "--graph", str(out), "--out", str(back)).returncode == 0
  assert run("regal_datasets.convert", "--graph", str(back)).stdout.split(":", 1)[1] == \
      result.stdout.split(":", 1)[1].split("\n", 1)[0] + "\n"


@pytest.mark.parametrize("content, message", [
    ("3\n\n0, 1, 2\n1, 2, 0\n1,4\n1,4\n1,4\n", "has a cycle: '0' -> '1' -> '2' -> '0'"),
    ("2\n\n0\n1\n1,4\n-1,4\n", "expected 'compute_cost,communication_cost"),
    ("2\n\n0\n9\n1,4\n1,4\n", "names node 9"),
    ('node { name: "a" compute_cost: -1 }', "op 'a' has compute cost -1.0"),
    ('{"format": "regal.graph", "version": 1, "ops": [{"name": "a", "compute_cost": NaN}]}',
     "op 'a' has compute cost nan"),
    ("garbage", "cannot tell the graph format"),
])
def test_convert_bad_files(tmp_path, content, message):
  source = tmp_path / "bad.graph"
  source.write_text(content)
  out = tmp_path / "out.json"
  result = run("regal_datasets.convert", "--graph", str(source), "--out", str(out))
  assert_one_line_error(result, message)
  assert not out.exists()


def test_convert_missing_file(tmp_path):
  assert_one_line_error(run("regal_datasets.convert", "--graph", str(tmp_path / "none.json")),
                        "no such file")


def test_a_stopped_run_is_not_recorded_and_nothing_runs_after_it(monkeypatch):
  """Commands that record runs one after another call `exit_if_stopped` before each row: after
  a signal stopped a search (a stoppable block), the process ends there instead of writing a
  truncated row and cutting every later search short."""
  import signal as signal_lib
  from regal_datasets import cli as cli_lib
  exits = []
  monkeypatch.setattr(cli_lib, "_exit_on_signal", exits.append)
  monkeypatch.setattr(cli_lib, "_signals", [])
  cli_lib.exit_if_stopped()
  assert exits == []
  monkeypatch.setattr(cli_lib, "_signals", [signal_lib.SIGTERM])
  cli_lib.exit_if_stopped()
  assert exits == ["interrupted by SIGTERM: the unfinished run was not recorded"]
