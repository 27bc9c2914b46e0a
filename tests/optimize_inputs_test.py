"""Mistakes in what `regal.optimize` reads (the flags' values, the devices, the graph itself,
a policy's metadata), and in the graph commands' flags, are refused before JAX, numba, Ray or
the search load: one `error:` line, exit 2, and none of those libraries in the process (their
import alone takes over a second; the timings are `regal_experiments.bench.mistakes`'s)."""
import subprocess
import sys

import pytest

from regal_experiments.bench import mistakes

HEAVY = ("jax", "numba", "ray", "flax", "optax", "ortools")
# Runs a command as `python -m` would, then names the heavy libraries it loaded.
RUNNER = ("import atexit, runpy, sys\n"
          "atexit.register(lambda: print('loaded:', ','.join(m for m in {heavy!r} "
          "if m in sys.modules), file=sys.stderr))\n"
          "module = sys.argv[1]\n"
          "sys.argv = [module, *sys.argv[2:]]\n"
          "runpy.run_module(module, run_name='__main__', alter_sys=True)\n")

# (flags, what the error line says)
MISTAKES = [
    (["--devices", "0"], "device count must be an integer >= 1"),
    (["--graph", "cyclic.json"], "has a cycle"),
    (["--graph", "negative.json"], "compute cost -1.0"),
    (["--graph", "empty.json"], "not valid JSON"),
    (["--time_limit", "-3"], "--time_limit must be a positive finite number"),
    (["--policy", "no_such_dir"], "--policy no_such_dir: no such directory"),
    (["--graph", "missing.json"], "missing.json: no such file"),
    (["--graph", "tiny.json", "--evals", "0"], "--evals must be between 1"),
    (["--graph", "tiny.json", "--out", "tiny.json"], "tiny.json"),
    (["--graph", "tiny.json", "--devices", "3", "--device_preset", "nvlink_two_groups"],
     "preset nvlink_two_groups needs an even device count"),
    (["--graph", "tiny.json", "--policy", "sync_policy"],
     "was trained on the sync model; this search scores with wc"),
    (["--graph", "tiny.json", "--policy", "sync_policy", "--model", "sync", "--devices", "4"],
     "was trained for 2 devices, the problem has 4"),
    (["--graph", "tiny.json", "--policy", "."], "no trained policy in ."),
    (["--graph", "unweighted.onnx"], "unweighted.onnx: its weights cannot be read"),
]
# The graph commands: (module, flags, what the error line says).
COMMAND_MISTAKES = [
    ("regal_datasets.zoo", ["--model", "bert_base", "--seq_len", "600"],
     "bert_base has 512 positions: seq_len 600 is longer"),
    ("regal_datasets.zoo", ["--model", "gpt2_small", "--seq_len", "1025"],
     "gpt2_small has 1024 positions"),
    ("regal_datasets.zoo", ["--model", "llama_block", "--out", "llama.onnx"],
     "ONNX files are read, never written"),
    ("regal_datasets.convert", ["--graph", "tiny.json", "--out", "tiny.onnx"],
     "ONNX files are read, never written"),
    ("regal_datasets.sharded", ["--workload", "ffnn", "--out", "ffnn.onnx"],
     "ONNX files are read, never written"),
    ("regal_datasets.constructed", ["--tasks", "20", "--out", "taken.dot"],
     "taken.certificate.json: is a directory"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
  path = tmp_path_factory.mktemp("mistakes")
  mistakes.write_files(str(path))
  return path


def _refused_at_once(folder, module, flags, says):
  done = subprocess.run([sys.executable, "-c", RUNNER.format(heavy=HEAVY), module, *flags],
                        cwd=folder, capture_output=True, text=True, timeout=60)
  lines = [line for line in done.stderr.splitlines() if not line.startswith("loaded:")]
  assert done.returncode == 2, done.stderr
  assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
  assert done.stderr.splitlines()[-1] == "loaded: ", done.stderr


@pytest.mark.parametrize("flags, says", MISTAKES, ids=lambda case: " ".join(case)
                         if isinstance(case, list) else None)
def test_a_mistake_is_one_line_before_the_libraries_load(folder, flags, says):
  _refused_at_once(folder, "regal.optimize", flags, says)


@pytest.mark.parametrize("module, flags, says", COMMAND_MISTAKES,
                         ids=[f"{case[0]} {' '.join(case[1])}" for case in COMMAND_MISTAKES])
def test_a_graph_commands_mistake_is_one_line_before_the_libraries_load(folder, module, flags,
                                                                        says):
  _refused_at_once(folder, module, flags, says)
  assert not (folder / "taken.dot").exists()  # Nothing written: the certificate's path failed.
