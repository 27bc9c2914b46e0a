r"""How `regal.optimize` scales: wall time and objective at a fixed budget for graphs of 100 to
10,000 ops, with and without coarsening, and the performance models' evaluations per second
against the population size.

  python -m regal_experiments.scaling            # full: 100 / 1,000 / 10,000 ops, ~30 minutes
  python -m regal_experiments.scaling --quick    # 100 / 1,000 ops, 1000 evaluations, ~4 minutes

Graphs (4 homogeneous devices, the default WC model):
  synthetic  REGAL's generator at exactly N ops, Barabasi-Albert topology (about two edges
             per op; Erdos-Renyi's p = 0.05 would give 25,000 edges at 1,000 ops)
  zoo        BERT-base (batch 8, 512 tokens) traced by `regal_datasets.zoo`: 1 layer forward
             (131 ops), 12 layers forward (1,176), 36 layers forward + backward (~10,000)
Each graph runs `regal.app.optimize_lib.run` (BRKGA, default seed arms, `--evals` evaluations)
with `--coarsen off` and, above the coarsening threshold (500 ops), `--coarsen auto`. The
second part times the batched models (WC and synchronous, each with the scoring engine this
backend picks: on a CPU the WC model's native loop) on one compiled call per population size
(compilation excluded), beside the pure-Python reference. Writes `scaling.md`, `.json` and `scaling.png` (log-log) under `--out`.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import cli, errors, zoo  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal_experiments.bench import model_timing  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal_datasets import coarsen  # noqa: E402

ZOO_SIZES = {100: dict(layers=1), 1000: dict(layers=12), 10000: dict(layers=36, step="backward")}

_QUICK = flags.DEFINE_bool("quick", False, "100 and 1,000 ops, 1000 evaluations, populations "
                           "64 and 256.")
_SIZES = flags.DEFINE_list("sizes", ["100", "1000", "10000"], "Graph sizes (ops): 100, 1000, "
                           "10000.")
_EVALS = flags.DEFINE_integer("evals", 5000, "BRKGA's budget per graph.",
                              lower_bound=1, upper_bound=1_000_000_000)
_POPULATIONS = flags.DEFINE_list("populations", ["64", "256", "1024"],
                                 "Population sizes of the throughput part.")
_DEVICES = flags.DEFINE_integer("devices", 4, "Homogeneous devices.",
                                lower_bound=1, upper_bound=1024)
_SKIP = flags.DEFINE_list("skip", [], "Rows to leave out, as family:size:coarsen (e.g. "
                          "synthetic:10000:auto); the report lists them.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "scaling"),
                           "Folder of the report.")


def graphs(sizes: Sequence[int]):
  for size in sizes:
    yield "synthetic", size, sized_graph(size, topology="barabasi_albert")
    yield "zoo", size, zoo.model_graph("bert_base", batch=8, seq_len=512, **ZOO_SIZES[size])


def optimize_rows(sizes, evals: int, num_devices: int, skip=(), progress=print) -> list[dict]:
  devices = devices_lib.homogeneous(num_devices)
  rows = []
  for family, size, graph in graphs(sizes):
    specs = ["off"] + (["auto"] if graph.num_ops > coarsen.AUTO_THRESHOLD else [])
    for spec in specs:
      if f"{family}:{size}:{spec}" in skip:
        progress(f"{family} {graph.num_ops} ops, coarsen {spec}: skipped (--skip)")
        continue
      started = time.perf_counter()
      result = optimize_lib.run(graph, devices, methods.RunConfig(
          evals=evals, setup=methods.Setup(coarsen=spec)))
      data = result.result
      rows.append({"family": family, "size": size, "ops": graph.num_ops,
                   "edges": graph.num_edges, "coarsen": spec,
                   "coarse_ops": data.details.get("coarsening", {}).get("coarse_ops",
                                                                            graph.num_ops),
                   "objective": data.objective,
                   "single_device": data.baselines["single_device"]["objective"],
                   "improvement_pct": data.improvement_pct,
                   "compile_seconds": data.wall_seconds["compile"],
                   "search_seconds": data.wall_seconds["search"],
                   "wall_seconds": time.perf_counter() - started,
                   "evaluations": data.evaluations})
      row = rows[-1]
      progress(f"{family} {row['ops']} ops, coarsen {spec}: objective {row['objective']:.6g} "
               f"({row['improvement_pct']:.1f}% better than one device), wall "
               f"{row['wall_seconds']:.1f} s (compile {row['compile_seconds']:.1f} s, search "
               f"{row['search_seconds']:.1f} s)")
  return rows


def throughput_rows(sizes, populations, num_devices: int, progress=print) -> list[dict]:
  import jax
  devices = devices_lib.homogeneous(num_devices)
  rows = []
  for size in sizes:
    graph = sized_graph(size, topology="barabasi_albert")
    for model in ("wc", "sync"):
      problem = performance.Problem(graph, devices, model=model)
      reference = model_timing.time_reference(problem, 1.0)
      for population in populations:
        per_second, compile_seconds = model_timing.time_batched(problem, population, repeats=2)
        rows.append({"ops": size, "model": model, "population": population,
                     "backend": jax.default_backend(),
                     "engine": performance.scoring_engine(problem),
                     "evals_per_second": per_second,
                     "compile_seconds": compile_seconds,
                     "reference_evals_per_second": reference})
        progress(f"{model} {size} ops, population {population}: {per_second:.0f} "
                 f"evaluations/s ({jax.default_backend()}), reference {reference:.1f}/s")
  return rows


def plot(optimize: list[dict], throughput: list[dict], path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
  for family in ("synthetic", "zoo"):
    for spec, style in (("off", "o-"), ("auto", "s--")):
      points = sorted((r["ops"], r["wall_seconds"]) for r in optimize
                      if r["family"] == family and (r["coarsen"] == spec or (
                          spec == "auto" and r["ops"] <= coarsen.AUTO_THRESHOLD)))
      if points and (spec == "off" or any(r["coarsen"] == "auto" for r in optimize)):
        left.plot(*zip(*points), style, label=f"{family}, coarsen {spec}")
  left.set_xscale("log")
  left.set_yscale("log")
  left.set_xlabel("ops")
  left.set_ylabel("regal.optimize wall seconds")
  left.legend(fontsize=8)
  for model in ("wc", "sync"):
    for size in sorted({r["ops"] for r in throughput}):
      points = [(r["population"], r["evals_per_second"]) for r in throughput
                if r["model"] == model and r["ops"] == size]
      if points:
        right.plot(*zip(*points), "o-", label=f"{model}, {size} ops")
  right.set_xscale("log")
  right.set_yscale("log")
  right.set_xlabel("population size")
  right.set_ylabel("evaluations per second")
  right.legend(fontsize=8)
  figure.suptitle("Scaling of regal.optimize and the performance models")
  report.save_figure(figure, path)


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  quick = _QUICK.value
  present = lambda name: flags.FLAGS[name].present
  sizes = command.integers("sizes", ["100", "1000"] if quick and not present("sizes")
                           else _SIZES.value, 1, max(ZOO_SIZES))
  populations = command.integers("populations", ["64", "256"] if quick and
                                 not present("populations") else _POPULATIONS.value, 1,
                                 1_000_000)
  unknown = [s for s in sizes if s not in ZOO_SIZES]
  if unknown:
    raise errors.ConfigError(f"size {unknown[0]} has no zoo graph; sizes: "
                             f"{', '.join(map(str, ZOO_SIZES))}")
  if min(populations) < 1 or _DEVICES.value < 1:
    raise errors.ConfigError("populations and --devices must be at least 1")
  evals = 1000 if quick and not present("evals") else _EVALS.value
  started = time.perf_counter()
  optimize = optimize_rows(sizes, evals, _DEVICES.value, _SKIP.value)
  throughput = throughput_rows([s for s in sizes if s <= 1000], populations, _DEVICES.value)
  plot(optimize, throughput, os.path.join(_OUT.value, "scaling.png"))
  reductions = ([f"{evals} evaluations"] if present("evals") else []) + (
      [f"left out: {', '.join(_SKIP.value)}"] if _SKIP.value else []) + (
      [f"sizes {', '.join(map(str, sizes))}"] if present("sizes") else [])
  mode = ("quick (100 and 1,000 ops, 1000 evaluations)" if quick
          else f"reduced ({'; '.join(reductions)})" if reductions else "full")
  lines, facts = report.header("Scaling of regal.optimize", "regal_experiments.scaling", mode)
  lines += [f"- budget: {evals} evaluations per graph, {_DEVICES.value} devices, WC model; "
            f"wall time {time.perf_counter() - started:.0f} s", ""]
  body = report.markdown_table(
      ["graph", "ops", "edges", "coarsen", "searched ops", "objective", "% over one device",
       "compile s", "search s", "wall s"],
      [[r["family"], r["ops"], r["edges"], r["coarsen"], r["coarse_ops"], r["objective"],
        r["improvement_pct"], r["compile_seconds"], r["search_seconds"], r["wall_seconds"]]
       for r in optimize])
  body += ["", "Performance-model throughput (compilation excluded; one compiled call per "
           "population, the population spread over the local devices):", ""]
  body += report.markdown_table(
      ["model", "ops", "population", "backend", "engine", "evaluations/s",
       "reference evaluations/s", "compile s"],
      [[r["model"], r["ops"], r["population"], r["backend"], r.get("engine", "jax"),
        r["evals_per_second"], r["reference_evals_per_second"], r["compile_seconds"]]
       for r in throughput])
  body += ["", "No GPU row: this machine has none (the same command on a GPU machine fills the "
           "backend column with gpu)." if all(r["backend"] == "cpu" for r in throughput)
           else "", "![scaling](scaling.png)"]
  report.publish(_OUT.value, "scaling", lines, body,
                 {**facts, "evals": evals, "optimize": optimize, "throughput": throughput})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
