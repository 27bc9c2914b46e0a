r"""Evaluations per second of the performance models: batched against the references.

  python -m regal_experiments.bench.perf_model                 # 50/200/1000 nodes, P = 64..1024
  python -m regal_experiments.bench.perf_model --sizes 200 --populations 1024 --json out.json

For each REGAL synthetic graph size (2 devices), it times the batched WC and synchronous
models (compilation excluded, reported separately; the population spread over every CPU core)
with each scoring engine (`jax`: the lockstep JAX models; `native`: the compiled host loops,
for the models that have one) and the pure-Python reference models, in the same run, and
prints evaluations per second and the ratio batched / reference. Each evaluation decodes a
chromosome and returns makespan plus per-device peak memory; the row `wc-ms` is the WC model
as the runtime objective scores it, makespan only (no memory tracking).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import dataclasses  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
from typing import Sequence  # noqa: E402

import jax  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import atomic  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command  # noqa: E402
from regal_experiments.bench.model_timing import time_batched, time_reference  # noqa: E402
from regal.scoring import models, performance  # noqa: E402

_SIZES = flags.DEFINE_list("sizes", ["50", "200", "1000"], "Graph sizes (ops).")
_POPULATIONS = flags.DEFINE_list("populations", ["64", "256", "1024"], "Population sizes.")
_MODELS = flags.DEFINE_list("models", ["wc", "wc-ms", "sync"],
                            "Models to time (wc-ms: WC, makespan only).")
_ENGINES = flags.DEFINE_list("engines", ["native", "jax"], "Scoring engines to time.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed calls per setting (best is kept).",
                                lower_bound=1, upper_bound=1000)
_REFERENCE_SECONDS = flags.DEFINE_float("reference_seconds", 2.0,
                                        "Time budget per reference measurement.",
                                        lower_bound=0.01, upper_bound=3600.0)
_JSON = flags.DEFINE_string("json", None, "Also write the figures here as JSON.")


def main(argv: Sequence[str]) -> None:
  command.check(argv, out_flag=None)
  sizes = command.integers("sizes", _SIZES.value, 2, 100_000)
  command.integers("populations", _POPULATIONS.value, 1, 1_000_000)
  command.choices("models", _MODELS.value, [m + suffix for m in performance.MODELS
                                            for suffix in ("", "-ms")])
  command.choices("engines", _ENGINES.value, performance.ENGINES)
  if _JSON.value:
    atomic.check_output(_JSON.value, "--json")
  devices = devices_lib.homogeneous(2)
  rows = []
  print(f"JAX {jax.__version__} on {jax.default_backend()} with {jax.local_device_count()} "
        f"local devices; {platform.processor() or platform.machine()}")
  header = (f"{'model':>5} {'engine':>6} {'ops':>5} {'edges':>6} {'pop':>5} {'evals/s':>9} "
            f"{'compile s':>9} {'ref evals/s':>11} {'ratio':>8}")
  print(header)
  for size in sizes:
    graph = sized_graph(size)
    for model in _MODELS.value:
      # Objective "memory" makes the model track memory (and compute the makespan too).
      problem = performance.Problem(graph, devices, model=model.removesuffix("-ms"),
                                    objective="runtime" if model.endswith("-ms") else "memory")
      reference = time_reference(problem, _REFERENCE_SECONDS.value)
      for engine in _ENGINES.value:
        if engine == "native" and models.get(problem.model).native is None:
          continue
        engine_problem = dataclasses.replace(problem, engine=engine)
        for population in map(int, _POPULATIONS.value):
          rate, compile_seconds = time_batched(engine_problem, population, _REPEATS.value)
          row = {"model": model, "engine": engine, "ops": graph.num_ops,
                 "edges": graph.num_edges, "population": population, "evals_per_s": rate,
                 "compile_s": compile_seconds, "reference_evals_per_s": reference,
                 "ratio": rate / reference}
          rows.append(row)
          print(f"{model:>5} {engine:>6} {graph.num_ops:>5} {graph.num_edges:>6} "
                f"{population:>5} {rate:>9.0f} {compile_seconds:>9.1f} {reference:>11.1f} "
                f"{rate / reference:>7.1f}x", flush=True)
  if _JSON.value:
    atomic.write_text(_JSON.value, json.dumps({
        "backend": jax.default_backend(), "local_devices": jax.local_device_count(),
        "jax": jax.__version__, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
