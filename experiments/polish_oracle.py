r"""How far the insertion polish walks back to a known optimum: its upper bound (issue 69).

  python -m regal_experiments.polish_oracle            # two training instances, ~8 minutes
  python -m regal_experiments.polish_oracle --quick    # one small instance, seconds

Start from the certificate of a constructed *training* instance (`regal_datasets.constructed`, the
optimum by construction), move a share of its ops to random devices, and polish
(`regal.search.schedule_polish`) for a fixed number of evaluations: if the polish cannot find
its way back from a few misplaced ops, no budget will take it from the search's answers to the
optimum, and larger moves are what is missing (deterministic: budgets, not seconds). Then the
default polish, whose exact window re-solves need a deadline, for `--seconds` from the same
start (machine-dependent), and beside it the `pairs` polish (exact two-device re-solves taking
turns with the windows, issue 81), over `--seeds` draws of the misplaced ops, paired. Last, the
bound of a perfect choice of windows: one exact window (`WINDOW_OPS` ops, `WINDOW_SECONDS`)
centred on each misplaced op in turn, which only an oracle knows, kept when it lowers the
makespan, or (makespan, sum of op ends) lexicographically (`compact`).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import constructed  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.learning.stats import bootstrap_interval  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.scoring.delay.native import build_native_delay_graph  # noqa: E402
from regal.search import schedule_polish, window_solve  # noqa: E402

# (tasks, processors, ratio) of training instances (generator seed 0) the default run leaves
# 47% and 42% above the optimum (`experiments/results/task_graph_table/polish/`).
INSTANCES = ((300, 8, 2.0), (500, 16, 1.0))
QUICK_INSTANCES = ((100, 4, 1.0),)
SHARES = (0.02, 0.05, 0.1)

_QUICK = flags.DEFINE_bool("quick", False, "One 100-task instance, 20,000 evaluations and "
                           "0.5 s.")
_EVALS = flags.DEFINE_integer("evals", 400_000, "The polish's evaluations per start.",
                              lower_bound=1, upper_bound=100_000_000)
_SECONDS = flags.DEFINE_float("seconds", 5.0, "The default polish's seconds per start.",
                              lower_bound=0.1, upper_bound=3600.0)
_SEEDS = flags.DEFINE_integer("seeds", 3, "Draws of the misplaced ops (and polish seeds) per "
                              "instance and share.", lower_bound=1, upper_bound=100)
_TARGETED_SECONDS = flags.DEFINE_float(
    "targeted_seconds", schedule_polish.WINDOW_SECONDS, "CP-SAT's seconds per window centred on "
    "a misplaced op (the oracle's windows; the polish's own take WINDOW_SECONDS).",
    lower_bound=0.05, upper_bound=600.0)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "polish_oracle"),
                           "Report folder.")


def measure(tasks: int, processors: int, ratio: float, share: float, evals: int,
            seconds: float, seed: int = 0,
            targeted_seconds: float = schedule_polish.WINDOW_SECONDS) -> dict:
  instance = constructed.generate(tasks, processors, ratio, seed=0)
  problem = performance.Problem(instance.graph(), devices_lib.homogeneous(processors),
                                model="delay")
  native = build_native_delay_graph(problem.graph, problem.devices)
  order = np.lexsort((np.arange(tasks), instance.start))
  rng = np.random.default_rng(seed)
  placement = instance.placement.copy()
  moved = rng.choice(tasks, max(1, int(round(share * tasks))), replace=False)
  placement[moved] = rng.integers(0, processors, len(moved))
  start = schedule_polish.score(native, placement, order)[0]
  result = schedule_polish.polish(problem, placement, order, seed=seed, evals=evals,
                                  graph=native)
  timed, pairs = (schedule_polish.polish(problem, placement, order, seed=seed, evals=10 ** 9,
                                         graph=native, deadline=time.perf_counter() + seconds,
                                         exact=schedule_polish.MOVE_SETS[moves])
                  for moves in ("auto", "pairs"))
  targeted, compact = (_windows_on(native, placement, order, moved, seed, compact,
                                   targeted_seconds) for compact in (False, True))
  gap = lambda makespan: 100.0 * (makespan / instance.optimum - 1.0)  # noqa: E731
  return {"instance": f"{tasks} x {processors}, ratio {ratio:g}", "share": share, "seed": seed,
          "moved_ops": len(moved), "start_gap_pct": gap(start),
          "polished_gap_pct": gap(result.makespan), "evaluations": result.evaluations,
          "stop_reason": result.stop_reason, "moves": result.moves, "kicks": result.kicks,
          "default_gap_pct": gap(timed.makespan), "default_stop_reason": timed.stop_reason,
          "default_windows": timed.windows,
          "default_improving_windows": timed.improving_windows,
          "pairs_gap_pct": gap(pairs.makespan), "pairs_windows": pairs.windows,
          "pairs_improving_windows": pairs.improving_windows,
          "targeted_gap_pct": gap(targeted), "targeted_compact_gap_pct": gap(compact)}


def _windows_on(native, placement: np.ndarray, order: np.ndarray, moved: np.ndarray,
                seed: int, compact: bool, seconds: float) -> float:
  """The makespan after one exact window centred on each misplaced op, in start order (a
  window is kept only when it runs better: `schedule_polish.improves`)."""
  placement, order = placement.copy(), np.asarray(order, np.int64)
  makespan, start, end = schedule_polish.score(native, placement, order)
  for op in moved[np.argsort(start[moved], kind="stable")].tolist():
    by_start = order[np.argsort(start[order], kind="stable")]
    free = window_solve.window(by_start, op, schedule_polish.WINDOW_OPS)
    resolved = window_solve.resolve(
        native, window_solve.Incumbent(placement, by_start, start, end), free, seconds, seed,
        compact=compact)
    if resolved is not None:
      new_makespan, new_start, new_end = schedule_polish.score(native, resolved[0],
                                                               resolved[1])
      if schedule_polish.improves(new_makespan, new_end, makespan, end, compact):
        placement, order = resolved[0], resolved[1]
        makespan, start, end = new_makespan, new_start, new_end
  return makespan


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("evals", "seconds", "seeds", "targeted_seconds"))
  evals = 20_000 if _QUICK.value else _EVALS.value
  seconds = 0.5 if _QUICK.value else _SECONDS.value
  rows = []
  seeds = 1 if _QUICK.value else _SEEDS.value
  for tasks, processors, ratio in QUICK_INSTANCES if _QUICK.value else INSTANCES:
    for share in SHARES:
      for seed in range(seeds):
        rows.append(measure(tasks, processors, ratio, share, evals, seconds, seed,
                            _TARGETED_SECONDS.value))
        r = rows[-1]
        print(f"{r['instance']}, seed {seed}: {r['moved_ops']} ops moved, "
              f"{r['start_gap_pct']:.1f}% -> {r['polished_gap_pct']:.1f}% "
              f"({r['stop_reason']}); default polish {r['default_gap_pct']:.1f}%, pairs "
              f"{r['pairs_gap_pct']:.1f}%", flush=True)
  differences = [r["pairs_gap_pct"] - r["default_gap_pct"] for r in rows]
  low, high = bootstrap_interval(np.asarray(differences)[:, None], np.random.default_rng(0))
  header, facts = report.header("The insertion polish from near a known optimum",
                                "regal_experiments.polish_oracle", "quick" if _QUICK.value else "full")
  body = [f"From the certificate with a share of ops on random devices: {evals:,} evaluations "
          f"of insertion polish (or until it proves the optimum: stop `bound`), and the "
          f"default polish (insertions and exact windows) for {seconds:g} s, and the `pairs` "
          f"polish (exact two-device re-solves in turn with the windows) for as long; "
          f"{seeds} draw(s) of the misplaced ops each. Gaps to the optimum.", "",
          f"Paired over {len(rows)} starts, pairs - default: {np.mean(differences):+.2f} points "
          f"of gap [95% bootstrap: {low:+.2f}, {high:+.2f}], better on "
          f"{sum(d < 0 for d in differences)} and worse on {sum(d > 0 for d in differences)}.",
          ""]
  body += report.markdown_table(
      ["instance", "ops moved", "seed", "start gap %", "insertions: gap %", "stop",
       "accepted moves", "kicks", f"default, {seconds:g} s: gap %", "stop",
       "windows (improving)", f"pairs, {seconds:g} s: gap %", "exact moves (improving)",
       f"a window ({_TARGETED_SECONDS.value:g} s) on each misplaced op (oracle): gap %",
       "the same, compact: gap %"],
      [[r["instance"], f"{r['moved_ops']} ({100 * r['share']:g}%)", r["seed"],
        f"{r['start_gap_pct']:.1f}", f"{r['polished_gap_pct']:.1f}", r["stop_reason"],
        r["moves"], r["kicks"], f"{r['default_gap_pct']:.1f}", r["default_stop_reason"],
        f"{r['default_windows']} ({r['default_improving_windows']})",
        f"{r['pairs_gap_pct']:.1f}", f"{r['pairs_windows']} ({r['pairs_improving_windows']})",
        f"{r['targeted_gap_pct']:.1f}", f"{r['targeted_compact_gap_pct']:.1f}"] for r in rows])
  report.publish(_OUT.value, "polish_oracle", header, body,
                 {**facts, "rows": rows, "seeds": seeds,
                  "targeted_seconds": _TARGETED_SECONDS.value,
                  "pairs_minus_default": {"mean": float(np.mean(differences)),
                                          "ci95": [float(low), float(high)]}})


if __name__ == "__main__":
  cli.run_cli(main)
