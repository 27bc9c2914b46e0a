"""The library behind `python -m regal.optimize --objective throughput` and `--model blocks`:
a split of a profiled workload (`datasets.formats.profiled`) over its accelerators and CPU
side, for pipeline max-load (`regal.scoring.pipeline`) or single-sample latency with
contiguous blocks (`regal.scoring.blocks`), by one of `METHODS`, reported as JSON with the
split in the format's own shape.

Every method's answer is scored by the objective's readable reference and checked by its
`violations` (memory caps, co-location, CPU-only ops; contiguity for latency); a split that
breaks a rule is reported with `feasible: false` and its violations, never as an answer.
"""
from __future__ import annotations

import dataclasses
import functools
import platform
import time
from typing import Any, Callable

import numpy as np

from datasets import cli, errors
from datasets.formats import profiled
from datasets.formats.profiled import CPU, Workload
from regal.app import report as report_lib
from regal.app import units
from regal.baselines import pipeline_cpsat, pipeline_dp, pipeline_linear, pipeline_local_search
from regal.scoring import blocks, bounds, models, native_pipeline, pipeline

OBJECTIVE = "throughput"  # --objective throughput
MODEL = "blocks"  # --model blocks: the latency objective


# --objective throughput and --model blocks: the model registry's split models, by the name
# the result JSON gives the objective.
OBJECTIVES = {"throughput": models.get_split("throughput"), "latency": models.get_split("blocks")}


@dataclasses.dataclass(frozen=True)
class SplitConfig:
  method: str = "search"
  objective: str = "throughput"  # or "latency"
  evals: int | None = None
  seed: int = 0
  time_limit: float | None = None

  def budget(self, workload: Workload) -> int:
    """The search's moves: --evals, else the objective's default for this workload."""
    return OBJECTIVES[self.objective].budget(workload) if self.evals is None else self.evals

  @property
  def max_rounds(self) -> int | None:
    """The default budget's cap on rounds; --evals has none."""
    return OBJECTIVES[self.objective].default_rounds if self.evals is None else None


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


@functools.lru_cache(maxsize=4)  # The search's start and the baseline: computed once.
def _linear_split(workload: Workload, objective: str):
  """PipeDream-style: the best cut of one topological order (for max-load, or for the sum of
  run times under latency)."""
  return (pipeline_linear.partition if objective == "throughput" else
          pipeline_linear.for_latency)(workload)


def _pipedream(workload, config, deadline):
  del deadline
  split = _linear_split(workload, config.objective)
  return split.device, {"units": split.units, "seconds": split.seconds}


def _contiguous_dp(workload, config, deadline):
  del config, deadline
  split = pipeline_dp.optimal_contiguous(workload)
  return split.device, {"ideals": split.ideals, "blocks": split.blocks,
                        "seconds": split.seconds}


def _search(workload, config, deadline):
  objective = OBJECTIVES[config.objective]
  start, start_name = _linear_split(workload, config.objective), "pipedream"
  if objective.violations(workload, start.device) and workload.max_cpus:
    # The order's cut can leave blocks waiting on each other when a co-location class holds
    # both ends of a path through another run; every op on the CPU side never does.
    start = dataclasses.replace(start, device=np.full(workload.num_ops, CPU, np.int64))
    start = dataclasses.replace(start, max_load=objective.value(workload, start.device))
    start_name = "cpu"
  if objective.violations(workload, start.device):
    return start.device, {"start": start_name,
                          "skipped": "the start breaks the memory caps or contiguity"}
  with cli.stoppable():
    searched = pipeline_local_search.local_search(
        workload, start.device, evaluations=config.budget(workload), seed=config.seed,
        deadline=deadline, should_stop=cli.stop_requested, objective=objective.kernel,
        max_rounds=config.max_rounds)
  return searched.device, {"start": start_name, "start_objective": start.max_load,
                           "budget": config.budget(workload), "max_rounds": config.max_rounds,
                           "evaluations": searched.evaluations,
                           "rounds": searched.rounds, "moves_taken": searched.steps,
                           "seconds": searched.seconds}


CPSAT_SECONDS = 10.0  # --method cpsat's time limit unless --time_limit gives one.


def _cpsat(workload, config, deadline):
  del deadline
  if config.objective != "throughput":
    raise errors.ConfigError("--method cpsat models the pipeline max-load only "
                             "(--objective throughput)")
  start = pipeline_linear.partition(workload)
  hint = None if pipeline.violations(workload, start.device) else start.device
  solved = pipeline_cpsat.solve(workload, time_limit=config.time_limit or CPSAT_SECONDS,
                                hint=hint, seed=config.seed)
  device = solved.device if solved.device is not None else start.device
  return device, {"status": solved.status, "lower_bound": solved.lower_bound,
                  "seconds": solved.seconds, "hint": "pipedream" if hint is not None else None,
                  "answer": "hint" if solved.from_hint or solved.device is None else "solver",
                  "resolution": solved.resolution,
                  "proven_optimal": solved.device is not None and solved.proven}


METHODS: dict[str, SplitMethod] = {m.name: m for m in (
    SplitMethod("search", "a PipeDream-style split, then an iterated local search over single "
                "class moves (compiled; under latency every block stays contiguous; the "
                "default)", _search, frozenset({"evals", "seed", "time_limit"})),
    SplitMethod("pipedream", "PipeDream-style: the best cut of one topological order into "
                "consecutive runs (for latency: the least sum of run times)", _pipedream),
    SplitMethod("contiguous_dp", "the optimal contiguous split for max-load (Tarnawski et "
                "al.'s DP; refuses graphs with too many ideals); under latency, that split's "
                "latency", _contiguous_dp),
    SplitMethod("one_accelerator", "everything an accelerator runs on one accelerator",
                _one_accelerator),
    SplitMethod("cpsat", "CP-SAT over any split (max-load only): the best split it finds in "
                "--time_limit seconds (default 10) from the PipeDream-style hint, and its "
                "proven bound", _cpsat, frozenset({"time_limit", "seed"})),
)}


def check_config(config: SplitConfig) -> None:
  if config.objective not in OBJECTIVES:
    raise errors.ConfigError(f"unknown split objective {config.objective!r}; known: "
                             f"{', '.join(OBJECTIVES)}")
  if config.method not in METHODS:
    how = f"--objective {OBJECTIVE}" if config.objective == "throughput" else f"--model {MODEL}"
    raise errors.ConfigError(f"{how} takes --method {', '.join(METHODS)}; got "
                             f"{config.method!r}")


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


def run(workload: Workload, config: SplitConfig = SplitConfig(), source: str = "",
        device_spec: str | None = None) -> dict[str, Any]:
  """The result JSON of splitting `workload` with `config.method`; `device_spec` names the
  file whose accelerators replaced the workload file's (`profiled.with_devices`), if any."""
  started = time.perf_counter()
  check_config(config)
  deadline = np.inf if config.time_limit is None else started + config.time_limit
  method, objective = METHODS[config.method], OBJECTIVES[config.objective]
  device, details = method.run(workload, config, deadline)
  answer = _scored(workload, device, objective)
  baselines = {name: _scored(workload, split, objective) for name, split in (
      ("one_accelerator", _one_accelerator_split(workload)),
      ("pipedream", _linear_split(workload, config.objective).device))}
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
  data = {
      "format": report_lib.RESULT_FORMAT, "version": 1,
      "graph": {"name": graph.name, "num_ops": graph.num_ops, "num_edges": graph.num_data_edges,
                "colocation_classes": workload.num_groups, "source": source},
      "devices": {"accelerators": workload.max_accelerators, "cpus": workload.max_cpus,
                  "memory_per_accelerator": workload.accelerator_memory,
                  "from": device_spec or "the workload's file"},
      "settings": {"method": config.method, "objective": config.objective,
                   "model": MODEL if config.objective == "latency" else None,
                   "evals": config.budget(workload) if "evals" in method.reads else None,
                   "seed": config.seed if "seed" in method.reads else None,
                   "time_limit": config.time_limit},
      "details": details,
      "objective": value,
      "lower_bound": bound, "bound_source": bound_source,
      "gap": bounds.gap(value, bound) if answer["feasible"] else None,
      "proven_optimal": bool(answer["feasible"] and (bounds.proven_optimal(value, bound)
                                                     or details.get("proven_optimal", False))),
      **({"blocks": _block_rows(workload, device)} if config.objective == "latency" else {}),
      "feasible": answer["feasible"], "violations": answer["violations"],
      "interrupted": cli.stop_requested(),
      "loads": {"accelerators": load[:-1].tolist(), "cpu": float(load[-1])},
      "memory": {"accelerators": memory, "cap": workload.accelerator_memory},
      "split": profiled.split_to_json(workload, device),
      "placement": [{"node": int(node), "device": "cpu" if d == CPU else int(d)}
                    for node, d in zip(workload.node_ids.tolist(), device.tolist())],
      "baselines": baselines,
      "improvement_pct": {name: 100.0 * (b["objective"] - value) / b["objective"]
                          for name, b in baselines.items()
                          if b["objective"] and value is not None},
      "evaluations": details.get("evaluations", 0),
      "wall_seconds": {"total": time.perf_counter() - started},
      "versions": {"python": platform.python_version(), "numpy": np.__version__,
                   "regal": report_lib.regal_version()},
  }
  memory_unit = units.memory_unit(workload.accelerator_memory)
  data.update({
      "published": published(data), "memory_units": memory_unit.to_json(),
      "display": {"memory_per_accelerator": memory_unit([workload.accelerator_memory])[0],
                  "memory": memory_unit(memory)}})
  return data


# What each baseline of a split is, said in the summary: ours, run on the workload here.
BASELINE_LABELS = {"one_accelerator": "ours, everything on one accelerator",
                   "pipedream": "ours, a PipeDream-style cut of one topological order"}
PUBLISHED_LABELS = {"dp": "DP", "pipedream": "PipeDream", "local_search": "local search",
                    "greedy": "greedy", "dp_split": "DP's split"}


def published(data: dict[str, Any]) -> dict[str, float]:
  """The workload's published figures for this objective (Tarnawski et al. 2020), by the
  graph's name (its file stem); none for other workloads."""
  table = (profiled.PUBLISHED_THROUGHPUT if data["settings"]["objective"] == "throughput"
           else profiled.PUBLISHED_LATENCY)
  return table.get(data["graph"]["name"], {})


def summary(data: dict[str, Any]) -> str:
  """A few lines for the terminal. Times are the workload file's own (its latencies' unit,
  which the files do not name); memory in GB / MB."""
  g, d = data["graph"], data["devices"]
  memory_unit = units.memory_unit(d["memory_per_accelerator"])
  cap = memory_unit([d["memory_per_accelerator"]])[0]
  lines = [f"{g['name']}: {g['num_ops']} ops in {g['colocation_classes']} co-location classes, "
           f"{d['accelerators']} accelerators of {cap:.4g} {memory_unit.name}"
           f"{' and a CPU side' if d['cpus'] else ''}; objective "
           f"{OBJECTIVES[data['settings']['objective']].summary}; times in the workload "
           f"file's latency units"]
  if not data["feasible"]:
    lines.append(f"no feasible split found ({data['settings']['method']}): "
                 + "; ".join(data["violations"][:3]))
    return "\n".join(lines)
  gap = "proven optimal" if data["proven_optimal"] else (
      f"gap to the lower bound {data['lower_bound']:.6g}: "
      + ("unknown" if data["gap"] is None else f"{100 * data['gap']:.3g}%"))
  what = "max-load" if data["settings"]["objective"] == "throughput" else "latency"
  lines.append(f"{what} {data['objective']:.6g} (ours: {data['settings']['method']}, {gap})")
  for name, baseline in data["baselines"].items():
    finite = baseline["feasible"] and baseline["objective"] is not None
    shown = (f"{baseline['objective']:.6g}" if finite else "no finite value" if
             baseline["feasible"] else f"infeasible ({baseline['violations'][0]})")
    lines.append(f"  {BASELINE_LABELS.get(name, name)}: {shown}"
                 + (f" (our answer is {report_lib.versus(data['objective'], baseline['objective'])}"
                    f" it)" if finite else ""))
  figures = published(data)
  if figures:
    lines.append("  published (Tarnawski et al. 2020, their code): " + ", ".join(
        f"{PUBLISHED_LABELS.get(k, k)} {v:.6g}" for k, v in figures.items())
        + f"; our answer is {report_lib.versus(data['objective'], min(figures.values()))} "
        f"the best of them")
  used = ", ".join(f"{100 * m / data['memory']['cap']:.0f}%" if data["memory"]["cap"] else "-"
                   for m in data["memory"]["accelerators"])
  if what == "max-load":
    loads = ", ".join(f"{x:.4g}" for x in data["loads"]["accelerators"])
    lines.append(f"  loads: accelerators [{loads}], CPU side {data['loads']['cpu']:.4g}; "
                 f"memory used [{used}] of the cap")
  else:
    spans = ", ".join(f"{b['accelerator']}: {b['start']:.4g}-{b['finish']:.4g}"
                      for b in data["blocks"])
    lines.append(f"  blocks (start-finish): {spans}; memory used [{used}] of the cap")
  lines.append(f"  {data['evaluations']} moves scored, {data['wall_seconds']['total']:.2f} s")
  return "\n".join(lines)
