r"""The exact Doppler scorer against the SimPy model: equal on every assignment, and how fast.

  python -m regal_experiments.bench.doppler_scorer                  # the report in experiments/results
  python -m regal_experiments.bench.doppler_scorer --quick          # a few hundred assignments

For each of the four shared Doppler graphs (4 devices) and a 367-op REGAL synthetic graph, it
draws assignments (random ones, the heuristics' — critical path both ways, HEFT, GP + DFS, one
device — and each heuristic with a few ops moved, where near-equal schedules tie), scores every
one with `regal.scoring.doppler.reference` (SimPy) and `regal.scoring.doppler.native`, and counts
those whose makespan or op times differ (must be 0). Speed is measured in the same run: the
native scorer on a large population split over every core, the median of `--repeats` timed
calls, SimPy over every checked assignment (evaluations per second = assignments / total
seconds); the ratio is native / SimPy evaluations per second. A plain Python event loop of the
same simulator (`plain_event_loop`: heapq, no compiler) is checked and timed beside SimPy, and
the whole exact Doppler search (BRKGA, 8 devices, on the 367-op graph) is timed against it. Run
it on a quiet machine.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import collections  # noqa: E402
import heapq  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import benchmarks  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import cli, errors  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.baselines import list_scheduling, partition  # noqa: E402
from regal import search  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.scoring.doppler import reference as doppler_sim  # noqa: E402
from regal.scoring.doppler import native as native_doppler  # noqa: E402

_QUICK = flags.DEFINE_bool("quick", False, "Few assignments (a smoke run).")
_CHECKED = flags.DEFINE_integer("checked", 2000, "Assignments per graph checked against SimPy.",
                                lower_bound=10, upper_bound=10_000_000)
_TIMED = flags.DEFINE_integer("timed", 20000, "Population the native scorer is timed on.",
                              lower_bound=1, upper_bound=10_000_000)
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed calls per scorer (median kept).",
                                lower_bound=1, upper_bound=1000)
_SEARCH_EVALS = flags.DEFINE_integer("search_evals", 200000, "Budget of the timed exact "
                                     "Doppler search (367 ops, 8 devices).",
                                     lower_bound=1, upper_bound=1_000_000_000)
_OUT_DIR = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "doppler_scorer"),
                               "Where the report goes.")

SHARED = benchmarks.DOPPLER_GRAPHS
DOPPLER_FILES = ("chain_mm_112nodes.txt", "ffnn_192nodes.txt", "transformer_block_215nodes.txt",
                 "full_transformer_layer_261nodes.txt")


def assignments(graph, devices, count: int, rng: np.random.Generator) -> np.ndarray:
  """Heuristic placements, each with a few ops moved, then random ones: `count` in all."""
  problem = performance.Problem(graph, devices, model="doppler")
  heuristic = [list_scheduling.critical_path_assignment(graph, devices)[0],
               list_scheduling.critical_path_assignment(graph, devices, True)[0],
               list_scheduling.heft_assignment(graph, devices)[0],
               partition.gp_dfs(problem).placement, np.zeros(graph.num_ops, np.int64)]
  rows = list(heuristic)
  for k in range(count // 2):
    moved = heuristic[k % len(heuristic)].copy()
    ops = rng.choice(graph.num_ops, min(3, graph.num_ops), replace=False)
    moved[ops] = rng.integers(0, devices.num_devices, len(ops))
    rows.append(moved)
  rows += list(rng.integers(0, devices.num_devices, (max(count - len(rows), 0), graph.num_ops)))
  return np.stack(rows[:count])


def plain_event_loop(host: native_doppler.DopplerGraph, placement: np.ndarray) -> float:
  """The Doppler simulator as a plain Python event loop (heapq, one assignment): the same
  events and tie order as `native_doppler`'s kernel, written for reading, not speed. It is
  what a user would write without a compiler, so the speed ratio against it is what the
  compiled loop buys."""
  cond, req, end_compute, release, end_transfer, delivered = range(6)
  place = placement.tolist()
  missing = host.in_count.tolist()
  duration = (host.compute_cost / host.speed[placement]).tolist()
  heap: list[tuple[float, int, int, int]] = []  # Later events: (time, event id, kind, arg).
  now_events = collections.deque((cond, v) for v in range(host.num_ops) if missing[v] == 0)
  queues = [collections.deque() for _ in range(host.num_devices)]
  busy = [False] * host.num_devices
  end = [0.0] * host.num_ops
  now, event_id = 0.0, 0

  latency, bandwidth = host.latency.tolist(), host.bandwidth.tolist()
  out_ptr, receiver = host.out_ptr.tolist(), host.delivery_dst.tolist()
  delivery_bytes = host.delivery_bytes.tolist()

  def delay(num_bytes: float, src: int, dst: int) -> float:
    if src == dst or num_bytes < 0:  # Same device, or a control edge.
      return 0.0
    return latency[src][dst] + num_bytes / bandwidth[src][dst]

  def later(at: float, kind: int, arg: int) -> None:
    nonlocal event_id
    if at == now:
      now_events.append((kind, arg))
    else:
      heapq.heappush(heap, (at, event_id, kind, arg))
      event_id += 1

  while heap or now_events:
    if heap and (not now_events or heap[0][0] == now):
      now, _, kind, arg = heapq.heappop(heap)
    else:
      kind, arg = now_events.popleft()
    if kind == delivered:
      consumer = receiver[arg]
      missing[consumer] -= 1
      if missing[consumer] == 0:
        now_events.append((cond, consumer))
    elif kind == end_transfer:
      now_events.append((delivered, arg))
    elif kind in (cond, release):
      device = place[arg]
      if kind == cond:
        queues[device].append(arg)
      if not busy[device] and queues[device]:
        busy[device] = True
        now_events.append((req, queues[device].popleft()))
      if kind == release:
        for k in range(out_ptr[arg], out_ptr[arg + 1]):
          later(now + delay(delivery_bytes[k], device, place[receiver[k]]), end_transfer, k)
    elif kind == req:
      later(now + duration[arg], end_compute, arg)
    else:
      end[arg] = now
      busy[place[arg]] = False
      now_events.append((release, arg))
  makespan = max(end, default=0.0)
  for src, dst, num_bytes in zip(host.edge_src.tolist(), host.edge_dst.tolist(),
                                 host.edge_bytes.tolist()):
    makespan = max(makespan, end[src] + delay(num_bytes, place[src], place[dst]))
  return makespan


def median_seconds(fn, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def measure(name: str, graph, devices, checked: int, timed: int, repeats: int) -> dict:
  rng = np.random.default_rng(0)
  placements = assignments(graph, devices, checked, rng)
  host = native_doppler.build_doppler_graph(graph, devices)
  makespan, start, end = native_doppler.simulate(host, placements, record_times=True)
  mismatches = 0
  reference_seconds = []
  plain_seconds = []
  for k, placement in enumerate(placements):
    began = time.perf_counter()
    plain = plain_event_loop(host, placement)
    plain_seconds.append(time.perf_counter() - began)
    mismatches += plain != makespan[k]
    began = time.perf_counter()
    schedule = doppler_sim.simulate_doppler(graph, devices, placement)
    reference_seconds.append(time.perf_counter() - began)
    mismatches += not (schedule.makespan == makespan[k]
                       and np.array_equal(schedule.op_start, start[k])
                       and np.array_equal(schedule.op_end, end[k]))
  population = rng.integers(0, devices.num_devices, (timed, graph.num_ops))
  native_doppler.simulate(host, population[:8])  # Compiled (numba's cache) before timing.
  native_seconds = median_seconds(lambda: native_doppler.simulate(host, population), repeats)
  simpy_rate = len(reference_seconds) / sum(reference_seconds)
  plain_rate = len(plain_seconds) / sum(plain_seconds)
  native_rate = timed / native_seconds
  return {"graph": name, "ops": graph.num_ops, "edges": graph.num_edges,
          "checked": len(placements), "mismatches": int(mismatches),
          "simpy_evals_per_second": simpy_rate, "plain_loop_evals_per_second": plain_rate,
          "native_evals_per_second": native_rate, "speedup": native_rate / simpy_rate,
          "speedup_vs_plain_loop": native_rate / plain_rate}


def scored_placements(problem: performance.Problem, evals: int, seed: int, count: int
                      ) -> np.ndarray:
  """About `count` of the placements `search.optimize` (`evals`, `seed`) scores on `problem`, evenly
  spread over the search: a second run of the same deterministic search records them as the
  exact scorer receives them."""
  stride = max(evals // count, 1)
  kept, seen = [], [0]
  original = native_doppler.simulate

  def recording(host, placement, *args, **kwargs):
    rows = np.arange(seen[0], seen[0] + len(placement))
    kept.extend(np.array(placement[rows % stride == 0]))
    seen[0] += len(placement)
    return original(host, placement, *args, **kwargs)

  native_doppler.simulate = recording
  try:
    search.optimize(performance.Evaluator.of(problem), evals=evals, seed=seed)
  finally:
    native_doppler.simulate = original
  return np.stack(kept)


def measure_search(graph, devices, evals: int, plain_checked: int, rounds: int = 3) -> dict:
  """The whole exact Doppler search (BRKGA, `regal.search.optimize`) against the plain loop on
  the same graph and devices, scoring placements the search itself scored (a random placement
  on 8 devices moves most tensors, a converged one few: the same work, so the same mix):
  evaluations per second of search time, compile excluded. The two alternate for `rounds`
  rounds and each keeps its median: this machine's speed drifts by up to 2x within minutes."""
  problem = performance.Problem(graph, devices, model="doppler")
  # Compiles it.
  search.optimize(performance.Evaluator.of(problem), evals=min(evals, 20000), seed=1)
  host = native_doppler.build_doppler_graph(graph, devices)
  placements = scored_placements(problem, evals, 0, plain_checked)
  search_rates, plain_rates = [], []
  for _ in range(rounds):
    result = search.optimize(performance.Evaluator.of(problem), evals=evals, seed=0)
    search_rates.append(result.evaluations / result.search_seconds)
    began = time.perf_counter()
    for placement in placements:
      plain_event_loop(host, placement)
    plain_rates.append(len(placements) / (time.perf_counter() - began))
  search_rate, plain_rate = statistics.median(search_rates), statistics.median(plain_rates)
  return {"ops": graph.num_ops, "edges": graph.num_edges, "devices": devices.num_devices,
          "evaluations": int(result.evaluations), "rounds": rounds,
          "search_evals_per_second": search_rate, "plain_loop_evals_per_second": plain_rate,
          "search_rates": search_rates, "plain_loop_rates": plain_rates,
          "plain_loop_placements": len(placements),
          "speedup_vs_plain_loop": search_rate / plain_rate}


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("checked", "timed", "search_evals"))
  checked, timed = (200, 4000) if _QUICK.value else (_CHECKED.value, _TIMED.value)
  if checked < 10 or timed < 1 or _REPEATS.value < 1:
    raise errors.ConfigError("--checked must be at least 10, --timed and --repeats positive")
  devices = devices_lib.homogeneous(4)
  graphs = [(f[:-4], graph_io.load_graph(os.path.join(SHARED, f))) for f in DOPPLER_FILES]
  graphs.append(("synthetic_367", sized_graph(367)))
  rows = []
  for name, graph in graphs:
    rows.append(measure(name, graph, devices, checked, timed, _REPEATS.value))
    row = rows[-1]
    print(f"{name}: {row['ops']} ops, {row['mismatches']} of {row['checked']} differ; SimPy "
          f"{row['simpy_evals_per_second']:.0f}/s, plain loop "
          f"{row['plain_loop_evals_per_second']:.0f}/s, native "
          f"{row['native_evals_per_second']:.0f}/s ({row['speedup']:.0f}x SimPy, "
          f"{row['speedup_vs_plain_loop']:.0f}x the plain loop)", flush=True)
  searched = measure_search(graphs[-1][1], devices_lib.homogeneous(8),
                            2000 if _QUICK.value else _SEARCH_EVALS.value, 50 if _QUICK.value
                            else 500, rounds=1 if _QUICK.value else 3)
  print(f"search on {graphs[-1][0]}, 8 devices: {searched['search_evals_per_second']:.0f} "
        f"evals/s, {searched['speedup_vs_plain_loop']:.0f}x the plain loop "
        f"({searched['plain_loop_evals_per_second']:.0f}/s)", flush=True)
  lines, facts = report.header("Exact Doppler scorer vs the SimPy model",
                               "regal_experiments.bench.doppler_scorer",
                               "quick" if _QUICK.value else "full")
  body = ["| graph | ops | edges | assignments checked | differing | SimPy evals/s | "
           "plain loop evals/s | native evals/s | native / SimPy | native / plain loop |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  body += [f"| {r['graph']} | {r['ops']} | {r['edges']} | {r['checked']} | {r['mismatches']} | "
           f"{r['simpy_evals_per_second']:.0f} | {r['plain_loop_evals_per_second']:.0f} | "
           f"{r['native_evals_per_second']:.0f} | {r['speedup']:.0f}x | "
           f"{r['speedup_vs_plain_loop']:.0f}x |" for r in rows]
  body += ["", f"Native scorer: {os.cpu_count()} threads over a population of {timed}. SimPy "
           "and the plain Python event loop (this bench's `plain_event_loop`: heapq, the same "
           "events and tie order): one assignment at a time, every checked one timed. Every "
           "assignment's makespan, op starts and op ends are compared with SimPy's, and the "
           "plain loop's makespan too.", "",
           f"The whole exact Doppler search (`regal.search.optimize`, BRKGA with the default "
           f"settings, {searched['evaluations']:,} evaluations, compilation excluded) on "
           f"{graphs[-1][0]} ({searched['ops']} ops), {searched['devices']} devices: "
           f"{searched['search_evals_per_second']:.0f} evaluations/s; the plain loop on "
           f"{searched['plain_loop_placements']} placements that search scored (spread over "
           f"it; recorded by a second run of the same seed) "
           f"{searched['plain_loop_evals_per_second']:.0f}/s: "
           f"**{searched['speedup_vs_plain_loop']:.0f}x**. Medians of {searched['rounds']} "
           f"rounds, each a search then the plain loop (rates per round: search "
           f"{', '.join(f'{r:.0f}' for r in searched['search_rates'])}; plain loop "
           f"{', '.join(f'{r:.0f}' for r in searched['plain_loop_rates'])})."]
  report.publish(_OUT_DIR.value, "doppler_scorer", lines, body,
                 {**facts, "rows": rows, "search": searched})
  if any(r["mismatches"] for r in rows):
    raise errors.RegalError("the native scorer differs from the SimPy model (see the report)")


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
