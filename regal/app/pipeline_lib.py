"""The library behind `python -m regal.optimize --objective throughput`: a split of a profiled
workload (`datasets.formats.profiled`) over its accelerators and CPU side for pipeline
max-load (`regal.scoring.pipeline`), by one of `METHODS`, reported as JSON with the split in
the format's own shape.

Every method's answer is scored by the readable reference (`pipeline.max_load`) and checked
by `pipeline.violations` (memory caps, co-location, CPU-only ops); a split that breaks a rule
is reported with `feasible: false` and its violations, never as an answer.
"""
from __future__ import annotations

import dataclasses
import platform
import time
from typing import Any, Callable

import numpy as np

from datasets import cli, errors
from datasets.formats import profiled
from datasets.formats.profiled import CPU, Workload
from regal.app import report as report_lib
from regal.baselines import pipeline_dp, pipeline_linear, pipeline_local_search
from regal.scoring import bounds, native_pipeline, pipeline

OBJECTIVE = "throughput"
DEFAULT_EVALS = 4_000_000  # Moves scored: 1-6 s on the shared workloads (2-core CPU).


@dataclasses.dataclass(frozen=True)
class SplitConfig:
  method: str = "search"
  evals: int | None = None
  seed: int = 0
  time_limit: float | None = None


@dataclasses.dataclass(frozen=True)
class SplitMethod:
  name: str
  summary: str
  run: Callable[[Workload, SplitConfig, float], tuple[np.ndarray, dict[str, Any]]]
  reads: frozenset = frozenset()  # Which of evals, seed, time_limit it reads.


def _one_accelerator_split(workload: Workload) -> np.ndarray:
  """Every class an accelerator runs on accelerator 0, the rest on the CPU side."""
  device = np.zeros(workload.num_ops, np.int64)
  for members in workload.group_members():
    if not workload.on_accelerator[members].all():
      device[members] = CPU
  return device


def _one_accelerator(workload, config, deadline):
  del config, deadline
  return _one_accelerator_split(workload), {}


def _pipedream(workload, config, deadline):
  del config, deadline
  split = pipeline_linear.partition(workload)
  return split.device, {"units": split.units, "seconds": split.seconds}


def _contiguous_dp(workload, config, deadline):
  del config, deadline
  split = pipeline_dp.optimal_contiguous(workload)
  return split.device, {"ideals": split.ideals, "blocks": split.blocks,
                        "seconds": split.seconds}


def _search(workload, config, deadline):
  start = pipeline_linear.partition(workload)
  if pipeline.violations(workload, start.device):
    return start.device, {"start": "pipedream", "skipped": "the start breaks the memory caps"}
  evals = DEFAULT_EVALS if config.evals is None else config.evals
  with cli.stoppable():
    searched = pipeline_local_search.local_search(
        workload, start.device, evaluations=evals, seed=config.seed, deadline=deadline,
        should_stop=cli.stop_requested)
  return searched.device, {"start": "pipedream", "start_objective": start.max_load,
                           "budget": evals, "evaluations": searched.evaluations,
                           "rounds": searched.rounds, "moves_taken": searched.steps,
                           "seconds": searched.seconds}


METHODS: dict[str, SplitMethod] = {m.name: m for m in (
    SplitMethod("search", "a PipeDream-style split, then an iterated local search over single "
                "class moves (compiled; the default)", _search,
                frozenset({"evals", "seed", "time_limit"})),
    SplitMethod("pipedream", "PipeDream-style: the best cut of one topological order into "
                "consecutive runs", _pipedream),
    SplitMethod("contiguous_dp", "the optimal contiguous split (Tarnawski et al.'s DP; "
                "refuses graphs with too many ideals)", _contiguous_dp),
    SplitMethod("one_accelerator", "everything an accelerator runs on one accelerator",
                _one_accelerator),
)}


def check_config(config: SplitConfig) -> None:
  if config.method not in METHODS:
    raise errors.ConfigError(f"--objective {OBJECTIVE} takes --method "
                             f"{', '.join(METHODS)}; got {config.method!r}")


def _scored(workload: Workload, device: np.ndarray) -> dict[str, Any]:
  found = pipeline.violations(workload, device)
  return {"objective": pipeline.max_load(workload, device), "feasible": not found,
          "violations": found}


def run(workload: Workload, config: SplitConfig = SplitConfig(), source: str = ""
        ) -> dict[str, Any]:
  """The result JSON of splitting `workload` with `config.method`."""
  started = time.perf_counter()
  check_config(config)
  deadline = np.inf if config.time_limit is None else started + config.time_limit
  method = METHODS[config.method]
  device, details = method.run(workload, config, deadline)
  answer = _scored(workload, device)
  baselines = {name: _scored(workload, split) for name, split in (
      ("one_accelerator", _one_accelerator_split(workload)),
      ("pipedream", pipeline_linear.partition(workload).device))}
  value = answer["objective"]
  bound = min(pipeline.lower_bound(workload), value)
  arrays = native_pipeline.arrays_of(workload)
  load = native_pipeline.loads(arrays, device)
  memory = [float(workload.memory[device == a].sum()) for a in range(workload.max_accelerators)]
  graph = workload.graph
  return {
      "format": report_lib.RESULT_FORMAT, "version": 1,
      "graph": {"name": graph.name, "num_ops": graph.num_ops, "num_edges": graph.num_data_edges,
                "colocation_classes": workload.num_groups, "source": source},
      "devices": {"accelerators": workload.max_accelerators, "cpus": workload.max_cpus,
                  "memory_per_accelerator": workload.accelerator_memory},
      "settings": {"method": config.method, "objective": OBJECTIVE,
                   "evals": (DEFAULT_EVALS if config.evals is None else config.evals)
                   if "evals" in method.reads else None,
                   "seed": config.seed if "seed" in method.reads else None,
                   "time_limit": config.time_limit},
      "details": details,
      "objective": value,
      "lower_bound": bound, "bound_source": "structure",
      "gap": bounds.gap(value, bound) if answer["feasible"] else None,
      "proven_optimal": bool(answer["feasible"] and bounds.proven_optimal(value, bound)),
      "feasible": answer["feasible"], "violations": answer["violations"],
      "interrupted": cli.stop_requested(),
      "loads": {"accelerators": load[:-1].tolist(), "cpu": float(load[-1])},
      "memory": {"accelerators": memory, "cap": workload.accelerator_memory},
      "split": profiled.split_to_json(workload, device),
      "placement": [{"node": int(node), "device": "cpu" if d == CPU else int(d)}
                    for node, d in zip(workload.node_ids.tolist(), device.tolist())],
      "baselines": baselines,
      "improvement_pct": {name: 100.0 * (b["objective"] - value) / b["objective"]
                          if b["objective"] else 0.0 for name, b in baselines.items()},
      "evaluations": details.get("evaluations", 0),
      "wall_seconds": {"total": time.perf_counter() - started},
      "versions": {"python": platform.python_version(), "numpy": np.__version__,
                   "regal": report_lib.regal_version()},
  }


def summary(data: dict[str, Any]) -> str:
  """A few lines for the terminal."""
  g, d = data["graph"], data["devices"]
  lines = [f"{g['name']}: {g['num_ops']} ops in {g['colocation_classes']} co-location classes, "
           f"{d['accelerators']} accelerators of {d['memory_per_accelerator']:.6g} bytes"
           f"{' and a CPU side' if d['cpus'] else ''}; objective {OBJECTIVE} (max-load)"]
  if not data["feasible"]:
    lines.append(f"no feasible split found ({data['settings']['method']}): "
                 + "; ".join(data["violations"][:3]))
    return "\n".join(lines)
  gap = "proven optimal" if data["proven_optimal"] else f"gap to the lower bound " \
      f"{data['lower_bound']:.6g}: {100 * data['gap']:.3g}%"
  lines.append(f"max-load {data['objective']:.6g} ({data['settings']['method']}, {gap})")
  for name, baseline in data["baselines"].items():
    shown = f"{baseline['objective']:.6g}" if baseline["feasible"] else "infeasible"
    lines.append(f"  {name}: {shown}"
                 + (f" ({report_lib.versus(data['objective'], baseline['objective'])})"
                    if baseline["feasible"] else ""))
  loads = ", ".join(f"{x:.4g}" for x in data["loads"]["accelerators"])
  used = ", ".join(f"{100 * m / data['memory']['cap']:.0f}%" if data["memory"]["cap"] else "-"
                   for m in data["memory"]["accelerators"])
  lines.append(f"  loads: accelerators [{loads}], CPU side {data['loads']['cpu']:.4g}; "
               f"memory used [{used}] of the cap")
  lines.append(f"  {data['evaluations']} moves scored, {data['wall_seconds']['total']:.2f} s")
  return "\n".join(lines)
