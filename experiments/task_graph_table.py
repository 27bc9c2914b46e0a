r"""Task-scheduling benchmarks with proven optima: every method's gap to the optimum.

  python -m regal_experiments.task_graph_table                  # Sinnen's 1,118 graphs and STG's 720
  python -m regal_experiments.task_graph_table --quick          # a stratified sample, a few minutes
  python -m regal_experiments.task_graph_table --sets sinnen --methods heft,hill_climb
  python -m regal_experiments.task_graph_table --sets constructed_test --methods heft,cpsat,brkga \
      --time_limit 10

Instances: `../shared/graphs/sinnen` (DOT task graphs of 10-30 tasks on 2-8 identical
processors, `optimal.csv`: optima proven by an exact A* search) and `../shared/graphs/stg`
(Kasahara's 50-task graphs on 2, 4, 8 and 16 processors, no communication; a row with bounds
instead of an optimum is compared with its upper bound, and checked against its lower one).
The constructed sets (`constructed_train`, `constructed_test`: `regal_datasets.constructed`, 50-500
tasks on 2-16 processors, ratios 0.5, 1 and 2, 60 each, other generator seeds, each instance's
edge recipe drawn from the widened family: `constructed.widened`, since issue 81) have an optimum
known by construction: a schedule that keeps every processor busy to T = total work / p, which
the work bound proves; tune on the train set only. `brkga_long` (on request) is the default
search with 1,000,000 evaluations, `brkga_full_time` (on request) the default search with no
budget but its 10 s time limit (issue 69: does the time the default budget leaves unused pay?),
`brkga_unpolished` (on request) the default run without its polish
(`regal.search.schedule_polish`), `brkga_insertions` with the polish's insertion moves only
(no exact window re-solves), `brkga_60s` the default run with `--time_limit 60`,
`brkga_half_budget` the default run with half its search budget (the polish gets the time),
`brkga_pairs` the default run whose polish alternates exact window and two-device re-solves,
`brkga_pairs_timed` that polish with an exact move at least every second, `brkga_compact` the
default polish keeping windows that lower (makespan, sum of ends), `brkga_long_windows` the
default polish with 3 s windows (issue 81).
The model is the delay model (`--model delay`): identical processors, a task starts once its
processor is free and its inputs arrived, communication is paid across processors only.

Methods: ours (critical path, HEFT, `hill_climb` from the best heuristic seed, CP-SAT with a
time limit — run to proven optimality on the 10-task graphs, whose optimum it must reproduce —
and BRKGA as `regal.optimize` runs it by default, the search's own answer reported beside the
best seed it started from) and the peers of anrg-saga 2.0.2 (`pip install -e ".[peers]"`; its
list schedulers that finish on these graphs). Every schedule, ours and the peers', is checked by
`check_schedule`, which re-reads the task graph from the file with its own small parser and
knows nothing of our models: each task runs once for exactly its cost, one task at a time per
processor, after every predecessor's end plus the edge's cost across processors. A makespan
below the proven optimum fails the run.

Per method: mean and max gap to the optimum (%), the share of instances solved optimally, and
seconds per instance, overall and by communication-to-computation ratio and processor count.
Results are appended per (instance, method) to a JSONL file beside the report, so a killed run
resumes where it stopped.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import contextlib  # noqa: E402
import logging as std_logging  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any, Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import benchmarks  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import atomic, cli, errors  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_datasets.benchmarks import sinnen_instances, stg_instances, stratified  # noqa: E402,F401
from regal_experiments import command, report  # noqa: E402
from regal.learning.stats import bootstrap_interval  # noqa: E402
from regal import search  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.baselines import exact  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.search import brkga_search  # noqa: E402

SHARED = benchmarks.SHARED_GRAPHS
OURS = ("critical_path", "heft", "hill_climb", "cpsat", "brkga", "brkga_long", "brkga_full_time",
        "brkga_unpolished", "brkga_insertions", "brkga_60s", "brkga_half_budget", "brkga_pairs",
        "brkga_pairs_timed", "brkga_compact", "brkga_long_windows")
DEFAULT_OURS = OURS[:5]  # The other BRKGA variants only on request.
LONG_EVALS = 1_000_000
BRKGA_METHODS = ("brkga", "brkga_long", "brkga_full_time", "brkga_unpolished",
                 "brkga_insertions", "brkga_60s", "brkga_half_budget", "brkga_pairs",
                 "brkga_pairs_timed", "brkga_compact", "brkga_long_windows")
# The polish each BRKGA method runs with (`RunConfig.polish`; the others: the default's).
POLISH = {"brkga_unpolished": "off", "brkga_insertions": "insertions", "brkga_pairs": "pairs",
          "brkga_pairs_timed": "pairs_timed", "brkga_compact": "compact",
          "brkga_long_windows": "long_windows"}
SETS = ("sinnen", "stg") + tuple(benchmarks.CONSTRUCTED_SPLITS)
# anrg-saga's schedulers; not run by default: BruteForce and SMT (exhaustive), Hybrid (needs
# arguments), DPS (over 20 s per instance on 50-task STG graphs: `--methods ...,saga:DPS`).
PEERS = ("Heft", "Cpop", "ETF", "FCP", "MCT", "MinMin", "MaxMin", "Sufferage", "Hbmct", "Msbc",
         "Duplex", "FLB", "MST", "BIL", "GDL", "WBA", "MET", "OLB", "FastestNode", "DPS")
DEFAULT_PEERS = tuple(p for p in PEERS if p != "DPS")

_QUICK = flags.DEFINE_bool("quick", False, "A stratified sample of 40 Sinnen and 16 STG "
                           "instances.")
_SETS = flags.DEFINE_list("sets", ["sinnen", "stg"], f"Benchmark sets, of {', '.join(SETS)} "
                         f"(constructed_*: `regal_datasets.constructed`'s family, written to "
                         f"--constructed_dir).")
_CONSTRUCTED_DIR = flags.DEFINE_string(
    "constructed_dir", os.path.join(tempfile.gettempdir(), "regal-constructed"),
    "Where the constructed sets' DOT files are written (deterministic; regenerated each run).")
_METHODS = flags.DEFINE_list("methods", list(DEFAULT_OURS) + [f"saga:{p}" for p in DEFAULT_PEERS],
                             "Methods: ours, and saga:NAME for anrg-saga's schedulers.")
_EVALS = flags.DEFINE_integer("evals", None, "Budget of hill_climb and BRKGA (default: BRKGA's "
                              "default budget for each graph, `regal.search.default_evals`).",
                              lower_bound=64, upper_bound=1_000_000_000)
_TIME_LIMIT = flags.DEFINE_float("time_limit", 2.0, "CP-SAT's seconds per instance (the "
                                 "10-task graphs run to proven optimality, up to 120 s).",
                                 lower_bound=0.001, upper_bound=86400.0)
_SAMPLE = flags.DEFINE_integer("sample", 0, "Instances per set (stratified; 0: all).",
                               lower_bound=0, upper_bound=100_000)
_SEED = flags.DEFINE_integer("seed", 0, "Random seed of the searches.",
                             lower_bound=0, upper_bound=errors.MAX_SEED)
_PEER_SECONDS = flags.DEFINE_float("peer_seconds", 20.0, "A peer taking longer on one instance "
                                   "is stopped and left out of the table.",
                                   lower_bound=0.001, upper_bound=86400.0)
_SHARED = flags.DEFINE_string("shared", SHARED, "The shared graphs folder.")
_OUT_DIR = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "task_graph_table"),
                               "Where the report and its resumable rows go.")


# ----- instances -------------------------------------------------------------------------
# ----- the independent checker ------------------------------------------------------------
_DOT_NODE = re.compile(r'^\s*"?([^"\s\[]+)"?\s*\[\s*Weight\s*=\s*([0-9.eE+-]+)', re.M)
_DOT_EDGE = re.compile(r'^\s*"?([^"\s\[]+)"?\s*->\s*"?([^"\s\[]+)"?\s*\[\s*Weight\s*=\s*'
                       r'([0-9.eE+-]+)', re.M)


def read_task_graph(path: str) -> tuple[dict[str, float], list[tuple[str, str, float]]]:
  """(task costs, edges with communication costs) read straight from a Sinnen DOT or STG file,
  without the project's importers."""
  text = open(path).read()
  if path.endswith(".dot"):
    edges = [(u, v, float(c)) for u, v, c in _DOT_EDGE.findall(text)]
    tasks = {name: float(cost) for name, cost in _DOT_NODE.findall(text)}
    return tasks, edges
  lines = [line.split() for line in text.splitlines() if line.strip() and line[0] != "#"]
  tasks, edges = {}, []
  for fields in lines[1:]:
    tasks[fields[0]] = float(fields[1])
    edges += [(p, fields[0], 0.0) for p in fields[3:3 + int(fields[2])]]
  return tasks, edges


def check_schedule(tasks: dict[str, float], edges: list[tuple[str, str, float]],
                   schedule: dict[str, tuple[Any, float, float]], tolerance: float = 1e-6
                   ) -> float:
  """The makespan of a schedule {task: (processor, start, end)}; raises AssertionError when it
  breaks the delay model (see the module doc)."""
  missing, extra = set(tasks) - set(schedule), set(schedule) - set(tasks)
  assert not missing and not extra, (f"tasks not scheduled: {sorted(missing)[:3]}, unknown "
                                     f"tasks: {sorted(extra)[:3]}")
  for task, (_, start, end) in schedule.items():
    assert start >= -tolerance, f"task {task} starts before 0"
    assert abs((end - start) - tasks[task]) <= tolerance * max(1.0, tasks[task]), (
        f"task {task} runs {end - start}, its cost is {tasks[task]}")
  by_processor: dict[Any, list[tuple[float, float, str]]] = {}
  for task, (processor, start, end) in schedule.items():
    if end > start:
      by_processor.setdefault(processor, []).append((start, end, task))
  for processor, intervals in by_processor.items():
    intervals.sort()
    for (_, end_a, a), (start_b, _, b) in zip(intervals, intervals[1:]):
      assert start_b >= end_a - tolerance, f"{a} and {b} overlap on processor {processor}"
  for u, v, cost in edges:
    delay = 0.0 if schedule[u][0] == schedule[v][0] else cost
    assert schedule[v][1] >= schedule[u][2] + delay - tolerance, (
        f"{v} starts before {u}'s data arrives")
  return max((end for _, _, end in schedule.values()), default=0.0)


# ----- methods ------------------------------------------------------------------------------
def ours(method: str, graph, processors: int, tasks_per_graph: int) -> tuple[dict, dict]:
  """(schedule {task: (processor, start, end)}, facts) of one of our methods."""
  devices = devices_lib.homogeneous(processors)
  problem = performance.Problem(graph, devices, model="delay")
  facts: dict[str, Any] = {}
  if method in BRKGA_METHODS:
    evals = {"brkga_long": LONG_EVALS, "brkga_full_time": methods.MAX_EVALS}.get(
        method, _EVALS.value)
    time_limit = {"brkga_full_time": brkga_search.DEFAULT_SEARCH_SECONDS,
                  "brkga_60s": 60.0, "brkga_half_budget": brkga_search.DEFAULT_SEARCH_SECONDS
                  }.get(method)
    if method == "brkga_half_budget":
      evals = max(1000, search.default_evals(problem) // 2)
    result = optimize_lib.run(graph, devices, methods.RunConfig(
        model="delay", evals=evals, seed=_SEED.value, time_limit=time_limit,
        brkga=methods.BrkgaOptions(polish=POLISH.get(method, "auto"))))
    placement, schedule = result.placement, result.schedule
    facts = {"search_objective": result.result.search_objective,
             "best_seed": result.result.baselines.get("best_seed", {}).get("objective"),
             "evals": result.result.settings["evals"],
             "lower_bound": result.result.lower_bound,
             "bound_source": result.result.bound_source,
             "proven_optimal": result.result.proven_optimal}
    if "polish" in result.result.details:
      facts["polish"] = result.result.details["polish"]
  else:
    if method == "cpsat":
      limit = 120.0 if tasks_per_graph == 10 else _TIME_LIMIT.value
      result = exact.cpsat(problem, time_limit=limit, seed=_SEED.value)
      facts = {"status": result.details["status"], "lower_bound": result.details["lower_bound"]}
    else:
      evals = _EVALS.value or search.default_evals(problem)
      result = methods.run_method(method, problem, evals=evals, seed=_SEED.value)
      if method == "hill_climb":
        facts = {"search_objective": result.details["searched_objective"],
                 "best_seed": result.details["seed_objective"],
                 "start_seed": result.details["start_seed"], "evals": evals}
    placement, schedule = result.placement, result.schedule
  timed = {graph.op_names[i]: (int(placement[i]), float(schedule.op_start[i]),
                               float(schedule.op_end[i])) for i in range(graph.num_ops)}
  return timed, facts


def saga_schedule(name: str, graph, processors: int) -> tuple[dict, dict]:
  import saga.schedulers as saga_schedulers
  from saga import Network, TaskGraph
  std_logging.getLogger().setLevel(std_logging.ERROR)  # saga warns on every added source.
  task_graph = TaskGraph.create(
      [(op, float(cost)) for op, cost in zip(graph.op_names, graph.compute_cost.tolist())],
      [(graph.op_names[graph.tensor_producer[t]], graph.op_names[c], float(graph.tensor_size[t]))
       for t, c in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist())]
      + [(graph.op_names[a], graph.op_names[b], 0.0)
         for a, b in zip(graph.control_edge_src.tolist(), graph.control_edge_dst.tolist())])
  network = Network.create([(f"p{k}", 1.0) for k in range(processors)],
                           [(f"p{a}", f"p{b}", 1.0) for a in range(processors)
                            for b in range(a + 1, processors)])
  result = getattr(saga_schedulers, f"{name}Scheduler")().schedule(network, task_graph)
  timed = {task.name: (processor, float(task.start), float(task.end))
           for processor, scheduled in result.items() for task in scheduled
           if not task.name.startswith("__super_")}
  return timed, {}


class _PeerTimeout(Exception):
  pass


@contextlib.contextmanager
def _time_limit(seconds: float):
  """Stops the block (a peer's pure-Python scheduler) after `seconds` with _PeerTimeout."""
  def expire(signum, frame):
    raise _PeerTimeout(f"took more than {seconds:g} s")
  previous = signal.signal(signal.SIGALRM, expire)
  signal.setitimer(signal.ITIMER_REAL, seconds)
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


# ----- the run ------------------------------------------------------------------------------
def rows_path() -> str:
  mode = "quick" if _QUICK.value else (f"sample{_SAMPLE.value}" if _SAMPLE.value else "full")
  return os.path.join(_OUT_DIR.value, f"task_graph_table-{mode}.jsonl")


def load_rows(path: str) -> dict[tuple, dict]:
  return {(row["set"], row["file"], row["processors"], row["method"]): row
          for row in atomic.read_json_lines(path)}


def run_one(instance: dict, method: str, graph, reference) -> dict:
  started = time.perf_counter()
  key = {"set": instance["set"], "file": instance["file"],
         "processors": instance["processors"], "method": method}
  if method.startswith("saga:"):
    try:
      with _time_limit(_PEER_SECONDS.value):
        schedule, facts = saga_schedule(method[5:], graph, instance["processors"])
    except Exception as error:  # pylint: disable=broad-except  # A peer's crash: left out.
      return {**key, "invalid": f"crashed: {type(error).__name__}: {error}"[:200],
              "seconds": time.perf_counter() - started}
  else:
    schedule, facts = ours(method, graph, instance["processors"], instance["tasks"])
  seconds = time.perf_counter() - started
  try:
    makespan = check_schedule(*reference, schedule)
  except AssertionError as error:
    if not method.startswith("saga:"):
      raise
    return {**key, "invalid": str(error), "seconds": seconds}  # The peer is left out.
  bound = facts.get("lower_bound") if method in BRKGA_METHODS else None
  if bound is not None and instance["proven"] and bound > instance["optimum"] + 1e-6:
    raise AssertionError(f"{method} on {instance['file']} ({instance['processors']} "
                         f"processors): its lower bound {bound} exceeds the proven optimum "
                         f"{instance['optimum']}")
  if makespan < instance["lower"] - 1e-6:
    raise AssertionError(f"{method} on {instance['file']} ({instance['processors']} "
                         f"processors): makespan {makespan} below the proven "
                         f"{'optimum' if instance['proven'] else 'lower bound'} "
                         f"{instance['lower']}: a bug in a model or an importer")
  if not instance["proven"]:
    facts = {**facts, "published_lower": instance["lower"]}
  return {**key, "makespan": makespan,
          "optimum": instance["optimum"], "proven": instance["proven"],
          "tasks": instance["tasks"], "ccr": instance["ccr"], "seconds": seconds,
          "gap_pct": 100.0 * (makespan / instance["optimum"] - 1.0) if instance["optimum"] else 0.0,
          **facts}


def budgets(rows: list[dict]) -> str:
  """The evaluation budgets the rows' searches ran with, per set and method (rows of runs
  before budgets were recorded ran with 5,000)."""
  parts = []
  for (set_name, method) in sorted({(r["set"], r["method"]) for r in rows
                                    if r["method"] in BRKGA_METHODS + ("hill_climb",)}):
    spent = [r.get("evals", 5000) for r in rows if (r["set"], r["method"]) == (set_name, method)
             and "makespan" in r]
    if spent:
      parts.append(f"{set_name} {method} {min(spent):,}-{max(spent):,} (mean "
                   f"{np.mean(spent):,.0f})" if min(spent) != max(spent)
                   else f"{set_name} {method} {spent[0]:,}")
  return "; ".join(parts) or "none"


def summarize(rows: list[dict], methods: Sequence[str]) -> dict[str, Any]:
  def stats(selected: list[dict]) -> dict[str, float]:
    gaps = np.array([r["gap_pct"] for r in selected])
    out = {"instances": len(selected), "mean_gap_pct": float(gaps.mean()),
           "max_gap_pct": float(gaps.max()),
           "optimal_share": float(np.mean(gaps <= 1e-9)),
           "seconds_per_instance": float(np.mean([r["seconds"] for r in selected]))}
    if all("proven_optimal" in r for r in selected):
      out["proven_share"] = float(np.mean([r["proven_optimal"] for r in selected]))
    return out

  out: dict[str, Any] = {}
  invalid = {r["method"]: f"{r['file']} ({r['processors']} processors): {r['invalid']}"
             for r in rows if "invalid" in r}
  methods = [m for m in methods if m not in invalid]
  rows = [r for r in rows if r["method"] in methods]
  out["left_out"] = invalid
  for set_name in sorted({r["set"] for r in rows}):
    in_set = [r for r in rows if r["set"] == set_name]
    by: dict[str, Any] = {"overall": {}, "ccr": {}, "processors": {}, "tasks": {}}
    for method in methods:
      mine = [r for r in in_set if r["method"] == method]
      if not mine:
        continue
      by["overall"][method] = stats(mine)
      for field in ("ccr", "processors", "tasks"):
        for value in sorted({r[field] for r in mine}):
          by[field].setdefault(str(value), {})[method] = stats(
              [r for r in mine if r[field] == value])
      open_instances = [r for r in mine if not r["proven"]]
      if open_instances and all("proven_optimal" in r for r in open_instances):
        by["overall"][method]["open_instances"] = len(open_instances)
        by["overall"][method]["open_proven"] = [
            {"file": r["file"], "processors": r["processors"], "makespan": r["makespan"],
             "published_lower": r.get("published_lower"), "published_upper": r["optimum"]}
            for r in open_instances if r["proven_optimal"]]
      searched = [r for r in mine if r.get("best_seed")]
      if searched:
        by["overall"][method]["search_vs_best_seed_pct"] = float(np.mean(
            [100.0 * (1 - r["search_objective"] / r["best_seed"]) for r in searched]))
    comparisons = {method: paired(in_set, method) for method in methods
                   if method in BRKGA_METHODS and method != "brkga"}
    by["paired"] = {m: p for m, p in comparisons.items() if p is not None}
    out[set_name] = by
  return out


def paired(rows: list[dict], method: str, baseline: str = "brkga") -> dict[str, Any] | None:
  """`method` against `baseline` on the instances both solved: the mean difference of their
  gaps (points; negative: `method` is better) with a 95% bootstrap interval over instances,
  and on how many it was better and worse (None: no common instance)."""
  gaps = {}
  for r in rows:
    if r["method"] in (method, baseline) and "gap_pct" in r:
      gaps.setdefault((r["file"], r["processors"]), {})[r["method"]] = r["gap_pct"]
  both = [g for g in gaps.values() if len(g) == 2]
  if not both:
    return None
  difference = np.array([g[method] - g[baseline] for g in both])
  low, high = bootstrap_interval(difference[:, None], np.random.default_rng(0))
  return {"baseline": baseline, "instances": len(both),
          "mean_difference_points": float(difference.mean()), "ci95_points": [low, high],
          "better": int((difference < -1e-9).sum()), "worse": int((difference > 1e-9).sum())}


def _bound_text(bound: float | None) -> str:
  return "?" if bound is None else f"{bound:g}"  # Rows written before the field: unknown.


def markdown(summary: dict[str, Any], methods: Sequence[str]) -> list[str]:
  lines = []
  for set_name, by in summary.items():
    if set_name == "left_out":
      continue
    count = max(s["instances"] for s in by["overall"].values())
    lines += [f"## {set_name} ({count} instances)", "",
              "| method | mean gap % | max gap % | optimal | proven optimal by its own bound | "
              "s / instance | search vs best seed |",
              "|---|---|---|---|---|---|---|"]
    ranked = sorted(by["overall"], key=lambda m: by["overall"][m]["mean_gap_pct"])
    for method in ranked:
      s = by["overall"][method]
      seed = (f"{s['search_vs_best_seed_pct']:+.2f}% below" if "search_vs_best_seed_pct" in s
              else "")
      proven = f"{100 * s['proven_share']:.1f}%" if "proven_share" in s else ""
      lines.append(f"| {method} | {s['mean_gap_pct']:.3f} | {s['max_gap_pct']:.1f} | "
                   f"{100 * s['optimal_share']:.1f}% | {proven} | "
                   f"{s['seconds_per_instance']:.3f} | {seed} |")
    for method, p in by.get("paired", {}).items():
      lines += ["", f"Paired over {p['instances']} instances, {method} - {p['baseline']}: "
                    f"{p['mean_difference_points']:+.2f} points of gap [95% bootstrap: "
                    f"{p['ci95_points'][0]:+.2f}, {p['ci95_points'][1]:+.2f}], better on "
                    f"{p['better']} and worse on {p['worse']}."]
    for method in ranked:
      s = by["overall"][method]
      if "open_proven" in s:
        lines += ["", f"Instances without a published proof that {method} proved optimal (its "
                      f"makespan meets its own lower bound): {len(s['open_proven'])} of "
                      f"{s['open_instances']}" + (":" if s["open_proven"] else ".")]
        lines += [f"- {p['file']} on {p['processors']} processors: {p['makespan']:g} "
                  f"(published bounds {_bound_text(p['published_lower'])}-"
                  f"{p['published_upper']:g})" for p in s["open_proven"]]
    for field, label in (("ccr", "CCR"), ("processors", "processors"), ("tasks", "tasks")):
      values = sorted(by[field], key=float)
      if len(values) < 2:
        continue
      lines += ["", f"Mean gap % (optimal share) by {label}:", "",
                "| method | " + " | ".join(values) + " |",
                "|---|" + "---|" * len(values)]
      for method in ranked:
        cells = [f"{by[field][v][method]['mean_gap_pct']:.2f} "
                 f"({100 * by[field][v][method]['optimal_share']:.0f}%)"
                 if method in by[field][v] else "" for v in values]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines.append("")
  return lines


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("sample",))
  if (_EVALS.value is not None and
      _EVALS.value < 64) or _TIME_LIMIT.value <= 0 or _SAMPLE.value < 0:
    raise errors.ConfigError("--evals must be at least 64, --time_limit positive, --sample "
                             ">= 0")
  unknown = [m for m in _METHODS.value if m not in OURS and not (
      m.startswith("saga:") and m[5:] in PEERS)]
  if unknown:
    raise errors.ConfigError(f"unknown method(s) {', '.join(unknown)}; known: "
                             f"{', '.join(OURS)}, saga:{{{','.join(PEERS)}}}")
  methods = list(_METHODS.value)
  if any(m.startswith("saga:") for m in methods):
    try:
      import saga  # noqa: F401
    except ImportError:
      print("anrg-saga is not installed (pip install -e \".[peers]\"): its schedulers are "
            "left out")
      methods = [m for m in methods if not m.startswith("saga:")]
  if {"sinnen", "stg"} & set(_SETS.value) and not os.path.isdir(_SHARED.value):
    raise errors.ConfigError(f"{_SHARED.value}: the shared graphs folder is missing")
  instances = []
  unknown_sets = [s for s in _SETS.value if s not in SETS]
  if unknown_sets:
    raise errors.ConfigError(f"unknown set {unknown_sets[0]!r}; known: {', '.join(SETS)}")
  if _CONSTRUCTED_DIR.present and not set(_SETS.value) & set(benchmarks.CONSTRUCTED_SPLITS):
    raise errors.ConfigError(f"--constructed_dir would do nothing here: only the constructed "
                             f"sets ({', '.join(benchmarks.CONSTRUCTED_SPLITS)}) are written "
                             f"there")
  for set_name in _SETS.value:
    if set_name in benchmarks.CONSTRUCTED_SPLITS:
      found = benchmarks.constructed_instances(_CONSTRUCTED_DIR.value, set_name)
    else:
      found = (sinnen_instances if set_name == "sinnen" else stg_instances)(_SHARED.value)
    sample = ({"sinnen": 40, "stg": 16}.get(set_name, 12) if _QUICK.value
              else _SAMPLE.value)
    instances += stratified(found, sample)
  path = rows_path()
  done = load_rows(path)
  started, total = time.perf_counter(), len(instances)
  for index, instance in enumerate(instances):
    todo = [m for m in methods if (instance["set"], instance["file"], instance["processors"],
                                   m) not in done]
    if not todo:
      continue
    graph = graph_io.load_graph(instance["path"])
    reference = read_task_graph(instance["path"])
    for method in todo:
      row = run_one(instance, method, graph, reference)
      cli.exit_if_stopped()
      atomic.append_json_line(path, row)
      done[(row["set"], row["file"], row["processors"], method)] = row
    if (index + 1) % 20 == 0 or index + 1 == total:
      print(f"[{index + 1}/{total}] {time.perf_counter() - started:.0f} s", flush=True)
  wanted = {(i["set"], i["file"], i["processors"]) for i in instances}
  rows = [r for key, r in done.items() if key[:3] in wanted and r["method"] in methods]
  summary = summarize(rows, methods)
  unproven = sum(not i["proven"] for i in instances)
  lines, facts = report.header("Task graphs with proven optima (delay model)",
                               "regal_experiments.task_graph_table",
                               "quick" if _QUICK.value else
                               (f"sample of {_SAMPLE.value} per set" if _SAMPLE.value else "full"))
  body = [f"Gap = makespan / optimum - 1. STG rows without a proof ({unproven} instances) "
          f"compare with the best known upper bound: there a negative gap is a new best, and "
          f"\"optimal\" means at or below that bound. Every schedule passed the independent "
          f"checker and none is below a proven optimum or lower bound. "
          f"Budgets of hill_climb and BRKGA: {budgets(rows)}; CP-SAT: {_TIME_LIMIT.value} s "
          f"(10-task graphs: to proven optimality); seed {_SEED.value}. \"search vs best seed\": "
          f"how far below the best heuristic seed the search's own answer is, on average.", ""]
  body += markdown(summary, methods)
  if summary["left_out"]:
    body += ["Left out: peers that crashed or whose schedules broke the delay model (the last "
             "failure each):",
             ""] + [f"- {m}: {why}" for m, why in sorted(summary["left_out"].items())] + [""]
  cpsat10 = [r for r in rows if r["method"] == "cpsat" and r["tasks"] == 10]
  if cpsat10:
    exact_hits = sum(r["status"] == "OPTIMAL" and r["makespan"] == r["optimum"] for r in cpsat10)
    body.append(f"CP-SAT to proven optimality on the 10-task graphs: {exact_hits} of "
                f"{len(cpsat10)} reproduce the A* optimum exactly.")
  report.publish(_OUT_DIR.value, "task_graph_table", lines, body,
                 {**facts, "summary": summary, "rows_file": os.path.basename(path)})


if __name__ == "__main__":
  cli.run_cli(main)
