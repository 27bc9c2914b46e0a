r"""One command for an accelerator check (issue 70): on whatever accelerator JAX sees, the
batched JAX search's evaluations per second beside the CPU engine's, and a split zoo model
executed with measured against predicted step time.

  python -m regal_experiments.bench.accelerator            # ~1 minute on a 2-core CPU
  python -m regal_experiments.bench.accelerator --quick    # seconds (the suite runs it)

Part 1: the WC model's batched fitness (`performance.make_fitness_fn`, compilation timed
apart) with the `jax` engine on JAX's default backend (a GPU or TPU when there is one) and the
`native` engine (the compiled host loop on the CPU's cores), on REGAL synthetic graphs and on
a split GPT-2 block, for each population size: evaluations per second and their ratio.
Part 2: GPT-2 small (`--layers` layers) split 2 ways (`--shard 2`, placed by the default
search for the preset that matches the backend: `h100` on an NVIDIA GPU, `tpu_v5e` on a TPU,
`cpu` on a CPU) and run on JAX's devices (`regal.execute`; host devices on a CPU): the search's
answer and the model on one device, predicted against measured (median of 5). The report goes
to `experiments/results/accelerator/accelerator-<backend>.md` (and .json).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_host_devices(2)  # Before JAX starts: part 2 runs on two devices on a CPU.

import dataclasses  # noqa: E402
import os  # noqa: E402
from typing import Sequence  # noqa: E402

import jax  # noqa: E402
from absl import flags  # noqa: E402

from regal.parallelism import hardware  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_experiments import command, report  # noqa: E402

_QUICK = flags.DEFINE_bool("quick", False, "One 50-op graph, population 64, a tiny GPT-2.")
_POPULATIONS = flags.DEFINE_list("populations", ["256", "1024"], "Batch sizes to time.")
_LAYERS = flags.DEFINE_integer("layers", 2, "GPT-2 layers in part 2.", lower_bound=1,
                               upper_bound=12)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "accelerator"),
                           "Report folder.")


def preset_for_backend() -> str:
  device = jax.devices()[0]
  if device.platform == "gpu":
    return "h100"
  return "tpu_v5e" if device.platform == "tpu" else "cpu"


def evaluation_rates(graphs: dict, populations: list[int]) -> list[dict]:
  """Part 1: evaluations per second of each engine, per graph and population."""
  from regal_experiments.bench.model_timing import time_batched
  from regal.scoring import performance
  rows = []
  for label, (graph, spec) in graphs.items():
    problem = performance.Problem(graph, spec)
    for population in populations:
      rates = {}
      for engine in ("native", "jax"):
        rate, compile_seconds = time_batched(dataclasses.replace(problem, engine=engine),
                                             population, repeats=3)
        rates[engine] = {"evals_per_second": rate, "compile_seconds": compile_seconds}
      rows.append({"graph": label, "ops": graph.num_ops, "population": population, **rates,
                   "jax_over_native": rates["jax"]["evals_per_second"] /
                   rates["native"]["evals_per_second"]})
      print(f"{label} ({graph.num_ops} ops), population {population}: jax "
            f"{rates['jax']['evals_per_second']:,.0f}/s on {jax.default_backend()}, native "
            f"{rates['native']['evals_per_second']:,.0f}/s", flush=True)
  return rows


def executed(layers: int, batch: int, seq_len: int) -> dict:
  """Part 2: the split GPT-2 run on JAX's devices, predicted against measured."""
  from regal_datasets import zoo
  from regal.app import methods, optimize_lib
  from regal.execute import choose_program, compare, executor
  count = min(2, len(jax.devices()))
  traced = zoo.model_trace("gpt2_small", batch=batch, seq_len=seq_len, layers=layers)
  preset = preset_for_backend()
  run = optimize_lib.run(traced.graph, hardware.resolve(2, None, preset),
                         methods.RunConfig(evals=1000, setup=methods.Setup(shard="2")))
  graph = run.graph
  placements = {name: run.assignments[name] for name in ("best", "single_device")}
  if count < 2:  # One accelerator: every block on it, in the search's order.
    placements = {name: (0 * placement, order, predicted)
                  for name, (placement, order, predicted) in placements.items()}
  program = choose_program.program_for(graph, traced=traced)
  measured = compare.execute_assignments(graph, program, placements,
                                         executor.available_devices(count), repeats=5)
  seconds = 1.0 / float(graph.metadata["link_bytes_per_second"])
  return {"model": f"gpt2_small {layers} layer(s), batch {batch} x {seq_len}",
          "preset": preset, "devices": measured["devices"], "ops": graph.num_ops,
          "rows": {name: {"predicted_ms": 1e3 * row["predicted"] * seconds,
                          "measured_ms": 1e3 * row["median_seconds"]}
                   for name, row in measured["assignments"].items()}}


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("populations", "layers"))
  populations = [64] if _QUICK.value else command.integers("populations", _POPULATIONS.value,
                                                           1, 1_000_000)
  from regal.parallelism import shard_imported
  from regal_datasets import zoo
  from regal_datasets.synthetic import sized_graph
  block = zoo.model_graph("gpt2_small", batch=8, seq_len=64, layers=1)
  split = shard_imported.shard(block, 4, shard_imported.data_parallel_choice(block, 4))
  graphs = {"synthetic": (sized_graph(50 if _QUICK.value else 1000),
                          devices_lib.homogeneous(2))}
  if not _QUICK.value:
    graphs["gpt2 block split 4 ways"] = (split, devices_lib.homogeneous(4))
  backend = jax.default_backend()
  if backend == "cpu":  # Said first: the check then measures the CPU against itself.
    print("no GPU or TPU found: JAX runs on the CPU, so both engines and the executed plan run "
          "on this CPU (host devices)", flush=True)
  rates = evaluation_rates(graphs, populations)
  run = (executed(1, 2, 16) if _QUICK.value else executed(_LAYERS.value, 4, 128))
  header, facts = report.header(f"Accelerator check on {backend}",
                                "regal_experiments.bench.accelerator",
                                "quick" if _QUICK.value else "full")
  body = (["No GPU or TPU was found: JAX ran on the CPU, so part 1 compares two engines on "
           "this CPU and part 2 runs on host devices.", ""] if backend == "cpu" else [])
  body += ["Part 1: the WC model's batched fitness, evaluations per second (compilation "
          f"apart): the `jax` engine on {backend} against the `native` engine (the compiled "
          "host loop on the CPU's cores).", ""]
  body += report.markdown_table(
      ["graph", "ops", "population", f"jax on {backend} /s", "native /s", "jax / native"],
      [[r["graph"], r["ops"], r["population"], f"{r['jax']['evals_per_second']:,.0f}",
        f"{r['native']['evals_per_second']:,.0f}", f"{r['jax_over_native']:.3g}"]
       for r in rates])
  body += ["", f"Part 2: {run['model']} split 2 ways and placed for the `{run['preset']}` "
           f"preset, run on {', '.join(run['devices'])} ({run['ops']} ops): predicted "
           "(the preset's roofline) against measured (median of 5).", ""]
  body += report.markdown_table(
      ["placement", "predicted ms", "measured ms"],
      [[name, f"{r['predicted_ms']:.4g}", f"{r['measured_ms']:.4g}"]
       for name, r in run["rows"].items()])
  report.publish(_OUT.value, f"accelerator-{backend}", header, body,
                 {**facts, "backend": backend, "rates": rates, "executed": run})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
