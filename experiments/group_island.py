r"""Does a group island pay on devices in two NVLink groups? Issue 68's grouped-device target.

  python -m regal_experiments.group_island            # 4 graphs x 5 arms x seeds 0-9, ~30 min on 2 cores
  python -m regal_experiments.group_island --quick    # one graph, 2 arms, 2 seeds, 20,000 evaluations

The sharded workloads on 8 devices in two NVLink groups of 4 (WC model), `seed_spread`'s
graphs of link groups: there the default run ends in a basin set by which ops share a group.
Every arm runs the default search (`guides.run_guided` with the heuristic seeds and the
default budget, `search.default_evals`, no time limit: deterministic) with one more guide:
- `default`: none;
- `free_run`: a control: an unconfined run of `--free_share` of the budget whose best seeds
  the rest (what the island arms spend beside their islands, without an island);
- `stage_balanced`: `guides.GroupIsland` with its parameter-free split
  (`partition.stage_balanced_split`, 4 candidates);
- `metis`: the same island with METIS's balanced min-cut 2-way split (1 candidate);
- `best_known_split`: the upper bound: one island confined to the best known's split (an
  oracle: the answer is known only from long runs, `seed_spread`'s report).
Every evaluation an island or a free run spends comes out of the budget. The best known is
the lower of `seed_spread`'s (carried there with its placement) and any run here. Gap =
objective / best known - 1. Per graph and arm: mean gap, each seed's, seeds within 2%, and
the paired difference to `default` (points, mean with a 95% bootstrap interval over seeds).
Rows go to a JSONL file beside the report, so a killed run resumes where it stopped.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import atomic, errors, sharded  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_experiments import command, report, search_ab_lib  # noqa: E402
from regal.app import methods  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.search import brkga_search, guides  # noqa: E402

ARMS = ("default", "free_run", "stage_balanced", "metis", "best_known_split")
# Issue 68's target: the graphs where the default run fails (its mean gaps, seeds 0-4, in the
# issue), whose mean gap must halve; measured here against the default arm on the same seeds
# and the same best known, which runs here may have lowered.
TODAY_PCT = {"chain_mm": 5.26, "llama_layer": 7.23, "llama_block": 2.06}
WITHIN_PCT = 2.0
PASSING_SLACK_PCT = 0.3  # A graph that passes today may not get worse by more.

_ARMS = flags.DEFINE_list("arms", list(ARMS), f"Arms, of {', '.join(ARMS)}.")
_SEEDS = flags.DEFINE_list("seeds", [str(s) for s in range(10)], "Search seeds.")
_WORKLOADS = flags.DEFINE_list("workloads", list(sharded.WORKLOADS), "Sharded workloads.")
_GRAPHS = flags.DEFINE_enum("graphs", "test", ["test", "training"], "test: the workloads at "
                            "seed_spread's sizes (the target's graphs); training: the x8 WC "
                            "training graphs of `regal_experiments.search_ab` (other shapes, where "
                            "settings may be chosen; no best known carried, no oracle arm).")
_FREE_SHARE = flags.DEFINE_float("free_share", 0.2, "The free run's share of the budget.",
                                 lower_bound=0.0, upper_bound=0.9)
_SEED_SPREAD = flags.DEFINE_string(
    "seed_spread", os.path.join(report.RESULTS_DIR, "seed_spread", "seed_spread.json"),
    "The seed_spread report whose best knowns (and their placements) this one starts from.")
_QUICK = flags.DEFINE_bool("quick", False, "FFNN only, default and stage_balanced, the first "
                           "2 seeds, 20,000 evaluations.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "group_island"),
                           "Folder of the report and its resumable rows.")


@dataclasses.dataclass(frozen=True)
class FreeRun:
  """The control arm's guide: `GroupIsland`'s free run alone."""
  evals: int
  share: float

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return int(self.evals * self.share)

  def guide(self, problem: performance.Problem, seed: int,
            before: guides.Guidance) -> guides.Guidance:
    result = guides.free_run(problem, self.planned_evaluations(problem), seed, before)
    return dataclasses.replace(
        before, seeds={**before.seeds, "island/free": np.asarray(result.best_chromosome)},
        evaluations=before.evaluations + result.evaluations)


def arm_guides(arm: str, evals: int, best_placement) -> list:
  if arm == "default":
    return []
  if arm == "free_run":
    return [FreeRun(evals, _FREE_SHARE.value)]
  if arm == "best_known_split":
    if best_placement is None:
      raise errors.ConfigError("the best_known_split arm needs a best known with its "
                               "placement in --seed_spread")
    return [guides.GroupIsland(evals, split=tuple(best_placement), free_share=_FREE_SHARE.value)]
  return [guides.GroupIsland(evals, split=arm, free_share=_FREE_SHARE.value)]


def best_knowns(path: str) -> dict[str, dict]:
  """workload -> {"objective", "placement", "from"} of the NVLink x8 graphs in `path`."""
  try:
    with open(path) as file:
      summary = json.load(file)["summary"]
  except (OSError, ValueError, KeyError, TypeError) as error:
    raise errors.ConfigError(f"--seed_spread {path} does not read: {error}") from None
  out = {}
  for entry in summary:
    label = entry["graph"]
    if label.startswith("sharded ") and label.endswith("(wc x8)"):
      out[label.split()[1]] = {"objective": float(entry["best_known"]),
                               "placement": entry.get("best_placement"),
                               "from": f"seed_spread: {entry['best_from']}"}
  return out


def run_arm(problem: performance.Problem, arm: str, seed: int, evals: int,
            best_placement) -> dict:
  started = time.perf_counter()
  chain = methods.seed_guides() + arm_guides(arm, evals, best_placement)
  guided = guides.guidance(problem, seed, chain)
  result = guides.run_guided(problem, evals, seed, guided)
  objective = float(performance.score_reference(problem, result.best_chromosome)[0])
  return {"arm": arm, "seed": seed, "budget": evals, "objective": objective,
          "evaluations": int(result.evaluations), "seconds": time.perf_counter() - started,
          "guide_evaluations": int(guided.evaluations),
          "islands": guided.details.get("island"),
          "placement": [int(d) for d in result.placement]}


def bootstrap_interval(values: np.ndarray, draws: int = 10_000) -> tuple[float, float]:
  rng = np.random.default_rng(0)
  means = rng.choice(values, (draws, len(values))).mean(axis=1)
  return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def summarize(rows: list[dict], workloads: list[str], arms: list[str], seeds: list[int],
              carried: dict[str, dict]) -> list[dict]:
  """Per workload and arm: gaps to the best known (the lower of the carried one and these
  rows) and the paired difference to the default arm."""
  out = []
  for workload in workloads:
    mine = [r for r in rows if r["workload"] == workload]
    best = min(mine, key=lambda r: r["objective"])
    known = carried.get(workload)
    if known is None or best["objective"] < known["objective"] * (1 - 1e-9):
      known = {"objective": best["objective"], "placement": best["placement"],
               "from": f"group_island: {best['arm']} seed {best['seed']}"}
    gaps = {arm: np.array([100 * (r["objective"] / known["objective"] - 1) for s in seeds
                           for r in mine if r["arm"] == arm and r["seed"] == s])
            for arm in arms}
    for arm in [a for a in arms if len(gaps[a])]:
      entry = {"workload": workload, "arm": arm, "best_known": known["objective"],
               "best_from": known["from"], "gaps_pct": gaps[arm].tolist(),
               "mean_gap_pct": float(gaps[arm].mean()),
               "within_2pct": int((gaps[arm] <= WITHIN_PCT).sum()),
               "seconds": float(np.mean([r["seconds"] for r in mine if r["arm"] == arm]))}
      if arm != "default" and len(gaps.get("default", ())) == len(gaps[arm]):
        difference = gaps[arm] - gaps["default"]
        entry["vs_default_points"] = float(difference.mean())
        entry["vs_default_ci"] = bootstrap_interval(difference)
      out.append(entry)
  return out


def verdict(summary: list[dict], arm: str) -> str:
  """Issue 68's grouped-device target for `arm`."""
  of = {e["workload"]: e for e in summary if e["arm"] == arm}
  default = {e["workload"]: e for e in summary if e["arm"] == "default"}
  failing = [w for w in TODAY_PCT if w in of]
  halved = [w for w in failing if w in default and
            of[w]["mean_gap_pct"] <= default[w]["mean_gap_pct"] / 2]
  all_seeds = [w for w in failing if of[w]["within_2pct"] == len(of[w]["gaps_pct"])]
  passing = [w for w in of if w not in TODAY_PCT and w in default]
  worse = [w for w in passing
           if of[w]["mean_gap_pct"] > default[w]["mean_gap_pct"] + PASSING_SLACK_PCT]
  met = (len(halved) == len(failing) == len(TODAY_PCT) and len(all_seeds) >= 2 and not worse)
  return (f"{arm}: mean gap at most half the default's on {len(halved)} of {len(failing)} "
          f"failing graphs "
          f"({', '.join(halved) or 'none'}); every seed within {WITHIN_PCT:g}% on "
          f"{len(all_seeds)} ({', '.join(all_seeds) or 'none'}); passing graphs worse by over "
          f"{PASSING_SLACK_PCT}%: {', '.join(worse) or 'none'} -> target "
          f"{'MET' if met else 'not met'}")


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("arms", "workloads"))
  seeds = command.integers("seeds", _SEEDS.value, 0, errors.MAX_SEED)
  arms = command.choices("arms", _ARMS.value, ARMS)
  workloads = command.choices("workloads", _WORKLOADS.value, sharded.WORKLOADS)
  evals_override = None
  if _GRAPHS.value == "training":
    for name, why in (("workloads", "runs every x8 training graph"),
                      ("seed_spread", "carries no best known (it serves the test graphs)")):
      if flags.FLAGS[name].present:
        raise errors.ConfigError(f"--{name} would do nothing here: --graphs training {why}")
    graphs = [(search_ab_lib.graph_label(workload, count, arguments),
               sharded.generate(workload, count, **arguments))
              for workload, count, arguments in search_ab_lib.TRAINING_GRAPHS if count == 8]
    arms = [arm for arm in arms if arm != "best_known_split"]
  if _QUICK.value:
    workloads, arms, seeds = ["ffnn"], ["default", "stage_balanced"], seeds[:2]
    evals_override = 20_000
    if _GRAPHS.value == "training":
      graphs = [g for g in graphs if g[0].startswith("ffnn")]
  if _GRAPHS.value == "test":
    graphs = [(workload, None) for workload in workloads]
  carried = best_knowns(_SEED_SPREAD.value) if _GRAPHS.value == "test" else {}  # Before work.
  mode = "quick" if _QUICK.value else "full"
  os.makedirs(_OUT.value, exist_ok=True)
  name = "group_island" + ("-training" if _GRAPHS.value == "training" else "") + (
      "-quick" if _QUICK.value else "")
  path = os.path.join(_OUT.value, f"{name.replace('-quick', '')}-{mode}.jsonl")
  done = {(r["workload"], r["arm"], r["seed"], r["budget"]): r
          for r in atomic.read_json_lines(path)}
  devices = devices_lib.nvlink_two_groups(4)
  for workload, graph in graphs:
    graph = graph if graph is not None else sharded.generate(workload, 8)
    problem = performance.Problem(graph, devices, model="wc")
    evals = evals_override or brkga_search.default_evals(problem)
    for arm in arms:
      if arm == "best_known_split" and not (carried.get(workload) or {}).get("placement"):
        print(f"{workload}: no best_known_split runs: --seed_spread keeps no placement of "
              f"its best known", flush=True)
        continue
      for seed in seeds:
        key = (workload, arm, seed, evals)
        if key in done:
          continue
        row = {"workload": workload, **run_arm(problem, arm, seed, evals,
                                               (carried.get(workload) or {}).get("placement"))}
        cli.exit_if_stopped()
        atomic.append_json_line(path, row)
        done[key] = row
        print(f"{workload}: {arm} seed {seed}: {row['objective']:.6g} "
              f"({row['evaluations']:,} evals, {row['seconds']:.1f} s)", flush=True)
  workloads = [workload for workload, _ in graphs]
  rows = [r for r in done.values() if r["workload"] in workloads and r["arm"] in arms
          and r["seed"] in seeds]
  summary = summarize(rows, workloads, arms, seeds, carried)
  lines, facts = report.header("Group islands on 8 devices in two NVLink groups",
                               "regal_experiments.group_island", mode)
  quick_budget = "" if evals_override is None else " (quick: 20,000)"
  body = [f"Sharded workloads x8 ({_GRAPHS.value} graphs), WC model, `nvlink_two_groups(4)`; "
          f"the default budget (`search.default_evals`) per run{quick_budget}, "
          f"seeds {', '.join(map(str, seeds))}; free runs take {_FREE_SHARE.value:.0%} of the "
          f"budget, each island 5%. Gap to the best known (the lower of seed_spread's and "
          f"every run here), %. vs default: the paired difference in gap points (negative: "
          f"better), mean [95% bootstrap interval over seeds].", ""]
  body += report.markdown_table(
      ["graph", "arm", "mean gap %", "gap per seed %", f"seeds within {WITHIN_PCT:g}%",
       "vs default (points)", "s per run", "best known"],
      [[e['workload'], e["arm"], f"{e['mean_gap_pct']:.2f}",
        ", ".join(f"{g:.2f}" for g in e["gaps_pct"]),
        f"{e['within_2pct']}/{len(e['gaps_pct'])}",
        "" if "vs_default_points" not in e else
        f"{e['vs_default_points']:+.2f} [{e['vs_default_ci'][0]:+.2f}, "
        f"{e['vs_default_ci'][1]:+.2f}]",
        f"{e['seconds']:.1f}", f"{e['best_known']:.6g} ({e['best_from']})"]
       for e in summary])
  verdicts = ([verdict(summary, arm) for arm in arms if arm != "default"]
               if _GRAPHS.value == "test" else [])
  body += [""] + [f"- {line}" for line in verdicts]
  report.publish(_OUT.value, name, lines, body,
                 {**facts, "summary": summary, "verdicts": verdicts,
                  "rows_file": os.path.basename(path)})


if __name__ == "__main__":
  cli.run_cli(main)
