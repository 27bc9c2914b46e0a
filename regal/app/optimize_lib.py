"""The library behind `python -m regal.optimize`: a run (`run`: load, search, re-score) and
many (`run_many`). What a run returns, the result JSON (its schema) and the summary are
`regal.app.report`'s.
"""
from __future__ import annotations

import dataclasses
import os
import platform
import time
from typing import Any

import jax
import numba
import numpy as np

from regal_datasets import atomic, cli, coarsen, errors
from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal import baselines, search
from regal.app import methods, sharding, units
from regal.app import result as result_lib
from regal.app import report as report_lib
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import bounds, performance, resident
from regal.search import compile_clock
from regal.search import registries as search_registries




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
  where their members need not (what the climb gains is in `regal_experiments.scaling`'s report).
  The climb's answer becomes the method's. Without the native scorer (the JAX engines would score the
  original graph one compiled call at a time, too slowly) the step is skipped."""
  if not search.bucketed(problem):
    return candidates, {"skipped": "no native scorer for the original graph (the JAX engine)"}
  started = time.perf_counter()
  budget = search.refine_evals(problem)
  with cli.stoppable():
    climb = baselines.local_search.climb_from(
        problem, candidates, budget, seed, search.REFINE_BATCH,
        should_stop=lambda: cli.stop_requested() or time.perf_counter() >= deadline)
  return {**candidates, method: climb.chromosome}, {
      "budget": budget, "evaluations": climb.evaluations, "start": climb.start,
      "start_objective": climb.start_objective,
      "expanded_objective": climb.start_objectives[method], "objective": climb.objective,
      "accepted_moves": climb.accepted, "improving_moves": climb.improved,
      "seconds": time.perf_counter() - started}


def run(graph: Graph, devices: DeviceSpec, config: methods.RunConfig = methods.RunConfig(),
        source: str = "") -> report_lib.Report:
  """Optimizes `graph` on `devices` as `config` says (`methods.RunConfig`); `source`: the
  file it came from, for the result."""
  start = time.perf_counter()
  config.validate()
  method, seed, time_limit = config.method, config.seed, config.time_limit
  coarsen_spec = config.setup.coarsen
  model, objective, memory_limit = config.model, config.objective, config.memory_limit
  # Split (--shard, data parallelism) and cost (a preset's roofline) before anything else.
  planned = sharding.plan(graph, devices, config.setup.shard, method, model, objective,
                          memory_limit,
                          shards_by_batch=methods.get(method).shards_by_batch)
  graph, devices = planned.graph, planned.devices
  if devices.num_devices > graph.num_ops:
    raise errors.ConfigError(f"graph {graph.name!r}: {devices.num_devices} devices for "
                             f"{graph.num_ops} ops: at most {graph.num_ops} devices can be used")
  if (search_registries.PRIORS.get(config.brkga.prior).needs_link_groups
      and devices_lib.link_groups(devices).max() == 0):
    raise errors.ConfigError(f"--prior {config.brkga.prior} splits the ops among link groups, but "
                             f"these {devices.num_devices} devices form one (give a device "
                             f"spec with groups, e.g. --device_preset nvlink_two_groups)")
  problem = performance.Problem(graph, devices, model=config.model, objective=config.objective,
                                memory_limit=config.memory_limit, engine=config.setup.engine)
  coarsening = coarsen.coarsen_for_search(graph, coarsen_spec, devices.num_devices)
  coarsen_seconds = time.perf_counter() - start
  solved = problem if coarsening is None else dataclasses.replace(
      problem, graph=coarsen.coarse_graph(graph, coarsening))
  evals = search.default_evals(solved) if config.evals is None else config.evals
  # Every candidate is scored once by the reference model, here or inside the method.
  problem_scores = performance.ReferenceScores(problem)
  solved_scores = problem_scores if coarsening is None else performance.ReferenceScores(solved)
  # Every reported number comes from the readable reference model (the exact Doppler
  # simulator for --model doppler), so it can be checked independently. The one-device
  # baseline first: it sizes the units, which the search's live line shows too.
  seed_chromosome = search.single_device_seed(problem)
  single_value, single_schedule = problem_scores(seed_chromosome)
  memory_unit = units.memory_unit(max(float(np.nanmax(single_schedule.peak_memory, initial=0.0)),
                                      memory_limit or 0.0))
  if planned.details is not None:  # One device runs the model unsplit.
    unsplit = performance.Problem(planned.original, planned.original_devices, model=model,
                                  objective=objective, memory_limit=memory_limit)
    single_value, single_schedule = performance.ReferenceScores(unsplit)(
        search.single_device_seed(unsplit))
  # One unit for every time of the run (sized to the single-device makespan) and one for
  # every memory figure (sized to the largest on one device, or the limit).
  time_unit = units.time_unit(model, graph, float(single_schedule.makespan))
  if config.brkga.progress is not None:
    config = dataclasses.replace(config, brkga=dataclasses.replace(
        config.brkga, progress=dataclasses.replace(
            config.brkga.progress,
            shown=units.objective_text(objective, time_unit, memory_unit))))
  with compile_clock.CompileClock() as compiling:
    result = methods.get_schedule(method).run(solved, config, evals, solved_scores)
  solved_scores.remember(result.chromosome, result.objective, result.schedule)
  candidates = {method: result.chromosome, **result.alternatives}
  details, evaluations, method_settings = result.details, result.evaluations, result.settings
  # Compiling counts everything the method compiled: the search's programs, and the scoring
  # kernels its seeds or a heuristic compiled first.
  wall = {"compile": max(compiling.seconds, result.compile_seconds),
          "compile_jax": compiling.jax_seconds, "compile_numba": compiling.numba_seconds,
          "search": result.wall_seconds}
  scores = solved_scores
  if coarsening is not None:
    coarse_objective = min(solved_scores(c)[0] for c in candidates.values())
    candidates = _expand_candidates(solved, problem, coarsening, candidates)
    scores = problem_scores
    coarse_details = {"spec": coarsen_spec, "original_ops": graph.num_ops,
                      "coarse_ops": coarsening.num_groups,
                      "coarse_tensors": solved.graph.num_tensors,
                      "coarse_objective": float(coarse_objective), "seconds": coarsen_seconds}
    if methods.get(method).refines_coarsened:
      deadline = np.inf if time_limit is None else start + time_limit
      candidates, coarse_details["refinement"] = _refine(problem, candidates, method, seed,
                                                         deadline)
      evaluations += coarse_details["refinement"].get("evaluations", 0)
      wall["search"] += coarse_details["refinement"].get("seconds", 0.0)
    details = {**details, "coarsening": coarse_details}
  scored = {name: scores(c) for name, c in candidates.items()}
  best_name = min(scored, key=lambda name: scored[name][0])  # Ties: the method's own answer.
  simplest = simplest_among_equals(problem, candidates, scored, best_name)
  best_name, best_value, schedule = simplest["chosen"], *scored[simplest["chosen"]]
  if not np.isfinite(best_value):
    raise errors.ConfigError(f"graph {graph.name!r}: the objective overflowed float32 "
                             f"({best_value}); scale the costs or sizes down")
  chosen = candidates[best_name]
  # A solver's proven bound holds for the graph it solved: on a group graph, not this one.
  solver_bound = details.get("lower_bound") if coarsening is None else None
  lower_bound, bound_source = bounds.lower_bound(problem, float(best_value), solver_bound)
  seed_scores = {name: value for name, (value, _) in scored.items() if name != method}
  placement, order = chromosome_lib.assignment(chosen, problem.layout)
  feasibility = report_lib.feasibility(problem, schedule)
  total = time.perf_counter() - start
  result = result_lib.Result(
      graph={"name": graph.name, "num_ops": graph.num_ops, "num_tensors": graph.num_tensors,
             "source": source},
      devices=devices.to_json_dict(),
      settings={"method": method, "model": model, "search_model": problem.model,
                "engine": performance.scoring_engine(problem), "objective": objective,
                "memory_limit": memory_limit, "evals": evals, "seed": seed,
                **method_settings},
      details=details,
      sharding=None if planned.details is None else {
          **planned.details,
          "resident_parameter_bytes": resident.held_bytes(graph, placement,
                                                          devices.num_devices),
          "plan": sharding.plan_rows(graph, placement, schedule)},
      objective=best_value,
      lower_bound=lower_bound,
      bound_source=bound_source,
      # Over its memory limit the objective is a penalty score, not a runtime: no gap to it.
      gap=bounds.gap(float(best_value), lower_bound) if feasibility["feasible"] else None,
      proven_optimal=bool(feasibility["feasible"] and
                          bounds.proven_optimal(float(best_value), lower_bound)),
      feasible=feasibility["feasible"], memory_excess=feasibility.get("memory_excess"),
      interrupted=cli.stop_requested(),
      makespan=float(schedule.makespan),
      peak_memory=report_lib.none_for_nan(schedule.peak_memory),
      placement=[{"op": i, "name": graph.op_names[i], "device": int(placement[i])}
                 for i in range(graph.num_ops)],
      schedule=[graph.op_names[i] for i in order],
      ops=[{"op": i, "name": graph.op_names[i], "device": int(placement[i]),
            "start": float(schedule.op_start[i]), "end": float(schedule.op_end[i])}
           for i in range(graph.num_ops)],
      transfers=report_lib.transfer_rows(graph, placement, schedule),
      baselines={"single_device": {"objective": single_value,
                                   "makespan": float(single_schedule.makespan)},
                 **({"best_seed": {"name": min(seed_scores, key=seed_scores.get),
                                   "objective": min(seed_scores.values())}}
                    if seed_scores else {})},
      chosen=best_name,
      simplest_among_equals=simplest if simplest["chosen"] != simplest["best"] else None,
      search_objective=float(scored[method][0]) if method in scored else None,
      improvement_pct=100.0 * (single_value - best_value) / single_value
      if single_value else 0.0,
      why_no_gain=report_lib.why_no_gain(graph, devices, float(single_schedule.makespan))
      if objective == "runtime" and best_value > (1 - report_lib.NO_GAIN) * single_value
      else None,
      time_units=time_unit.to_json(),
      memory_units=memory_unit.to_json(),
      evaluations=evaluations,
      wall_seconds={**wall, "run": total, "total": total},
      versions={"python": platform.python_version(), "jax": jax.__version__,
                "numpy": np.__version__, "numba": numba.__version__,
                "regal": report_lib.regal_version()})
  result.display = report_lib.display_figures(result.to_json(), time_unit, memory_unit)
  assignments = {"best": (placement, order, float(schedule.makespan)),
                 "single_device": (*chromosome_lib.assignment(seed_chromosome, problem.layout),
                                   float(single_schedule.makespan))}
  for name, chromosome in candidates.items():
    if name != best_name:
      assignments[name] = (*chromosome_lib.assignment(chromosome, problem.layout),
                           float(scored[name][1].makespan))
  return report_lib.Report(result=result, schedule=schedule, placement=placement,
                           assignments=assignments, graph=graph)


# Answers whose objectives differ by less than this (relative) are equal: the one on the fewest
# devices is returned. A user expects a graph that gains nothing from more devices kept on one
# (BERT-base on 4 devices: 4.5e-6 better spread over all four, 218 of 1,176 ops moved).
SAME_OBJECTIVE = 1e-4


def simplest_among_equals(problem: performance.Problem, candidates: dict[str, np.ndarray],
                          scored: dict[str, tuple], best_name: str) -> dict:
  """Among the candidates whose objective is within `SAME_OBJECTIVE` of the best, the one
  that uses the fewest devices (then the lowest objective): {chosen, best, devices_used of
  each, objective of each}."""
  best_value = float(scored[best_name][0])
  margin = SAME_OBJECTIVE * abs(best_value)

  def used(name: str) -> int:
    placement, _ = chromosome_lib.assignment(candidates[name], problem.layout)
    return len(np.unique(placement))

  equal = [name for name in scored if float(scored[name][0]) <= best_value + margin]
  chosen = min(equal, key=lambda name: (used(name), float(scored[name][0]), name != best_name))
  return {"chosen": chosen, "best": best_name,
          "devices_used": {"chosen": used(chosen), "best": used(best_name)},
          "objective": {"chosen": float(scored[chosen][0]), "best": best_value},
          "tolerance": SAME_OBJECTIVE}


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


def run_many(paths: list[str], devices: DeviceSpec,
             config: methods.RunConfig = methods.RunConfig(), out_dir: str | None = None,
             chart_format: str | None = None, graph_format: str | None = None,
             log=print) -> int:
  """Optimizes each graph with `run(..., config)`: one line per graph, its result (and chart)
  under `out_dir`, then a closing summary. Every output path is checked before the first
  graph runs. A graph that fails gets its one-line error and the others still run; returns the
  number of failures. After SIGINT or SIGTERM stopped a search, that graph's best so far is
  written and no further graph starts. Searches compile once per size bucket
  (`regal.search`), so the first graph of each bucket pays for compiling."""
  import sys

  from regal_datasets import io as graph_io
  from regal.app import gantt
  outputs = output_paths(paths, out_dir, chart_format)
  for result_path, chart_path in outputs:
    for output in (result_path, chart_path):
      if output:
        atomic.check_output(output, "--out_dir", paths)
  if out_dir:
    os.makedirs(out_dir, exist_ok=True)
  started = time.perf_counter()
  failures, ratios, done, proven = 0, [], 0, 0
  for index, (path, (result_path, chart_path)) in enumerate(zip(paths, outputs)):
    if cli.stop_requested():
      log(f"interrupted: {len(paths) - index} of {len(paths)} graphs not started")
      break
    try:
      graph = graph_io.load_graph(path, graph_format)
      report = run(graph, devices, config, source=path)
      if result_path:
        report_lib.write_json(report, result_path)
      if chart_path:
        gantt.draw(graph, report.placement, report.schedule, chart_path,
                   time_unit=units.TimeUnit(report.result.settings["model"],
                                            **report.result.time_units))
    except errors.RegalError as error:
      failures += 1
      message = str(error) if str(error).startswith(path) else f"{path}: {error}"
      print(f"error: {message}", file=sys.stderr, flush=True)
      continue
    done += 1
    r = report.result
    proven += r.proven_optimal
    optimality = ("proven optimal" if r.proven_optimal else "gap unknown"
                  if r.gap is None else f"gap {100 * r.gap:.3g}%")
    time_unit = units.TimeUnit(r.settings["model"], **r.time_units)
    memory_unit = units.MemoryUnit(**r.memory_units)
    shown = (lambda v: f"{memory_unit([v])[0]:.6g} {memory_unit.name}") if (  # noqa: E731
        r.settings["objective"] == "memory") else (
        lambda v: f"{float(time_unit(v)):.6g} {time_unit.name}")
    seed = r.baselines.get("best_seed")
    against = ""
    if seed and r.search_objective is not None:
      ratios.append(r.search_objective / seed["objective"] if seed["objective"] else 1.0)
      against = (f"; search {shown(r.search_objective)}, "
                 f"{report_lib.versus(r.search_objective, seed['objective'])} the best seed "
                 f"({seed['name']} {shown(seed['objective'])})")
    log(f"[{index + 1}/{len(paths)}] {graph_io.file_stem(path)}: {r.graph['num_ops']} ops, "
        f"objective {shown(r.objective)} ({optimality}){against}; "
        f"{r.evaluations} evaluations, "
        f"{r.wall_seconds['total']:.2f} s" + (f" -> {result_path}" if result_path else ""))
  mean = (f"; the search itself is {report_lib.versus(float(np.mean(ratios)), 1.0)} the best seed on "
          f"average" if ratios else "")
  log(f"{done} of {len(paths)} graphs optimized ({proven} proven optimal), {failures} failed, "
      f"in {time.perf_counter() - started:.1f} s{mean}")
  return failures
