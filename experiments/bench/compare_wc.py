r"""Two versions of the JAX WC model, timed alternately in one process: a fair A/B on a noisy CPU.

  python -m regal_experiments.bench.compare_wc --baseline HEAD~1          # that revision vs the tree
  python -m regal_experiments.bench.compare_wc --baseline HEAD --baseline_memory --memory

Timings on a shared 2-core machine drift by up to ±30% between runs, more than most changes
to the model are worth; timing the two versions in turns within one process puts both under
the same drift. The baseline is `regal/scoring/wc/batched.py` (before the models' packages:
`regal/scoring/wc_model.py`) at a git revision, loaded as a module of its own beside today's other
modules (so it must fit today's `SimGraph` and helpers). Both
score the same chromosomes, must agree on every makespan, and are timed `--rounds` times
each, alternating; the ratio printed is the median of the per-round speed ratios.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import importlib.util  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command  # noqa: E402
from regal.scoring import chromosome as chromosome_lib  # noqa: E402
from regal.scoring import performance, sim_graph  # noqa: E402

_BASELINE = flags.DEFINE_string("baseline", "HEAD", "Git revision of the baseline JAX WC model.")
# Where the JAX WC model lives: today, and before the models' packages.
_MODEL_PATHS = ("regal/scoring/wc/batched.py", "regal/scoring/wc_model.py")
_BASELINE_MEMORY = flags.DEFINE_bool("baseline_memory", False,
                                     "Baseline scores with memory tracking.")
_MEMORY = flags.DEFINE_bool("memory", False, "The working tree's model tracks memory.")
_OPS = flags.DEFINE_integer("ops", 200, "Synthetic graph size (ops).",
                            lower_bound=2, upper_bound=100_000)
_POPULATION = flags.DEFINE_integer("population", 160, "Chromosomes per call (BRKGA's 5K "
                                   "default scores 160 per generation).",
                                   lower_bound=1, upper_bound=1_000_000)
_ROUNDS = flags.DEFINE_integer("rounds", 12, "Timed calls per version.",
                               lower_bound=1, upper_bound=1000)

REPO = pathlib.Path(__file__).resolve().parents[2]


def _load(path: pathlib.Path, name: str):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _fitness(problem, module, memory: bool, population: int):
  sim = jax.tree_util.tree_map(jnp.asarray, performance.sim_graph_for(problem, memory=memory))

  def local(sim, chromosomes):
    decoded = jax.vmap(lambda c: chromosome_lib.decode(c, problem.layout))(chromosomes)
    inputs = sim_graph.pad_to(sim, *decoded)
    return module.simulate_batch(sim, *inputs, chunk=sim_graph.WC_CHUNK,
                                 record_times=False).makespan

  return jax.jit(lambda c: parallel.over_local_devices(local, population)(sim, c))


def main(argv: Sequence[str]) -> None:
  command.check(argv, out_flag=None)
  for path in _MODEL_PATHS:
    source = subprocess.run(["git", "show", f"{_BASELINE.value}:{path}"], cwd=REPO,
                            capture_output=True, text=True)
    if not source.returncode:
      break
  else:
    sys.exit(f"error: cannot read {' or '.join(_MODEL_PATHS)} at {_BASELINE.value!r}: "
             f"{source.stderr.strip()}")
  with tempfile.TemporaryDirectory() as folder:
    baseline_file = pathlib.Path(folder) / "baseline_wc_model.py"
    baseline_file.write_text(source.stdout)
    versions = {f"baseline {_BASELINE.value}": (_load(baseline_file, "baseline_wc_model"),
                                                _BASELINE_MEMORY.value),
                "working tree": (_load(REPO / _MODEL_PATHS[0], "tree_wc_model"),
                                 _MEMORY.value)}
  graph = sized_graph(_OPS.value)
  problem = performance.Problem(graph, devices_lib.homogeneous(2))
  population = _POPULATION.value
  chromosomes = jax.random.uniform(jax.random.key(0), (population, problem.layout.size))
  fitness = {name: _fitness(problem, module, memory, population)
             for name, (module, memory) in versions.items()}
  makespans = [np.asarray(fn(chromosomes)) for fn in fitness.values()]
  if not np.array_equal(*makespans):
    sys.exit("error: the two versions disagree on the makespans")
  seconds = {name: [] for name in fitness}
  for _ in range(_ROUNDS.value):
    for name, fn in fitness.items():
      start = time.perf_counter()
      fn(chromosomes).block_until_ready()
      seconds[name].append(time.perf_counter() - start)
  print(f"{graph.num_ops} ops, population {population}, {jax.local_device_count()} devices, "
        f"{_ROUNDS.value} alternating rounds")
  for name, (_, memory) in versions.items():
    print(f"  {name:<22} {'memory' if memory else 'makespan only':<14} median "
          f"{population / np.median(seconds[name]):8.0f} evals/s, best "
          f"{population / np.min(seconds[name]):8.0f}")
  baseline, tree = (np.asarray(v) for v in seconds.values())
  print(f"working tree / baseline speed: {np.median(baseline / tree):.2f}x "
        f"(median of per-round ratios)")


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
