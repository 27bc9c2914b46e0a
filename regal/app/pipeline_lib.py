"""The library behind `python -m regal.optimize --objective throughput` and `--model blocks`:
a split of a profiled workload (`regal_datasets.formats.profiled`) over its accelerators and CPU
side, for pipeline max-load (`regal.scoring.throughput`) or single-sample latency with
contiguous blocks (`regal.scoring.blocks`), by a split method of `regal.app.methods`
(`baselines.pipeline_methods`), reported as JSON with the split in the format's own shape.

Every method's answer is scored by the objective's readable reference and checked by its
`violations` (memory caps, co-location, CPU-only ops; contiguity for latency); a split that
breaks a rule is reported with `feasible: false` and its violations, never as an answer.
"""
from __future__ import annotations

import platform
import time
from typing import Any

import numpy as np

from regal_datasets import cli
from regal_datasets.formats import profiled
from regal_datasets.formats.profiled import CPU, Workload
from regal.app import methods, units
from regal.app import report as report_lib
from regal.app.result import SplitResult
from regal.baselines import pipeline_methods
from regal.scoring import bounds, models
from regal.scoring.blocks import reference as blocks
from regal.scoring.throughput import native as native_pipeline

OBJECTIVE = "throughput"  # --objective throughput
MODEL = "blocks"  # --model blocks: the latency objective


def _scored(workload: Workload, device: np.ndarray, objective: models.SplitModel
            ) -> dict[str, Any]:
  found = objective.violations(workload, device)
  value = objective.value(workload, device)
  return {"objective": value if np.isfinite(value) else None, "feasible": not found,
          "violations": found}


def _block_rows(workload: Workload, device: np.ndarray) -> list[dict[str, Any]]:
  """Each accelerator's block: when it starts and finishes, what it receives, computes and
  sends (the latency model's timeline)."""
  finish = blocks.finish_times(workload, device)
  if finish is None:
    return []
  rows = []
  for accelerator, (receive, compute, send) in blocks.block_times(workload, device).items():
    end = float(finish[device == accelerator][0])
    rows.append({"accelerator": accelerator, "start": end - receive - compute - send,
                 "finish": end, "receive": receive, "compute": compute, "send": send})
  return rows


def run(workload: Workload,
        config: pipeline_methods.SplitConfig = pipeline_methods.SplitConfig(), source: str = "",
        device_spec: str | None = None) -> SplitResult:
  """The result of splitting `workload` with `config.method`; `device_spec` names the file
  whose accelerators replaced the workload file's (`profiled.with_devices`), if any."""
  started = time.perf_counter()
  method = methods.get_split(config.method, config.objective)
  objective = pipeline_methods.OBJECTIVES[config.objective]
  deadline = np.inf if config.time_limit is None else started + config.time_limit
  device, details = method.split(workload, config, deadline)
  answer = _scored(workload, device, objective)
  baselines = {name: _scored(workload, split, objective) for name, split in (
      ("one_accelerator", pipeline_methods.one_accelerator_split(workload)),
      ("pipedream", pipeline_methods.linear_split(workload, config.objective).device))}
  value = answer["objective"]
  bound, bound_source = objective.lower_bound(workload), "structure"
  solver_bound = details.get("lower_bound")
  if solver_bound is not None and solver_bound > bound:
    bound, bound_source = float(solver_bound), "solver"
  if answer["feasible"] and value is not None:
    bound = min(bound, value)
  arrays = native_pipeline.arrays_of(workload)
  load = native_pipeline.loads(arrays, device)
  memory = [float(workload.memory[device == a].sum()) for a in range(workload.max_accelerators)]
  graph = workload.graph
  memory_unit = units.memory_unit(workload.accelerator_memory)
  return SplitResult(
      graph={"name": graph.name, "num_ops": graph.num_ops, "num_edges": graph.num_data_edges,
             "colocation_classes": workload.num_groups, "source": source},
      devices={"accelerators": workload.max_accelerators, "cpus": workload.max_cpus,
               "memory_per_accelerator": workload.accelerator_memory,
               "from": device_spec or "the workload's file"},
      settings={"method": config.method, "objective": config.objective,
                "model": MODEL if config.objective == "latency" else None,
                "evals": config.budget(workload) if "evals" in method.reads else None,
                "seed": config.seed if "seed" in method.reads else None,
                "time_limit": config.time_limit},
      details=details,
      objective=value,
      lower_bound=bound, bound_source=bound_source,
      gap=bounds.gap(value, bound) if answer["feasible"] else None,
      # Within `bounds.PROVEN_TOLERANCE` of the bound, as every method's (a CP-SAT split proven
      # OPTIMAL at its resolution is within it too: `pipeline_cpsat.SolvedSplit.proven`).
      proven_optimal=bool(answer["feasible"] and bounds.proven_optimal(value, bound)),
      blocks=_block_rows(workload, device) if config.objective == "latency" else None,
      feasible=answer["feasible"], violations=answer["violations"],
      interrupted=cli.stop_requested(),
      loads={"accelerators": load[:-1].tolist(), "cpu": float(load[-1])},
      memory={"accelerators": memory, "cap": workload.accelerator_memory},
      split=profiled.split_to_json(workload, device),
      placement=[{"node": int(node), "device": "cpu" if d == CPU else int(d)}
                 for node, d in zip(workload.node_ids.tolist(), device.tolist())],
      baselines=baselines,
      improvement_pct={name: 100.0 * (b["objective"] - value) / b["objective"]
                       for name, b in baselines.items()
                       if b["objective"] and value is not None},
      evaluations=details.get("evaluations", 0),
      wall_seconds={"total": time.perf_counter() - started},
      versions={"python": platform.python_version(), "numpy": np.__version__,
                "regal": report_lib.regal_version()},
      published=published(config.objective, graph.name),
      memory_units=memory_unit.to_json(),
      display={"memory_per_accelerator": memory_unit([workload.accelerator_memory])[0],
               "memory": memory_unit(memory)})


# What each baseline of a split is, said in the summary: ours, run on the workload here.
BASELINE_LABELS = {"one_accelerator": "ours, everything on one accelerator",
                   "pipedream": "ours, a PipeDream-style cut of one topological order"}
PUBLISHED_LABELS = {"dp": "DP", "pipedream": "PipeDream", "local_search": "local search",
                    "greedy": "greedy", "dp_split": "DP's split"}


def published(objective: str, name: str) -> dict[str, float]:
  """The workload's published figures for `objective` (Tarnawski et al. 2020), by the graph's
  name (its file stem); none for other workloads."""
  table = (profiled.PUBLISHED_THROUGHPUT if objective == "throughput"
           else profiled.PUBLISHED_LATENCY)
  return table.get(name, {})


def summary(result: SplitResult) -> str:
  """A few lines for the terminal. Times are the workload file's own (its latencies' unit,
  which the files do not name); memory in GB / MB."""
  g, d = result.graph, result.devices
  memory_unit = units.memory_unit(d["memory_per_accelerator"])
  cap = memory_unit([d["memory_per_accelerator"]])[0]
  objective = pipeline_methods.OBJECTIVES[result.settings["objective"]]
  lines = [f"{g['name']}: {g['num_ops']} ops in {g['colocation_classes']} co-location classes, "
           f"{d['accelerators']} accelerators of {cap:.4g} {memory_unit.name}"
           f"{' and a CPU side' if d['cpus'] else ''}; objective {objective.summary}; times in "
           f"the workload file's latency units"]
  if not result.feasible:
    lines.append(f"no feasible split found ({result.settings['method']}): "
                 + "; ".join(result.violations[:3]))
    return "\n".join(lines)
  gap = "proven optimal" if result.proven_optimal else (
      f"gap to the lower bound {result.lower_bound:.6g}: "
      + ("unknown" if result.gap is None else f"{100 * result.gap:.3g}%"))
  what = "max-load" if result.settings["objective"] == "throughput" else "latency"
  lines.append(f"{what} {result.objective:.6g} (ours: {result.settings['method']}, {gap})")
  for name, baseline in result.baselines.items():
    finite = baseline["feasible"] and baseline["objective"] is not None
    shown = (f"{baseline['objective']:.6g}" if finite else "no finite value" if
             baseline["feasible"] else f"infeasible ({baseline['violations'][0]})")
    lines.append(f"  {BASELINE_LABELS.get(name, name)}: {shown}"
                 + (f" (our answer is {report_lib.versus(result.objective, baseline['objective'])}"
                    f" it)" if finite else ""))
  figures = result.published
  if figures:
    lines.append("  published (Tarnawski et al. 2020, their code): " + ", ".join(
        f"{PUBLISHED_LABELS.get(k, k)} {v:.6g}" for k, v in figures.items())
        + f"; our answer is {report_lib.versus(result.objective, min(figures.values()))} "
        f"the best of them")
  used = ", ".join(f"{100 * m / result.memory['cap']:.0f}%" if result.memory["cap"] else "-"
                   for m in result.memory["accelerators"])
  if what == "max-load":
    loads = ", ".join(f"{x:.4g}" for x in result.loads["accelerators"])
    lines.append(f"  loads: accelerators [{loads}], CPU side {result.loads['cpu']:.4g}; "
                 f"memory used [{used}] of the cap")
  else:
    spans = ", ".join(f"{b['accelerator']}: {b['start']:.4g}-{b['finish']:.4g}"
                      for b in result.blocks)
    lines.append(f"  blocks (start-finish): {spans}; memory used [{used}] of the cap")
  lines.append(f"  {result.evaluations} moves scored, {result.wall_seconds['total']:.2f} s")
  return "\n".join(lines)
