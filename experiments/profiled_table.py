r"""Every split method on every shared profiled workload (Tarnawski et al.'s benchmark,
`../shared/graphs/profiled/`), both objectives, with wall times and feasibility, in one run.

  python -m regal_experiments.profiled_table            # ~10 minutes on 2 cores
  python -m regal_experiments.profiled_table --quick    # ~2 minutes: seeds 0-1, small budgets

Sections:
  throughput  pipeline max-load (`--objective throughput`) of every workload in `throughput/`:
              one accelerator, PipeDream-style, our optimal contiguous DP (with a time limit),
              the human-expert split where there is one, CP-SAT (its split and proven bound,
              on workloads of at most 200 classes), and the default search for each seed;
              against the README's published DP, PipeDream and local search figures;
  latency     single-sample latency (`--model blocks`) of every workload in `latency/`: one
              accelerator, PipeDream-style (least sum of run times), the max-load split (what
              their DP's split is), the expert split, the default search for each seed; against
              the README's published greedy and DP-split latencies;
  expert_latency  the latency model where the expert splits fit: on the throughput inputs of
              the workloads with an expert split (larger caps), the expert's latency and the
              default latency search's;
  scale       `python -m regal.optimize` end to end (a fresh process: imports, compiling,
              search, writing) on the largest shared operator graph (1,071 ops) and on a
              2,142-op graph of the same kind (that graph twice, the first copy's output
              feeding the second's input).
A method's figure is reported only for a split that meets every constraint of the objective
(memory caps, co-location, contiguity for latency); otherwise it says what broke.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any, Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import benchmarks, errors  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_datasets.formats import profiled  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.app import pipeline_lib  # noqa: E402
from regal.app.result import SplitResult  # noqa: E402
from regal.baselines import pipeline_dp, pipeline_linear, pipeline_methods  # noqa: E402
from regal.scoring.blocks import reference as blocks  # noqa: E402
from regal.scoring.throughput import reference as pipeline  # noqa: E402

PROFILED = os.path.join(benchmarks.SHARED_GRAPHS, "profiled")
_QUICK = flags.DEFINE_bool("quick", False, "Seeds 0-1, search budgets a tenth, DP limit 5 s, "
                           "no scale section.")
_SECTIONS = flags.DEFINE_list("sections", ["throughput", "latency", "expert_latency", "scale"],
                              "What to measure.")
_SEEDS = flags.DEFINE_integer("seeds", 5, "Seeds of the default search (0..N-1).",
                              lower_bound=1, upper_bound=1000)
_DP_SECONDS = flags.DEFINE_float("dp_seconds", 90.0, "Time limit of our contiguous DP.",
                                 lower_bound=0.001, upper_bound=86400.0)
_CPSAT_SECONDS = flags.DEFINE_float("cpsat_seconds", 10.0, "Time limit of CP-SAT (max-load).",
                                    lower_bound=0.001, upper_bound=86400.0)
CPSAT_MAX_CLASSES = 200  # Above this, building the model alone takes CP-SAT's whole budget.
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "profiled_table"),
                           "Report folder.")


def _files(kind: str) -> list[str]:
  folder = os.path.join(PROFILED, kind)
  return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".json"))


def _name(path: str) -> str:
  return os.path.splitext(os.path.basename(path))[0]


def _expert(name: str) -> str | None:
  path = os.path.join(PROFILED, "human-experts", name.replace("layer_", "") + "_expert.json")
  return path if os.path.exists(path) else None


def _scored(workload, device, objective: str, seconds: float | None = None) -> dict[str, Any]:
  spec = pipeline_methods.OBJECTIVES[objective]
  found = spec.violations(workload, device)
  value = spec.value(workload, device)
  return {"value": float(value) if np.isfinite(value) else None, "feasible": not found,
          "violation": found[0] if found else None, "seconds": seconds}


def _timed(function):
  started = time.perf_counter()
  result = function()
  return result, time.perf_counter() - started


def _budget(objective: str) -> int | None:
  return pipeline_methods.OBJECTIVES[objective].default_evals // 10 if _QUICK.value else None


def _searches(workload, objective: str) -> list[dict[str, Any]]:
  runs = []
  for seed in range(2 if _QUICK.value else _SEEDS.value):
    data = pipeline_lib.run(workload, pipeline_methods.SplitConfig(
        objective=objective, seed=seed, evals=_budget(objective)))
    runs.append({"seed": seed, "value": data.objective, "feasible": data.feasible,
                 "seconds": data.details.get("seconds", 0.0),
                 "wall": data.wall_seconds["total"], "gap": data.gap})
  return runs


def _methods_common(workload, path: str, objective: str) -> dict[str, Any]:
  one = pipeline_methods.one_accelerator_split(workload)
  linear, linear_seconds = _timed(lambda: pipeline_methods.linear_split(workload, objective))
  rows = {"one_accelerator": _scored(workload, one, objective),
          "pipedream": _scored(workload, linear.device, objective, linear_seconds)}
  expert = _expert(_name(path))
  if expert:
    try:
      with open(expert) as f:
        split = profiled.split_from_json(workload, json.load(f), expert)
      rows["expert"] = _scored(workload, split, objective)
    except errors.RegalError as error:
      rows["expert"] = {"value": None, "feasible": False, "violation": str(error),
                        "seconds": None}
  return rows


def _workloads(kind: str):
  """(path, name, workload, the common methods' rows) of every workload of `kind`, with a
  progress line each."""
  for path in _files(kind):
    workload = graph_io.load_workload(path)
    name = _name(path)
    print(f"{kind}: {name} ({workload.num_ops} ops)", flush=True)
    yield path, name, workload, _methods_common(workload, path, kind)


def throughput_section() -> list[dict[str, Any]]:
  rows = []
  for _, name, workload, methods in _workloads("throughput"):
    try:
      dp, seconds = _timed(lambda: pipeline_dp.optimal_contiguous(
          workload, time_limit=5.0 if _QUICK.value else _DP_SECONDS.value))
      methods["contiguous_dp"] = _scored(workload, dp.device, "throughput", seconds)
    except errors.RegalError as error:
      methods["contiguous_dp"] = {"value": None, "feasible": None, "violation": str(error),
                                  "seconds": None}
    if workload.num_groups <= CPSAT_MAX_CLASSES:
      solved = pipeline_lib.run(workload, pipeline_methods.SplitConfig(
          method="cpsat", time_limit=2.0 if _QUICK.value else _CPSAT_SECONDS.value))
      methods["cpsat"] = {"value": solved.objective, "feasible": solved.feasible,
                          "violation": (solved.violations or [None])[0],
                          "seconds": solved.details["seconds"],
                          "status": solved.details["status"],
                          "lower_bound": solved.details["lower_bound"]}
    else:
      methods["cpsat"] = {"value": None, "feasible": None, "seconds": None,
                          "violation": f"not run: {workload.num_groups} classes > "
                                       f"{CPSAT_MAX_CLASSES}", "lower_bound": None}
    searches = _searches(workload, "throughput")
    published = profiled.PUBLISHED_THROUGHPUT.get(name, {})
    contiguous = [v for v in (published.get("dp"), methods["contiguous_dp"]["value"],
                              methods["pipedream"]["value"]) if v is not None]
    rows.append({"workload": name, "ops": workload.num_ops, "classes": workload.num_groups,
                 "accelerators": workload.max_accelerators, "methods": methods,
                 "search": searches, "published": published,
                 "best_contiguous": min(contiguous),
                 "lower_bound": pipeline.lower_bound(workload)})
  return rows


def latency_section() -> list[dict[str, Any]]:
  rows = []
  for _, name, workload, methods in _workloads("latency"):
    max_load_split, seconds = _timed(lambda: pipeline_linear.partition(workload))
    methods["max_load_split"] = _scored(workload, max_load_split.device, "latency", seconds)
    searches = _searches(workload, "latency")
    published = profiled.PUBLISHED_LATENCY.get(name, {})
    references = [v for v in (published.get("greedy"), published.get("dp_split"),
                              methods["pipedream"]["value"], methods["max_load_split"]["value"])
                  if v is not None]
    rows.append({"workload": name, "ops": workload.num_ops, "classes": workload.num_groups,
                 "accelerators": workload.max_accelerators,
                 "memory_over_cap": float(workload.memory.sum() / workload.accelerator_memory),
                 "methods": methods, "search": searches, "published": published,
                 "best_reference": min(references),
                 "lower_bound": blocks.lower_bound(workload)})
  return rows


def expert_latency_section() -> list[dict[str, Any]]:
  """The latency model where the expert splits fit: on the throughput inputs (larger caps)
  of the workloads with an expert split, that split's latency and the default latency
  search's on the same input."""
  rows = []
  for path in _files("throughput"):
    expert = _expert(_name(path))
    if expert is None:
      continue
    workload = graph_io.load_workload(path)
    print(f"expert latency: {_name(path)}", flush=True)
    with open(expert) as f:
      split = profiled.split_from_json(workload, json.load(f), expert)
    rows.append({"workload": _name(path), "ops": workload.num_ops,
                 "accelerators": workload.max_accelerators,
                 "expert": _scored(workload, split, "latency"),
                 "search": _searches(workload, "latency")})
  return rows


def doubled(path: str) -> dict[str, Any]:
  """A workload twice over, one model after the other: the second copy's ids and classes
  shifted, and one edge from the forward node ending the first copy's longest forward path
  (its output) to the node starting the second copy's (its input)."""
  import networkx
  with open(path) as f:
    data = json.load(f)
  nodes, edges = data["nodes"], data["edges"]
  shift = max(n["id"] for n in nodes) + 1
  colours = [n["colorClass"] for n in nodes if "colorClass" in n]
  colour_shift = max(colours) + 1 if colours else 0
  copy = [{**n, "id": n["id"] + shift, **({"colorClass": n["colorClass"] + colour_shift}
                                          if "colorClass" in n else {})} for n in nodes]
  forward = {n["id"] for n in nodes if not n["isBackwardNode"]}
  chain = networkx.DiGraph((e["sourceId"], e["destId"]) for e in edges
                           if e["sourceId"] in forward and e["destId"] in forward)
  longest = networkx.dag_longest_path(chain)
  cost = {e["sourceId"]: e["cost"] for e in edges}
  join = {"sourceId": longest[-1], "destId": longest[0] + shift,
          "cost": cost.get(longest[-1], 0.0)}
  shifted = [{**e, "sourceId": e["sourceId"] + shift, "destId": e["destId"] + shift}
             for e in edges]
  return {**data, "nodes": nodes + copy, "edges": edges + shifted + [join]}


def _cli_seconds(graph: str, *flags_: str) -> dict[str, Any]:
  with tempfile.TemporaryDirectory() as folder:
    out = os.path.join(folder, "result.json")
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "regal.optimize", "--graph", graph, *flags_,
                          "--out", out], capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    if run.returncode != 0:
      return {"seconds": seconds, "error": run.stderr.strip()[-300:]}
    with open(out) as f:
      result = SplitResult.from_json(json.load(f))
  return {"seconds": seconds, "value": result.objective, "feasible": result.feasible,
          "ops": result.graph["num_ops"], "search_seconds": result.details.get("seconds")}


def scale_section() -> list[dict[str, Any]]:
  rows = []
  with tempfile.TemporaryDirectory() as folder:
    for kind, name, flags_ in (("throughput", "op_bert_l-6_training", ("--objective",
                                                                       "throughput")),
                               ("latency", "op_bert_l-6_inference", ("--model", "blocks"))):
      path = os.path.join(PROFILED, kind, name + ".json")
      twice = os.path.join(folder, name + "_twice.json")
      with open(twice, "w") as f:
        json.dump(doubled(path), f)
      for label, graph in ((name, path), (name + " twice", twice)):
        print(f"scale: {label}", flush=True)
        rows.append({"workload": label, "objective": kind, **_cli_seconds(graph, *flags_)})
  return rows


def _median(runs, key):
  values = [r[key] for r in runs if r[key] is not None]
  return float(np.median(values)) if values else None


def _cell(entry: dict[str, Any]) -> str:
  if entry["value"] is None or not entry["feasible"]:
    why = entry["violation"] or "no answer"
    shown = f"{entry['value']:.4g}, " if entry["value"] is not None else ""
    return f"{shown}infeasible: {why[:70]}" if entry["feasible"] is False else f"- ({why[:70]})"
  return f"{entry['value']:.4g}"


def markdown(results: dict[str, Any]) -> list[str]:
  lines = []
  if "throughput" in results:
    rows = []
    for r in results["throughput"]:
      runs = r["search"]
      worst = max(x["value"] for x in runs)
      m, p = r["methods"], r["published"]
      bound = m["cpsat"].get("lower_bound")
      solver = "-" if m["cpsat"]["value"] is None else (
          f"{m['cpsat']['value']:.4g} ({m['cpsat']['status'].lower()}, bound {bound:.4g})")
      rows.append([r["workload"], r["ops"], r["accelerators"], _cell(m["one_accelerator"]),
                   _cell(m["pipedream"]), _cell(m["contiguous_dp"]),
                   _cell(m["expert"]) if "expert" in m else "-", solver,
                   p.get("dp"), p.get("pipedream"), p.get("local_search"),
                   f"{min(x['value'] for x in runs):.4g} / {worst:.4g}",
                   f"{100 * (worst / r['best_contiguous'] - 1):+.2f}%",
                   f"{100 * (worst / bound - 1):.2f}%" if bound else "-",
                   f"{_median(runs, 'wall'):.1f}"])
    lines += ["## Throughput (max-load, lower is better)", "",
              "Ours: the default search (`--objective throughput`), best / worst over the "
              "seeds; 'vs contiguous' compares the worst seed with the best contiguous split "
              "known (published DP, our DP, PipeDream-style), and 'gap to bound' with CP-SAT's "
              "proven lower bound (from a run of its own, on workloads of at most "
              f"{CPSAT_MAX_CLASSES} classes). Published: the README's figures from their "
              "code.", "",
              *report.markdown_table(
                  ["workload", "ops", "acc.", "one accelerator", "PipeDream-style (ours)",
                   "contiguous DP (ours)", "expert", "CP-SAT (ours)", "DP (published)",
                   "PipeDream (published)", "local search (published)", "ours best / worst",
                   "worst vs contiguous", "worst: gap to bound", "wall s (median)"], rows), ""]
  if "latency" in results:
    rows = []
    for r in results["latency"]:
      runs = r["search"]
      worst = max(x["value"] for x in runs)
      m, p = r["methods"], r["published"]
      rows.append([r["workload"], r["ops"], r["accelerators"], f"{r['memory_over_cap']:.1f}x",
                   _cell(m["one_accelerator"]), _cell(m["pipedream"]),
                   _cell(m["max_load_split"]), _cell(m["expert"]) if "expert" in m else "-",
                   p.get("greedy"), p.get("dp_split"),
                   f"{min(x['value'] for x in runs):.4g} / {worst:.4g}",
                   f"{100 * (worst / r['best_reference'] - 1):+.2f}%",
                   f"{_median(runs, 'wall'):.1f}"])
    lines += ["## Single-sample latency (`--model blocks`, lower is better)", "",
              "Every accelerator one contiguous block. 'vs best reference' compares the worst "
              "seed with the best of the published greedy and DP-split latencies and our "
              "PipeDream-style and max-load splits. The expert splits break the memory caps "
              "of these inputs; their latency is shown beside what they break.", "",
              *report.markdown_table(
                  ["workload", "ops", "acc.", "memory / cap", "one accelerator",
                   "PipeDream-style (ours)", "max-load split (ours)", "expert",
                   "greedy (published)", "DP's split (published)", "ours best / worst",
                   "worst vs best reference", "wall s (median)"], rows), ""]
  if "expert_latency" in results:
    rows = []
    for r in results["expert_latency"]:
      runs = r["search"]
      worst = max(x["value"] for x in runs)
      expert = r["expert"]
      rows.append([r["workload"], r["ops"], r["accelerators"], _cell(expert),
                   f"{min(x['value'] for x in runs):.5g} / {worst:.5g}",
                   f"{100 * (worst / expert['value'] - 1):+.2f}%"
                   if expert["feasible"] and expert["value"] else "-"])
    lines += ["## Single-sample latency where the expert splits fit", "",
              "The latency model on the throughput inputs (caps the experts' splits meet) of "
              "the workloads with an expert split: the expert's latency and the default "
              "latency search's on the same input.", "",
              *report.markdown_table(["workload (throughput input)", "ops", "acc.",
                                      "expert", "ours best / worst", "worst vs expert"],
                                     rows), ""]
  if "scale" in results:
    rows = [[r["workload"], r["objective"], r.get("ops"), r.get("value"), r.get("feasible"),
             r.get("search_seconds"), f"{r['seconds']:.1f}", r.get("error", "")]
            for r in results["scale"]]
    lines += ["## End to end (`python -m regal.optimize`, a fresh process)", "",
              *report.markdown_table(["workload", "objective", "ops", "value", "feasible",
                                      "search s", "total s", "error"], rows), ""]
  return lines


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("seeds", "dp_seconds", "cpsat_seconds"))
  sections = {"throughput": throughput_section, "latency": latency_section,
              "expert_latency": expert_latency_section, "scale": scale_section}
  unknown = [s for s in _SECTIONS.value if s not in sections]
  if unknown:
    raise errors.ConfigError(f"--sections: unknown {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(sections)}")
  if _QUICK.value and "scale" in _SECTIONS.value and flags.FLAGS["sections"].present:
    raise errors.ConfigError("--sections scale would do nothing here: --quick skips the scale "
                             "section")
  started = time.perf_counter()
  results = {name: sections[name]() for name in _SECTIONS.value
             if not (_QUICK.value and name == "scale")}
  header, facts = report.header("Profiled workloads: split methods, both objectives",
                                "regal_experiments.profiled_table", "quick" if _QUICK.value else "full")
  report.publish(_OUT.value, "profiled_table", header, markdown(results),
                 {**facts, **results, "seconds": time.perf_counter() - started})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
