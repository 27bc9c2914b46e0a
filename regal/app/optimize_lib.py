"""The library behind `python -m regal.optimize`: load, search, re-score, report.

Result JSON schema (`format: "regal.result"`, version 1):
  graph           {name, num_ops, num_tensors, source}
  devices         the device description (datasets.devices JSON form)
  settings        method, model, search_model (what batched search scored), engine (how:
                  native or jax), objective, memory_limit, evals, seed, BRKGA parameters and
                  their preset name (for brkga), time_limit (for cpsat / quickp)
  details         method-specific facts (e.g. CP-SAT's status and lower bound; for brkga:
                  seed_arms {arm: best objective of its seeds}, arm_evaluations, winner_origin
                  (the arm the winner descends from through elite parents, null: none);
                  for doppler: imitation agreement, episodes, episodes_per_second, and with
                  --reward measured stage3 {episodes, critical_path_seconds, best_seconds,
                  executions}; with --policy: policy, steered_genes (genes whose
                  mutant distribution is not uniform), guide_seconds; with
                  --compare_unguided: unguided {objective, evaluations, search_seconds}, the
                  same search without the policy, run beside it), and with
                  --coarsen: coarsening {spec, original_ops, coarse_ops, coarse_tensors,
                  coarse_objective (the best on the group graph), seconds, and for brkga
                  refinement {budget, evaluations, start, start_objective, expanded_objective
                  (the search's own answer expanded), objective, accepted_moves,
                  improving_moves, seconds}: the climb on the original graph whose answer is
                  the method's; or {skipped: why}} (the method ran on the group graph;
                  everything else reported is for the original graph)
  objective       the best solution's objective value
  feasible        false when objective runtime_under_memory found no solution within the
                  limit (the objective is then the penalty score; `regal.optimize` exits 3),
                  with memory_excess [D] (bytes over the limit per device) for that objective
  interrupted     true when SIGINT or SIGTERM stopped the search early (exit 130 or 143)
  makespan        its makespan, and peak_memory [D] per device (null for the doppler model)
  placement       [{op, name, device}] in the input file's op order
  schedule        op names in priority order (first runs first when ready)
  ops             [{op, name, device, start, end}]; transfers [{tensor, producer, src, dst,
                  start, end}] for the models that time transfers
  baselines       {single_device: {objective, makespan}, best_seed: {...}}
  chosen          the candidate reported (the method's own answer, or a seed that was better)
  search_objective the method's own answer's objective (what the search found, seeds aside)
  improvement_pct over the single-device objective
  why_no_gain     (objective runtime, less than 1% better than one device) why, from the
                  graph's structure: its longest chain, or transfers that cost more than the
                  parallelism they buy; otherwise null
  time_units      {scale, name}: times above are the model's own; a person reads them times
                  scale, in name (the doppler model: Doppler units, its clock / 1e10)
  evaluations, wall_seconds {compile, search, total}, versions {python, jax, numpy, numba,
                  regal}
  execution       (with --execute) {program, devices, facts, assignments {name: {predicted,
                  median_seconds, p25_seconds, p75_seconds, repeats, seconds, mode,
                  ops_on_named_device}}} for best, single_device and the other candidates
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from typing import Any

import jax
import numba
import numpy as np

from datasets import analysis, atomic, errors
from datasets import io as graph_io
from datasets.devices import DeviceSpec
from datasets.graph import Graph
from regal import baselines, search
from regal.learning import policy_runner
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.schedule import Schedule
from regal.search import brkga_presets, coarsen, guides, seed_arms

RESULT_FORMAT = "regal.result"


@dataclasses.dataclass(frozen=True)
class Report:
  data: dict[str, Any]
  schedule: Schedule
  placement: np.ndarray
  # name -> (placement, op order, model makespan): the winner ("best"), "single_device" and
  # every other candidate the method produced (seeds), for `--execute`.
  assignments: dict[str, tuple[np.ndarray, np.ndarray, float]] = dataclasses.field(
      default_factory=dict)


METHODS = ("brkga", "doppler") + baselines.METHODS
# What each method reads besides the problem; `regal.optimize` refuses a flag whose method
# would ignore it.
METHOD_READS = {
    "evals": ("brkga", "doppler", "local_search", "hill_climb", "random"),
    "time_limit": ("brkga", "cpsat", "quickp"),
    "seed": ("brkga", "doppler", "local_search", "hill_climb", "random", "enumerative", "cpsat",
             "quickp"),
    "engine": ("brkga", "doppler", "local_search", "hill_climb", "random"),  # Batched scores.
}
NO_GAIN = 0.01  # Below this gain over one device, a result says why (`why_no_gain`).
MAX_EVALS = 10 ** 9  # Evaluation counters are int32 inside the compiled search.


def time_units(model: str) -> tuple[float, str]:
  """(scale, name) of the times a person reads: the doppler model's clock in Doppler's own
  units (divided by 1e10, as its repository and paper report makespans), the other models'
  in the graph's cost units."""
  if model == "doppler":
    from regal.scoring import doppler_sim
    return 1.0 / doppler_sim.DOPPLER_TIME_SCALE, "Doppler units"
  return 1.0, "cost units"


def _run_brkga(problem: performance.Problem, scores: performance.ReferenceScores, evals: int,
               seed: int, policy_dir: str | None = None,
               arms: tuple[str, ...] = seed_arms.DEFAULT_ARMS,
               doppler: seed_arms.DopplerArm | None = None,
               brkga_preset: str = brkga_presets.DEFAULT, decoder: str | None = None,
               time_limit: float | None = None, progress=None,
               compare_unguided: bool = False) -> baselines.MethodResult:
  """The one search (`search.guides.run_guided`) steered by its guides: the seed arms, and
  REGAL's policy with `policy_dir`. Every evaluation a guide spends is in the budget; the
  seeds come back as alternatives. `compare_unguided`: the same search without the policy
  runs beside it, reported in the details with its own evaluations (never the answer).
  `progress(line)` hears when the search starts (from then on an interrupt keeps the best)."""
  chain = [guides.SeedArms(arms, doppler)]
  if policy_dir:
    chain.append(policy_runner.RegalGuide(policy_dir))
  guides.check_budget(problem, evals, chain, brkga_preset)  # Before the arms run.
  started = time.perf_counter()
  guided = guides.guidance(problem, seed, chain)
  guide_seconds = time.perf_counter() - started
  details = dict(guided.details)
  if policy_dir:
    details["guide_seconds"] = guide_seconds
  if compare_unguided:
    unguided = guides.run_guided(problem, evals, seed, dataclasses.replace(
        guided, mutant_alpha=None, mutant_beta=None), brkga_preset, decoder, time_limit)
    details["unguided"] = {"objective": float(scores(unguided.best_chromosome)[0]),
                           "evaluations": unguided.evaluations,
                           "search_seconds": unguided.search_seconds}
  result = guides.run_guided(problem, evals, seed, guided, brkga_preset, decoder, time_limit,
                             progress)
  objective, schedule = scores(result.best_chromosome)
  params = guides.search_params(problem, evals, brkga_preset)
  search_settings = brkga_presets.search_settings(brkga_preset, decoder=decoder,
                                                  model=problem.model)
  settings = {"brkga": {"preset": brkga_preset or brkga_presets.DEFAULT,
                        "population_size": params.population_size,
                        "num_elites": params.num_elites, "num_mutants": params.num_mutants,
                        "num_populations": params.num_populations,
                        "rho": float(np.asarray(params.rho)),
                        "decoder": search_settings.decoder, "bias": search_settings.bias,
                        "memetic": dataclasses.asdict(search_settings.memetic),
                        "time_limit": time_limit,
                        "stopped_early": result.stopped_early}}
  if guided.mutant_alpha is None:
    settings["brkga"].update(mutant_alpha=float(np.asarray(params.mutant_alpha)),
                             mutant_beta=float(np.asarray(params.mutant_beta)))
  arm_scores = {}
  for name, chromosome in guided.seeds.items():
    arm = seed_arms.arm_of(name)
    arm_scores[arm] = min(arm_scores.get(arm, np.inf), float(scores(chromosome)[0]))
  details.update({"seed_arms": arm_scores, "arm_evaluations": guided.evaluations,
                  "winner_origin": None if result.origin is None else
                  seed_arms.arm_of(result.origin)})
  placement, order = chromosome_lib.assignment(result.best_chromosome, problem.layout,
                                               problem.pinned)
  return baselines.MethodResult(
      method="brkga", placement=placement, order=order, objective=objective, schedule=schedule,
      wall_seconds=result.search_seconds, compile_seconds=result.compile_seconds,
      evaluations=result.evaluations, details=details, chromosome=result.best_chromosome,
      settings=settings, alternatives=dict(guided.seeds))


def _run_doppler(problem: performance.Problem, evals: int, seed: int,
                 doppler: seed_arms.DopplerArm | None, save: str | None, measured=None,
                 stage3_steps: int = 0) -> baselines.MethodResult:
  from regal.doppler_policy import method as doppler_method
  doppler = doppler or seed_arms.DopplerArm()
  return doppler_method.doppler(problem, evals, seed, checkpoint=doppler.checkpoint, save=save,
                                measured=measured, stage3_steps=stage3_steps)


def _run_baseline(problem: performance.Problem, method: str, evals: int, seed: int,
                  time_limit: float) -> baselines.MethodResult:
  try:
    result = baselines.run_method(method, problem, evals=evals, seed=seed, time_limit=time_limit)
  except ValueError as error:
    raise errors.ConfigError(str(error)) from None
  if method in baselines.MAKESPAN_ONLY:
    result = dataclasses.replace(result, settings={"time_limit": time_limit})
  return result


def _expand_candidates(coarse_problem: performance.Problem, problem: performance.Problem,
                       coarsening: coarsen.Coarsening,
                       candidates: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Coarse chromosomes as chromosomes of the original graph (groups expanded in order)."""
  expanded = {}
  for name, chromosome in candidates.items():
    coarse_placement, coarse_order = chromosome_lib.assignment(chromosome, coarse_problem.layout)
    placement, op_order = coarsen.expand(coarsening, coarse_placement, coarse_order)
    expanded[name] = chromosome_lib.encode(placement, op_order, problem.layout)
  return expanded


def _refine(problem: performance.Problem, candidates: dict[str, np.ndarray], method: str,
            seed: int, deadline: float) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """The last step of a coarsened search (multilevel refinement, as partitioners uncoarsen):
  a climb on the original graph (`baselines.local_search.climb_from`: single-op device moves
  and adjacent priority swaps on the exact native scorer, `search.REFINE_BATCH` a step) from
  the best expanded candidate, for `search.refine_evals` evaluations or until `deadline`
  (perf_counter) or a signal. Groups run whole on the group graph, so its best answers idle
  where their members need not: on a 10,000-op Barabasi-Albert graph every expanded answer
  was 5-7% above the load bound that the original graph's heuristics reach. The climb's
  answer becomes the method's. Without the native scorer (the JAX engines would score the
  original graph one compiled call at a time, too slowly) the step is skipped."""
  if not search.bucketed(problem):
    return candidates, {"skipped": "no native scorer for the original graph (the JAX engine, "
                                   "pinned ops or noisy scores)"}
  from regal.baselines import local_search
  started = time.perf_counter()
  budget = search.refine_evals(problem)
  starts = {name: chromosome_lib.assignment(chromosome, problem.layout)
            for name, chromosome in candidates.items()}
  with errors.stoppable():
    climb = local_search.climb_from(
        problem, starts, budget, seed, search.REFINE_BATCH,
        should_stop=lambda: errors.stop_requested() or time.perf_counter() >= deadline)
  refined = chromosome_lib.encode(climb.placement, np.argsort(climb.rank), problem.layout)
  return {**candidates, method: refined}, {
      "budget": budget, "evaluations": climb.evaluations, "start": climb.start,
      "start_objective": climb.start_objective,
      "expanded_objective": climb.start_objectives[method], "objective": climb.objective,
      "accepted_moves": climb.accepted, "improving_moves": climb.improved,
      "seconds": time.perf_counter() - started}


def run(graph: Graph, devices: DeviceSpec, model: str = "wc", objective: str = "runtime",
        memory_limit: float | None = None, evals: int | None = None, seed: int = 0,
        source: str = "", method: str = "brkga", time_limit: float | None = None,
        coarsen_spec: str = "off", policy_dir: str | None = None,
        arms: tuple[str, ...] = seed_arms.DEFAULT_ARMS,
        doppler: seed_arms.DopplerArm | None = None, doppler_save: str | None = None,
        measured=None, stage3_steps: int = 0,
        brkga_preset: str = "default", engine: str = "auto",
        decoder: str | None = None, progress=None, compare_unguided: bool = False) -> Report:
  """`evals`: the budget (default: `search.default_evals` of the searched graph);
  `time_limit`: seconds that end BRKGA at a generation boundary (default: none, so a run is
  deterministic), or the cpsat and quickp solvers' limit (default 10 s); `decoder`: BRKGA's
  decoder instead of the preset's. `measured`: a reward source of measured run times for
  Doppler's stage III (`stage3_steps` batches of episodes), with --method doppler only.
  `progress(line)`: told when a BRKGA search starts."""
  start = time.perf_counter()
  if method not in METHODS:
    raise errors.ConfigError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
  if devices.num_devices > graph.num_ops:
    raise errors.ConfigError(f"graph {graph.name!r}: {devices.num_devices} devices for "
                             f"{graph.num_ops} ops: at most {graph.num_ops} devices can be used")
  if evals is not None and not 1 <= evals <= MAX_EVALS:
    raise errors.ConfigError(f"evals must be between 1 and {MAX_EVALS:,}, got {evals}")
  if not 0 <= seed <= errors.MAX_SEED:
    raise errors.ConfigError(f"seed must be between 0 and {errors.MAX_SEED}, got {seed}")
  if measured is not None and (method != "doppler" or coarsen_spec != "off"):
    raise errors.ConfigError("measured rewards serve Doppler's stage III: use them with "
                             "--method doppler and without --coarsen")
  problem = performance.Problem(graph, devices, model=model, objective=objective,
                                memory_limit=memory_limit, engine=engine)
  coarsening = coarsen.coarsen_for_search(graph, coarsen_spec, devices.num_devices)
  coarsen_seconds = time.perf_counter() - start
  solved = problem if coarsening is None else dataclasses.replace(
      problem, graph=coarsen.coarse_graph(graph, coarsening))
  if brkga_preset not in ("", brkga_presets.DEFAULT) and method != "brkga":
    raise errors.ConfigError("--brkga_preset sets BRKGA's parameters: use it with --method brkga")
  if policy_dir and method != "brkga":
    raise errors.ConfigError("--policy runs REGAL, i.e. BRKGA: use it with --method brkga")
  if decoder is not None and method != "brkga":
    raise errors.ConfigError("--decoder sets how BRKGA reads chromosomes: use it with "
                             "--method brkga")
  if evals is None:
    evals = search.default_evals(solved)
  # Every candidate is scored once by the reference model, here or inside the method.
  solved_scores = performance.ReferenceScores(solved)
  if method == "brkga":
    result = _run_brkga(solved, solved_scores, evals, seed, policy_dir, arms, doppler,
                        brkga_preset, decoder, time_limit, progress, compare_unguided)
  elif method == "doppler":
    result = _run_doppler(solved, evals, seed, doppler, doppler_save, measured, stage3_steps)
  else:
    result = _run_baseline(solved, method, evals, seed,
                           10.0 if time_limit is None else time_limit)
  solved_scores.remember(result.chromosome, result.objective, result.schedule)
  candidates = {method: result.chromosome, **result.alternatives}
  details, evaluations, method_settings = result.details, result.evaluations, result.settings
  wall = {"compile": result.compile_seconds, "search": result.wall_seconds}
  scores = solved_scores
  if coarsening is not None:
    coarse_objective = min(solved_scores(c)[0] for c in candidates.values())
    candidates = _expand_candidates(solved, problem, coarsening, candidates)
    scores = performance.ReferenceScores(problem)
    coarse_details = {"spec": coarsen_spec, "original_ops": graph.num_ops,
                      "coarse_ops": coarsening.num_groups,
                      "coarse_tensors": solved.graph.num_tensors,
                      "coarse_objective": float(coarse_objective), "seconds": coarsen_seconds}
    if method == "brkga":
      deadline = np.inf if time_limit is None else start + time_limit
      candidates, coarse_details["refinement"] = _refine(problem, candidates, method, seed,
                                                         deadline)
      evaluations += coarse_details["refinement"].get("evaluations", 0)
      wall["search"] += coarse_details["refinement"].get("seconds", 0.0)
    details = {**details, "coarsening": coarse_details}
  # Every reported number comes from the readable reference model (the exact Doppler
  # simulator for --model doppler), so it can be checked independently.
  seed_chromosome = search.single_device_seed(problem)
  single_value, single_schedule = scores(seed_chromosome)
  scored = {name: scores(c) for name, c in candidates.items()}
  best_name = min(scored, key=lambda name: scored[name][0])  # Ties: the method's own answer.
  best_value, schedule = scored[best_name]
  if not np.isfinite(best_value):
    raise errors.ConfigError(f"graph {graph.name!r}: the objective overflowed float32 "
                             f"({best_value}); scale the costs or sizes down")
  chosen = candidates[best_name]
  seed_scores = {name: value for name, (value, _) in scored.items() if name != method}
  placement, order = chromosome_lib.assignment(chosen, problem.layout, problem.pinned)
  total = time.perf_counter() - start
  data = {
      "format": RESULT_FORMAT, "version": 1,
      "graph": {"name": graph.name, "num_ops": graph.num_ops,
                "num_tensors": graph.num_tensors, "source": source},
      "devices": devices.to_json_dict(),
      "settings": {"method": method, "model": model,
                   "search_model": problem.model,
                   "engine": performance.scoring_engine(problem),
                   "objective": objective, "memory_limit": memory_limit, "evals": evals,
                   "seed": seed, **method_settings},
      "details": details,
      "objective": best_value,
      **_feasibility(problem, schedule),
      "interrupted": errors.stop_requested(),
      "makespan": float(schedule.makespan),
      "peak_memory": _nan_to_none(schedule.peak_memory),
      "placement": [{"op": i, "name": graph.op_names[i], "device": int(placement[i])}
                    for i in range(graph.num_ops)],
      "schedule": [graph.op_names[i] for i in order],
      "ops": [{"op": i, "name": graph.op_names[i], "device": int(placement[i]),
               "start": float(schedule.op_start[i]), "end": float(schedule.op_end[i])}
              for i in range(graph.num_ops)],
      "transfers": _transfers(graph, placement, schedule),
      "baselines": {"single_device": {"objective": single_value,
                                      "makespan": float(single_schedule.makespan)},
                    **({"best_seed": {"name": min(seed_scores, key=seed_scores.get),
                                      "objective": min(seed_scores.values())}}
                       if seed_scores else {})},
      "chosen": best_name,
      "search_objective": float(scored[method][0]) if method in scored else None,
      "improvement_pct": 100.0 * (single_value - best_value) / single_value
                         if single_value else 0.0,
      "why_no_gain": why_no_gain(graph, devices, float(single_schedule.makespan))
                     if objective == "runtime" and best_value > (1 - NO_GAIN) * single_value
                     else None,
      "time_units": dict(zip(("scale", "name"), time_units(model))),
      "evaluations": evaluations,
      "wall_seconds": {**wall, "total": total},
      "versions": {"python": platform.python_version(), "jax": jax.__version__,
                   "numpy": np.__version__, "numba": numba.__version__,
                   "regal": _regal_version()},
  }
  assignments = {"best": (placement, order, float(schedule.makespan)),
                 "single_device": (*chromosome_lib.assignment(seed_chromosome, problem.layout,
                                                              problem.pinned),
                                   float(single_schedule.makespan))}
  for name, chromosome in candidates.items():
    if name != best_name:
      assignments[name] = (*chromosome_lib.assignment(chromosome, problem.layout, problem.pinned),
                           float(scored[name][1].makespan))
  return Report(data=data, schedule=schedule, placement=placement, assignments=assignments)


def _feasibility(problem: performance.Problem, schedule: Schedule) -> dict[str, Any]:
  """With a memory limit: whether the best fits, and by how much each device is over."""
  if problem.objective != "runtime_under_memory":
    return {"feasible": True}
  excess = np.maximum(np.asarray(schedule.peak_memory, float) - problem.memory_limits, 0.0)
  return {"feasible": bool((excess == 0).all()), "memory_excess": excess.tolist()}


def _nan_to_none(values: np.ndarray) -> list[float | None]:
  return [None if np.isnan(v) else float(v) for v in np.asarray(values, float)]


def _transfers(graph: Graph, placement: np.ndarray, schedule: Schedule) -> list[dict]:
  sent = np.argwhere(~np.isnan(schedule.transfer_start))
  return [{"tensor": int(t), "producer": graph.op_names[graph.tensor_producer[t]],
           "src": int(placement[graph.tensor_producer[t]]), "dst": int(d),
           "start": float(schedule.transfer_start[t, d]),
           "end": float(schedule.transfer_end[t, d])} for t, d in sent]


def _regal_version() -> str:
  try:
    from importlib.metadata import version
    return version("regal")
  except Exception:  # pylint: disable=broad-except  # Not installed: running from a checkout.
    return "checkout"


def write_json(report: Report, path: str) -> None:
  """Strict JSON: a value that is not finite is a bug upstream (inputs past float32 are
  refused when the problem is made), never an `Infinity` for a reader to choke on."""
  atomic.write_text(path, json.dumps(report.data, indent=1, allow_nan=False) + "\n")


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


def summary(report: Report) -> str:
  d = report.data
  scale, unit = d["time_units"]["scale"], d["time_units"]["name"]
  is_time = d["settings"]["objective"] != "memory"
  objective = (lambda v: f"{v * scale:.6g}") if is_time else (lambda v: f"{v:.6g}")  # noqa: E731
  time = lambda v: f"{v * scale:.6g}"  # noqa: E731
  if all(p is None for p in d["peak_memory"]):
    peak = f"peak memory not tracked by the {d['settings']['model']} model"
  else:
    peak = "peak memory [" + ", ".join("-" if p is None else f"{p:.6g}"
                                       for p in d["peak_memory"]) + "] bytes"
  single = d["baselines"]["single_device"]
  wall = d["wall_seconds"]
  lines = [
      f"graph {d['graph']['name']}: {d['graph']['num_ops']} ops on "
      f"{d['devices']['num_devices']} devices, method {d['settings']['method']}, model "
      f"{d['settings']['model']}, objective {d['settings']['objective']}; times in {unit}",
      f"best:          objective {objective(d['objective'])}  makespan {time(d['makespan'])}  "
      f"{peak}" + ("" if d["chosen"] == d["settings"]["method"]
                   else f"  (the {d['chosen']} seed as it was)"),
      f"single device: objective {objective(single['objective'])}  makespan "
      f"{time(single['makespan'])}",
  ]
  if "best_seed" in d["baselines"]:
    seed = d["baselines"]["best_seed"]
    lines.append(f"best seed:     objective {objective(seed['objective'])}  (the {seed['name']} "
                 f"seed on its own)")
    if d.get("search_objective") is not None:
      lines.append(f"search found:  objective {objective(d['search_objective'])}  "
                   f"({versus(d['search_objective'], seed['objective'])} the best seed)")
  if "policy" in d["details"]:
    lines.append(f"policy:        {d['details']['policy']} steered "
                 f"{d['details']['steered_genes']} genes ({d['details']['guide_seconds']:.2f} s)")
  if "unguided" in d["details"]:
    unguided = d["details"]["unguided"]
    lines.append(f"unguided:      objective {objective(unguided['objective'])} with "
                 f"{unguided['evaluations']} evaluations (the same search without the policy: "
                 f"{versus(d['objective'], unguided['objective'])})")
  if "seed_arms" in d["details"]:
    arms = ", ".join(f"{arm} {objective(value)}"
                     for arm, value in d["details"]["seed_arms"].items())
    where = " (on the group graph)" if "coarsening" in d["details"] else ""
    origin = d["details"]["winner_origin"]
    lineage = (f"the search's answer evolved from the {origin} seed (its line of elite parents)"
               if origin else "the search's answer descends from no seed")
    lines.append(f"seed arms:     {arms}{where}; {lineage}")
  if "coarsening" in d["details"]:
    c = d["details"]["coarsening"]
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
  if "lower_bound" in d["details"]:
    lines.append(f"lower bound:   {objective(d['details']['lower_bound'])} "
                 f"({d['details']['status']})")
  if not d["feasible"]:
    excess = ", ".join(f"{e:.6g}" for e in d["memory_excess"])
    lines.append(f"INFEASIBLE:    no solution found fits the memory limit (excess per device "
                 f"[{excess}] bytes); the objective is the penalty score")
  if d["interrupted"]:
    lines.append("interrupted:   the search stopped early; this is the best found so far")
  lines.append(f"improvement {d['improvement_pct']:.2f}% over single device; "
               f"{d['evaluations']} evaluations; compile {wall['compile']:.2f} s, search "
               f"{wall['search']:.2f} s, total {wall['total']:.2f} s")
  if d.get("why_no_gain"):
    lines.append(f"no gain:       {d['why_no_gain']}")
  return "\n".join(lines)


# ----- many graphs per call ----------------------------------------------------------------
def graph_paths(spec: str) -> list[str]:
  """The graph files of `--graph`: a comma-separated list of files, or a directory (its files
  of a known graph extension, sorted; other files such as an optima table are skipped)."""
  paths = []
  for item in (part.strip() for part in spec.split(",")):
    if not item:
      continue
    if os.path.isdir(item):
      paths.extend(graph_io.graph_files(item))
    else:
      paths.append(item)
  if not paths:
    raise errors.ConfigError("--graph names no file")
  return paths


def output_paths(paths: list[str], out_dir: str | None, chart_format: str | None
                 ) -> list[tuple[str | None, str | None]]:
  """(result JSON, chart) per graph: `DIR/<file stem>.json` and `DIR/<stem>.<format>`;
  refuses two graphs with one stem and any output that would overwrite an input."""
  stems = [graph_io.file_stem(p) for p in paths]
  seen: dict[str, str] = {}
  for path, stem in zip(paths, stems):
    if stem in seen:
      raise errors.ConfigError(f"{seen[stem]} and {path} would both write {stem}.json: give "
                               f"graphs distinct file names")
    seen[stem] = path
  if out_dir is None:
    if chart_format:
      raise errors.ConfigError("charts of many graphs go beside their results: give --out_dir")
    return [(None, None)] * len(paths)
  if os.path.exists(out_dir) and not os.path.isdir(out_dir):
    raise errors.ConfigError(f"--out_dir {out_dir}: exists and is not a directory")
  outputs = [(os.path.join(out_dir, f"{stem}.json"),
              os.path.join(out_dir, f"{stem}.{chart_format}") if chart_format else None)
             for stem in stems]
  inputs = {os.path.realpath(p) for p in paths}
  for pair in outputs:
    for output in pair:
      if output and os.path.realpath(output) in inputs:
        raise errors.ConfigError(f"{output} would overwrite an input graph")
  return outputs


def run_many(paths: list[str], devices: DeviceSpec, out_dir: str | None = None,
             chart_format: str | None = None, graph_format: str | None = None,
             log=print, **run_args) -> int:
  """Optimizes each graph with `run(**run_args)`: one line per graph, its result (and chart)
  under `out_dir`, then a closing summary. Every output path is checked before the first
  graph runs. A graph that fails gets its one-line error and the others still run; returns the
  number of failures. After SIGINT or SIGTERM stopped a search, that graph's best so far is
  written and no further graph starts. Searches compile once per size bucket
  (`regal.search`), so the first graph of each bucket pays for compiling."""
  import sys

  from datasets import io as graph_io
  from regal.app import gantt
  outputs = output_paths(paths, out_dir, chart_format)
  for result_path, chart_path in outputs:
    for output in (result_path, chart_path):
      if output:
        atomic.check_output(output, "--out_dir", paths)
  if out_dir:
    os.makedirs(out_dir, exist_ok=True)
  started = time.perf_counter()
  failures, ratios, done = 0, [], 0
  for index, (path, (result_path, chart_path)) in enumerate(zip(paths, outputs)):
    if errors.stop_requested():
      log(f"interrupted: {len(paths) - index} of {len(paths)} graphs not started")
      break
    try:
      graph = graph_io.load_graph(path, graph_format)
      report = run(graph, devices, source=path, **run_args)
      if result_path:
        write_json(report, result_path)
      if chart_path:
        scale, unit = time_units(report.data["settings"]["model"])
        gantt.draw(graph, report.placement, report.schedule, chart_path, time_scale=scale,
                   time_unit=unit)
    except errors.RegalError as error:
      failures += 1
      message = str(error) if str(error).startswith(path) else f"{path}: {error}"
      print(f"error: {message}", file=sys.stderr, flush=True)
      continue
    done += 1
    d = report.data
    scale = d["time_units"]["scale"] if d["settings"]["objective"] != "memory" else 1.0
    seed = d["baselines"].get("best_seed")
    against = ""
    if seed and d["search_objective"] is not None:
      ratios.append(d["search_objective"] / seed["objective"] if seed["objective"] else 1.0)
      against = (f"; search {d['search_objective'] * scale:.6g}, "
                 f"{versus(d['search_objective'], seed['objective'])} the best seed "
                 f"({seed['name']} {seed['objective'] * scale:.6g})")
    log(f"[{index + 1}/{len(paths)}] {graph_io.file_stem(path)}: {d['graph']['num_ops']} ops, "
        f"objective {d['objective'] * scale:.6g}{against}; {d['evaluations']} evaluations, "
        f"{d['wall_seconds']['total']:.2f} s" + (f" -> {result_path}" if result_path else ""))
  mean = (f"; the search itself is {versus(float(np.mean(ratios)), 1.0)} the best seed on "
          f"average" if ratios else "")
  log(f"{done} of {len(paths)} graphs optimized, {failures} failed, in "
      f"{time.perf_counter() - started:.1f} s{mean}")
  return failures
