"""What a `regal.optimize` run reports: the result JSON, its summary and the helpers that
build them.


The result JSON's schema: `regal.app.result.Result`, one typed field per key with what it
holds (`Result.schema_markdown`; documented in `docs/reference.md`).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from regal_datasets import analysis, atomic
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.app import units
from regal.app.result import Result
from regal.scoring import performance
from regal.scoring.schedule import Schedule
from regal.search import progress as search_progress


@dataclasses.dataclass(frozen=True)
class Report:
  result: Result  # What the result file holds, typed.
  schedule: Schedule
  placement: np.ndarray
  # name -> (placement, op order, model makespan): the winner ("best"), "single_device" and
  # every other candidate the method produced (seeds), for `--execute`.
  assignments: dict[str, tuple[np.ndarray, np.ndarray, float]] = dataclasses.field(
      default_factory=dict)
  graph: Any = None  # The graph placed: the input, or its split (`--shard`), costed.

  @property
  def data(self) -> dict[str, Any]:
    """The result file's object (`Result.to_json`)."""
    return self.result.to_json()


NO_GAIN = 0.01  # Below this gain over one device, a result says why (`why_no_gain`).

def display_figures(d: dict[str, Any], time: units.TimeUnit,
                    memory: units.MemoryUnit) -> dict[str, Any]:
  """Every figure the summary prints, in the units it prints them (`time_units`,
  `memory_units`): the result's `display`, beside the raw values."""
  shown_time = lambda v: None if v is None else float(time(v))  # noqa: E731
  objective = ((lambda v: None if v is None else memory([v])[0])
               if d["settings"]["objective"] == "memory" else shown_time)
  baselines = d["baselines"]
  shown = {
      "objective": objective(d["objective"]), "makespan": shown_time(d["makespan"]),
      "lower_bound": objective(d["lower_bound"]),
      "peak_memory": memory(d["peak_memory"]),
      "single_device": {"objective": objective(baselines["single_device"]["objective"]),
                        "makespan": shown_time(baselines["single_device"]["makespan"])},
      "search_objective": objective(d["search_objective"]),
  }
  if "best_seed" in baselines:
    shown["best_seed"] = {"objective": objective(baselines["best_seed"]["objective"])}
  if "seed_arms" in d["details"]:
    shown["seed_arms"] = {arm: objective(v) for arm, v in d["details"]["seed_arms"].items()}
  if d["settings"].get("memory_limit") is not None:
    shown["memory_limit"] = memory([d["settings"]["memory_limit"]])[0]
  if "memory_excess" in d:
    shown["memory_excess"] = memory(d["memory_excess"])
  return shown


def feasibility(problem: performance.Problem, schedule: Schedule) -> dict[str, Any]:
  """Whether the best fits its memory limit (the objective runtime_under_memory's constraint),
  and by how much each device is over: always under that objective; under the others when a
  device is (the plan would not run there)."""
  peaks = np.asarray(schedule.peak_memory, float)
  excess = np.maximum(np.nan_to_num(peaks, nan=0.0) - problem.memory_limits, 0.0)
  if problem.objective == "runtime_under_memory":
    return {"feasible": bool((excess == 0).all()), "memory_excess": excess.tolist()}
  return {"feasible": True, **({"memory_excess": excess.tolist()} if excess.any() else {})}


def none_for_nan(values: np.ndarray) -> list[float | None]:
  return [None if np.isnan(v) else float(v) for v in np.asarray(values, float)]


def transfer_rows(graph: Graph, placement: np.ndarray, schedule: Schedule) -> list[dict]:
  sent = np.argwhere(~np.isnan(schedule.transfer_start))
  return [{"tensor": int(t), "producer": graph.op_names[graph.tensor_producer[t]],
           "src": int(placement[graph.tensor_producer[t]]), "dst": int(d),
           "start": float(schedule.transfer_start[t, d]),
           "end": float(schedule.transfer_end[t, d])} for t, d in sent]


def regal_version() -> str:
  try:
    from importlib.metadata import version
    return version("regal")
  except Exception:  # pylint: disable=broad-except  # Not installed: running from a checkout.
    return "checkout"


def write_json(report: Report, path: str) -> None:
  """Strict JSON: a value that is not finite is a bug upstream (inputs past float32 are
  refused when the problem is made), never an `Infinity` for a reader to choke on."""
  atomic.write_text(path, json.dumps(report.result.to_json(), indent=1, allow_nan=False)
                    + "\n")


def versus(value: float, reference: float) -> str:
  """'2.10% below', '0.50% above' or 'equal to' a reference (smaller is better)."""
  if value == reference or not reference:
    return "equal to"
  change = 100.0 * (value / reference - 1.0)
  return f"{abs(change):.2f}% {'below' if change < 0 else 'above'}"


def why_no_gain(graph: Graph, devices: DeviceSpec, single_makespan: float) -> str:
  """Why the best placement found barely beats one device, from the graph's structure."""
  total = float(graph.compute_cost.sum())
  if total <= 0 or single_makespan <= 0:
    return "the graph has no compute to spread"
  chain = (f"its longest dependency chain holds {analysis.longest_compute_path(graph) / total:.0%}"
           f" of the compute")
  room = max(1.0 - analysis.makespan_lower_bound(graph, devices) / single_makespan, 0.0)
  if room < 0.01:
    return f"{chain}, so no placement can finish more than {100 * room:.1f}% sooner than one device"
  return (f"transfers cost more than they save on this device set: with free transfers the "
          f"bound leaves room for up to {100 * room:.1f}% ({chain})")


def _chosen_note(r: Result) -> str:
  """Where the reported answer came from when it is not the method's own."""
  if r.chosen == r.settings["method"]:
    return ""
  if r.chosen == "cpsat" and "solver" in r.details:
    return "  (the exact solver's answer: CP-SAT ran beside the search)"
  return f"  (the {r.chosen} seed as it was)"


def stop_line(stopped: dict[str, Any]) -> str:
  """Why the search ended, in words: 'its time limit was reached (27,400 of 96,000
  evaluations, the 10 s that a run without --evals searches at most)'."""
  reason = stopped["reason"]
  words = search_progress.STOP_REASONS.get(reason, reason)
  facts = [f"{stopped['evaluations']:,} of {stopped['budget']:,} evaluations"]
  if reason == "time_limit":
    facts.append(f"the {stopped['time_limit']:g} s that a run without --evals searches at most"
                 if stopped.get("default_time_limit") else
                 f"--time_limit {stopped['time_limit']:g} s")
  return f"{words} ({', '.join(facts)})"


def sharding_line(sharding: dict[str, Any], objective) -> str:
  """How the graph was split, what was measured to choose it, and the parameters resident per
  device."""
  chosen = sharding["chosen"]
  split = ("left whole" if chosen["shards"] == 1 else
           f"split {chosen['shards']} ways ({chosen['strategy']}: {sharding['ops']} ops, "
           f"{sharding['resident_reads']} resident parameter reads)")
  def name(row: dict[str, Any]) -> str:
    return ("unsplit on one device" if row["strategy"] == "none" else
            f"{row['shards']}x {row['strategy']}")
  measured = "; ".join(f"{name(row)} {objective(row['objective'])}"
                       for row in sharding["candidates"])
  gigabytes = ", ".join(f"{b / 1e9:.3g}" for b in sharding.get("resident_parameter_bytes", []))
  return (f"sharded:       {sharding['source_ops']} ops {split}; measured with blocks by shard "
          f"index: {measured}; parameters resident per device [{gigabytes}] GB")


def summary(report: Report) -> str:
  r = report.result
  time_unit = units.TimeUnit(r.settings["model"], **r.time_units)
  memory_unit = units.MemoryUnit(**r.memory_units)
  unit = time_unit.name
  is_time = r.settings["objective"] != "memory"
  time = lambda v: f"{float(time_unit(v)):.6g}"  # noqa: E731
  objective = time if is_time else (  # noqa: E731
      lambda v: f"{memory_unit([v])[0]:.6g} {memory_unit.name}")
  if all(p is None for p in r.peak_memory):
    peak = f"peak memory not tracked by the {r.settings['model']} model"
  else:
    peak = "peak memory [" + ", ".join("-" if p is None else f"{p:.4g}"
                                       for p in memory_unit(r.peak_memory)) + "] " + \
        memory_unit.name
    held = (r.sharding or {}).get("resident_parameter_bytes")
    if held and any(held):  # What each device holds through the step, inside its peak.
      peak += " (parameters held [" + ", ".join(f"{h:.4g}" for h in memory_unit(held)) + "])"
  single = r.baselines["single_device"]
  wall = r.wall_seconds
  lines = [
      f"graph {r.graph['name']}: {r.graph['num_ops']} ops on "
      f"{r.devices['num_devices']} devices, method {r.settings['method']}, model "
      f"{r.settings['model']}, objective {r.settings['objective']}; times in {unit}"
      + (f" ({time_unit.note})" if time_unit.note else ""),
      f"best:          objective {objective(r.objective)}  makespan {time(r.makespan)}  "
      f"{peak}" + _chosen_note(r),
      f"single device: objective {objective(single['objective'])}  makespan "
      f"{time(single['makespan'])}" + (" (the model unsplit)" if r.sharding else ""),
  ]
  if r.sharding:
    lines.insert(1, sharding_line(r.sharding, objective))
  if "best_seed" in r.baselines:
    seed = r.baselines["best_seed"]
    source = ("the exact solver's answer" if seed["name"] == "cpsat" and "solver" in r.details
              else f"the {seed['name']} seed")
    lines.append(f"best seed:     objective {objective(seed['objective'])}  ({source} on its own)")
    if r.search_objective is not None:
      lines.append(f"search found:  objective {objective(r.search_objective)}  "
                   f"({versus(r.search_objective, seed['objective'])} the best seed)")
  if "policy" in r.details:
    lines.append(f"policy:        {r.details['policy']} steered "
                 f"{r.details['steered_genes']} genes ({r.details['guide_seconds']:.2f} s)")
  if "unguided" in r.details:
    unguided = r.details["unguided"]
    lines.append(f"unguided:      objective {objective(unguided['objective'])} with "
                 f"{unguided['evaluations']} evaluations (the same search without the policy: "
                 f"{versus(r.objective, unguided['objective'])})")
  if "seed_arms" in r.details:
    arms = ", ".join(f"{arm} {objective(value)}"
                     for arm, value in r.details["seed_arms"].items())
    where = " (on the group graph)" if "coarsening" in r.details else ""
    origin = r.details["winner_origin"]
    lineage = (f"the search's answer evolved from the {origin} seed (its line of elite parents)"
               if origin else "the search's answer descends from no seed")
    lines.append(f"seed arms:     {arms}{where}; {lineage}")
  if "coarsening" in r.details:
    c = r.details["coarsening"]
    lines.append(f"coarsened:     {c['original_ops']} ops to {c['coarse_ops']} groups "
                 f"({c['coarse_tensors']} messages) in {c['seconds']:.2f} s; objective on the "
                 f"group graph {objective(c['coarse_objective'])}")
    refinement = c.get("refinement", {})
    if "skipped" in refinement:
      lines.append(f"not refined:   {refinement['skipped']}")
    if "objective" in refinement:
      lines.append(f"refined:       on the original graph from {refinement['start']} "
                   f"{objective(refinement['start_objective'])} to "
                   f"{objective(refinement['objective'])} in {refinement['evaluations']} "
                   f"evaluations ({refinement['seconds']:.2f} s); the search's own expanded "
                   f"answer {objective(refinement['expanded_objective'])}")
  lines.append(f"lower bound:   {objective(r.lower_bound)} (from the "
               f"{'solver' if r.bound_source == 'solver' else 'graph structure'}"
               + (f", {r.details['status']}" if r.bound_source == "solver" else "") + "); "
               + ("the best is PROVEN OPTIMAL" if r.proven_optimal else
                  f"the best is at most {100 * r.gap:.3g}% above optimal"
                  if r.gap is not None else "a zero bound says nothing relative"))
  if not r.feasible:
    excess = ", ".join(f"{e:.4g}" for e in memory_unit(r.memory_excess))
    lines.append(f"INFEASIBLE:    no solution found fits the memory limit (excess per device "
                 f"[{excess}] {memory_unit.name}); the objective is the penalty score")
  if r.feasible and r.memory_excess:
    excess = ", ".join(f"{e:.4g}" for e in memory_unit(r.memory_excess))
    lines.append(f"OVER MEMORY:   the plan does not fit its devices' memory (excess per device "
                 f"[{excess}] {memory_unit.name}); --objective runtime_under_memory keeps "
                 f"within it")
  if r.interrupted:
    lines.append("interrupted:   the search stopped early; this is the best found so far")
  stopped = r.details.get("stopped")
  if stopped:
    lines.append("stopped:       " + stop_line(stopped))
  step = ""
  if is_time and time_unit.name in dict(units.SECONDS):  # Costs are times: say it plainly.
    step = (f" (step time {time(r.objective)} {unit} against {time(single['objective'])} "
            f"{unit})")
  lines.append(f"improvement {r.improvement_pct:.2f}% over single device{step}; "
               f"{r.evaluations} evaluations; compile {wall['compile']:.2f} s, search "
               f"{wall['search']:.2f} s, total {wall['total']:.2f} s")
  if r.why_no_gain:
    lines.append(f"no gain:       {r.why_no_gain}")
  if r.simplest_among_equals:
    s = r.simplest_among_equals
    count = s["devices_used"]["chosen"]
    lines.append(f"simplest:      kept on {count} device{'s' * (count != 1)} ({s['chosen']}): "
                 f"the best found ({s['best']}, {objective(s['objective']['best'])} on "
                 f"{s['devices_used']['best']} devices) is within {100 * s['tolerance']:g}% "
                 f"of it")
  return "\n".join(lines)


# ----- many graphs per call ----------------------------------------------------------------
