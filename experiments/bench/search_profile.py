r"""Where the default WC search's seconds go, and what its chromosome's size costs: a profile.

  python -m regal_experiments.bench.search_profile            # sharded Llama layer x8, 100K evals
  python -m regal_experiments.bench.search_profile --quick    # a small graph, a few thousand evals

The default run on the sharded workloads is cut by its time limit (`regal_experiments.seed_spread`),
so every second the search spends outside the scorer is evaluations it does not make. For one
graph (the WC model, the default consumer decoder, `--evals` evaluations, compilation excluded)
and each of `--seeds`, in one process and alternating, it runs the default search (its bucket
without transfer genes, which the consumer decoder never reads) and the same search on the
direct decoder's bucket (those genes carried along, inert), and splits each run's seconds into:
* the compiled event loop (`native_common.run_split`: the simulations, both cores);
* the rest of the host scorer (decoding the chromosomes, argument checks, the tie-breaker);
* the remainder: JAX (crossover, mutants, sorting, the climbers' moves) and the host loop
  that dispatches those jitted steps and hands each batch to the scorer
  (`brkga.run_on_host`).
It then times one such round trip alone, for 64 chromosomes of each layout's size. The ratio
of the two arms' median search seconds is the speed-up of not carrying the inert genes; their
answers differ (other random draws, the same search in distribution).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import collections  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import cli, errors, sharded  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_experiments import command, report, search_ab_lib  # noqa: E402
from regal.scoring import native_common, performance  # noqa: E402
from regal.search import brkga_search, guides  # noqa: E402

_QUICK = flags.DEFINE_bool("quick", False, "Sharded ChainMM x4, 5,000 evaluations, seed 0.")
_WORKLOAD = flags.DEFINE_enum("workload", "llama_layer", sharded.WORKLOADS, "Sharded workload.")
_DEVICES = flags.DEFINE_enum("devices", "8", ["4", "8"], "4 identical devices, or 8 in two "
                             "NVLink groups of 4 (as regal_experiments.seed_spread places them).")
_EVALS = flags.DEFINE_integer("evals", 100_000, "Evaluations of each search.",
                              lower_bound=2000, upper_bound=1_000_000_000)
_SEEDS = flags.DEFINE_string("seeds", "0-2", "Seeds (FIRST-LAST or a,b,c); each runs both arms.")
_ROUND_TRIPS = flags.DEFINE_integer("round_trips", 200, "Callbacks timed per layout size.",
                                    lower_bound=1, upper_bound=1_000_000)
_OUT_DIR = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "search_profile"),
                               "Where the report goes.")

ARMS = (("default (no transfer genes)", "consumer"), ("inert transfer genes kept", "direct"))
_SPENT: collections.Counter = collections.Counter()


_SEARCHING = [False]  # Inside the search's host scorer (not a warm-up or a final rescoring).


def _timed(module, name: str, searching: bool = False) -> None:
  """Adds the seconds `module.name` runs to `_SPENT[name]` (looked up at call time by its
  callers; installed before anything compiles, since a compiled callback keeps its function):
  every call if `searching`, which marks the search's host scorer; else the calls inside one."""
  function = getattr(module, name)

  def timed(*args, **kwargs):
    if not (searching or _SEARCHING[0]):
      return function(*args, **kwargs)
    if searching:
      _SEARCHING[0] = True
    start = time.perf_counter()
    try:
      return function(*args, **kwargs)
    finally:
      _SPENT[name] += time.perf_counter() - start
      if searching:
        _SEARCHING[0] = False

  setattr(module, name, timed)


def run_arm(problem: performance.Problem, guided: guides.Guidance, evals: int, seed: int,
            decoder_shape: str) -> dict:
  """One default search on the bucket the `decoder_shape` decoder would search, timed."""
  _SPENT.clear()
  shape = brkga_search.padded_shape(problem, decoder_shape)
  result = guides.run_guided(problem, evals, seed, guided, shape=shape)
  kernel = _SPENT["run_split"]
  host = _SPENT["search_scores"]
  return {"seed": seed, "bucket_genes": shape.bucket.size,
          "evaluations": result.evaluations, "objective": result.objective,
          "search_seconds": result.search_seconds, "event_loop_seconds": kernel,
          "other_host_seconds": host - kernel, "jax_and_dispatch_seconds":
              result.search_seconds - host}


def round_trip_seconds(genes: int, rows: int, count: int) -> float:
  """Seconds of one host-loop round trip: a jitted step that makes [rows, genes] float32,
  read on the host and its [rows] scores handed back (as the search's host loop does)."""
  step = jax.jit(lambda c, values: c + 0 * values[:, None])
  chromosomes = jnp.ones((rows, genes), jnp.float32)
  values = np.zeros(rows, np.float32)
  jax.block_until_ready(step(chromosomes, values))
  timings = []
  for _ in range(3):
    start = time.perf_counter()
    for _ in range(count):
      values = np.zeros(np.asarray(chromosomes).shape[0], np.float32)
      chromosomes = step(chromosomes, jnp.asarray(values))
    jax.block_until_ready(chromosomes)
    timings.append((time.perf_counter() - start) / count)
  return statistics.median(timings)


def _median(rows: list[dict], key: str) -> float:
  return statistics.median(r[key] for r in rows)


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  fixed_by_quick = [f"--{f.name}" for f in (_WORKLOAD, _DEVICES, _EVALS, _SEEDS) if f.present]
  if _QUICK.value and fixed_by_quick:
    raise errors.ConfigError(f"--quick fixes the graph, budget and seeds: drop "
                             f"{', '.join(fixed_by_quick)}")
  seeds = [0] if _QUICK.value else search_ab_lib.parse_seeds(_SEEDS.value)
  workload, count = ("chain_mm", 4) if _QUICK.value else (_WORKLOAD.value, int(_DEVICES.value))
  evals = 5_000 if _QUICK.value else _EVALS.value
  if evals < 2_000 or _ROUND_TRIPS.value < 1:
    raise errors.ConfigError("--evals must be at least 2000 and --round_trips positive")
  devices = devices_lib.homogeneous(4) if count == 4 else devices_lib.nvlink_two_groups(4)
  problem = performance.Problem(sharded.generate(workload, count), devices, model="wc")
  guided = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
  _timed(native_common, "run_split")
  _timed(performance.BucketScorer, "search_scores", searching=True)
  runs: dict[str, list[dict]] = {label: [] for label, _ in ARMS}
  for seed in seeds:
    for label, decoder_shape in ARMS:
      row = run_arm(problem, guided, evals, seed, decoder_shape)
      runs[label].append(row)
      print(f"{label}, seed {seed}: {row['search_seconds']:.2f} s ({row['event_loop_seconds']:.2f} "
            f"event loop, {row['other_host_seconds']:.2f} other host, "
            f"{row['jax_and_dispatch_seconds']:.2f} JAX and dispatch), objective "
            f"{row['objective']:.6g}", flush=True)
  rows = 64
  trips = {label: round_trip_seconds(runs[label][0]["bucket_genes"], rows, _ROUND_TRIPS.value)
           for label, _ in ARMS}
  (default, _), (kept, _) = ARMS
  ratio = _median(runs[kept], "search_seconds") / _median(runs[default], "search_seconds")
  lines, facts = report.header("Where the default WC search's seconds go",
                               "regal_experiments.bench.search_profile",
                               "quick" if _QUICK.value else "full")
  body = [f"Sharded {workload} x{count} ({problem.graph.num_ops} ops), WC model, consumer "
          f"decoder, {evals:,} evaluations per search (compilation excluded), seeds "
          f"{', '.join(map(str, seeds))}; the two arms alternate in one process. Medians:", ""]
  body += report.markdown_table(
      ["bucket", "genes", "search s", "event loop s", "other host s", "JAX and dispatch s",
       "host round trip (64 rows) us", "objectives"],
      [[label, runs[label][0]["bucket_genes"], _median(runs[label], "search_seconds"),
        _median(runs[label], "event_loop_seconds"), _median(runs[label], "other_host_seconds"),
        _median(runs[label], "jax_and_dispatch_seconds"), 1e6 * trips[label],
        ", ".join(f"{r['objective']:.6g}" for r in runs[label])] for label, _ in ARMS])
  body += ["", f"Median search seconds with the inert transfer genes kept / without them: "
           f"**{ratio:.2f}x**. The event loop is the simulations themselves; the host round "
           "trip is one jitted step whose 64 chromosomes are read on the host and given back "
           "their scores (the search makes one per generation, the climbers one per climb "
           "step)."]
  report.publish(_OUT_DIR.value, "search_profile", lines, body,
                 {**facts, "workload": workload, "devices": count, "evals": evals,
                  "runs": runs, "round_trip_seconds": trips, "slowdown_with_inert_genes": ratio})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
