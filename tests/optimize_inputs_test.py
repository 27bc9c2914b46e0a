"""Mistakes in what `regal.optimize` reads (the flags' values, the devices, the graph itself) are
refused before JAX, numba, Ray or the search load: one `error:` line, exit 2, and none of those
libraries in the process (their import alone takes over a second; the timings are
`regal_experiments.bench.mistakes`'s)."""
import subprocess
import sys

import pytest

HEAVY = ("jax", "numba", "ray", "flax", "optax", "ortools")
# Runs regal.optimize as `python -m` would, then names the heavy libraries it loaded.
RUNNER = ("import atexit, runpy, sys\n"
          "atexit.register(lambda: print('loaded:', ','.join(m for m in {heavy!r} "
          "if m in sys.modules), file=sys.stderr))\n"
          "sys.argv = ['regal.optimize', *sys.argv[1:]]\n"
          "runpy.run_module('regal.optimize', run_name='__main__', alter_sys=True)\n")

GRAPHS = {
    "cyclic.json": '{"format": "regal.graph", "version": 1, "name": "cyc", "ops": [{"name": '
                   '"a", "compute_cost": 1}, {"name": "b", "compute_cost": 1}], "tensors": [{'
                   '"producer": "a", "size": 1, "consumers": ["b"]}, {"producer": "b", "size": '
                   '1, "consumers": ["a"]}]}',
    "negative.json": '{"format": "regal.graph", "version": 1, "name": "neg", "ops": [{"name": '
                     '"a", "compute_cost": -1}]}',
    "empty.json": "",
    "tiny.json": '{"format": "regal.graph", "version": 1, "name": "tiny", "ops": [{"name": '
                 '"a", "compute_cost": 1}, {"name": "b", "compute_cost": 1}], "tensors": []}',
}
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
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
  path = tmp_path_factory.mktemp("mistakes")
  for name, text in GRAPHS.items():
    (path / name).write_text(text)
  return path


@pytest.mark.parametrize("flags, says", MISTAKES, ids=lambda case: " ".join(case)
                         if isinstance(case, list) else None)
def test_a_mistake_is_one_line_before_the_libraries_load(folder, flags, says):
  done = subprocess.run([sys.executable, "-c", RUNNER.format(heavy=HEAVY), *flags],
                        cwd=folder, capture_output=True, text=True, timeout=60)
  lines = [line for line in done.stderr.splitlines() if not line.startswith("loaded:")]
  assert done.returncode == 2, done.stderr
  assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
  assert done.stderr.splitlines()[-1] == "loaded: ", done.stderr
