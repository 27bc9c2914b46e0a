r"""REGAL's Table 1 and Figures 2-3 on the synthetic test split.

  python -m regal_experiments.regal_table --policy runs/regal_long     # ~25 minutes on 2 cores
  python -m regal_experiments.regal_table --quick                      # ~5 minutes: trains a tiny
                                                                 # policy first, 6 test graphs
  python -m regal_experiments.regal_table --quick --objective memory   # the peak-memory task

A trained REGAL workdir (`python -m regal.train --config=regal/learning/configs/default.py:long
--workdir runs/regal_long`, about an hour on 2 cores) fixes the task: its dataset's test split,
device count, model, objective (REGAL trains one policy per task) and budget E (`evals`),
filtered as it was trained (REGAL 5.1: only graphs where uniform BRKGA 10K beats 1K by the
config's `test_filter_pct`). Without `--policy`, `--quick` trains a small policy first (into
`--out`/policy-quick). On every kept test graph, each method's best solution is re-scored by
the readable reference model:

  CP-SAT        OR-Tools with `--time_limit` seconds: its solution and its proven lower bound
  GP + DFS      METIS k-way partition, depth-first schedule
  Local search  hill climbing with E evaluations
  Hill climb    `hill_climb` with E evaluations: from the best cheap heuristic, on the exact
                model (the strongest simple baseline)
  Our search    what `regal.optimize` runs by default (every cheap heuristic seeds BRKGA with
                the default preset's decoder and local improvement) with E evaluations
  BRKGA E       plain BRKGA (no heuristic seeds, no local moves), uniform mutants, Goncalves &
                Resende's settings (the reference)
  Tuned BRKGA   the `tuned` BRKGA preset (`regal_experiments.sweep --sweep brkga_tuning
                --save_preset tuned`); left out with a note when there is none
  IDRS          E chromosomes drawn from the policy's per-gene Betas (no evolution)
  REGAL         plain BRKGA with the policy's mutant Betas (its features, from the graph and
                its heuristic seeds, cost no evaluations)

Columns: mean % improvement over BRKGA E and mean % gap from the best known solution: the best
any method found, CP-SAT's included, and hill climb and our search run long (`--long_factor`
times E; rows of their own). The CP-SAT lower bound gives the gap's floor.
Figure 2: histogram of REGAL's per-graph improvement over BRKGA E. Figure 3: REGAL's mean
improvement over uniform BRKGA at evaluation limits 1K..50K (quick: 1K, 2K). Writes
`regal_table.md`, `.json`, `regal_table_fig2.png`, `regal_table_fig3.png` under `--out`
(`regal_table_memory*` for the peak-memory task).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import ml_collections  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags, logging  # noqa: E402

from regal_datasets import cli, errors  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal import baselines  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.learning import references, train_lib  # noqa: E402
from regal.learning.configs import default as default_config  # noqa: E402
from regal import search  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.search import brkga_presets  # noqa: E402

_POLICY = flags.DEFINE_string("policy", None, "A trained regal.train workdir (REGAL's column "
                              "and the task); --quick without it trains a small one.")
_QUICK = flags.DEFINE_bool("quick", False, "A few minutes: a small policy, 6 test graphs, "
                           "CP-SAT 2 s, Figure 3 at 1K and 2K.")
_OBJECTIVE = flags.DEFINE_enum("objective", "runtime", ["runtime", "memory"],
                               "The task of the policy --quick trains (REGAL trains one policy "
                               "per task; with --policy the workdir's task is used).")
_MAX_GRAPHS = flags.DEFINE_integer("max_graphs", 0, "Use at most this many kept test graphs "
                                   "(0: all).", lower_bound=0, upper_bound=100_000)
_TIME_LIMIT = flags.DEFINE_float("time_limit", 10.0, "CP-SAT seconds per graph.",
                                 lower_bound=0.001, upper_bound=86400.0)
_LIMITS = flags.DEFINE_list("limits", ["1000", "2000", "5000", "10000", "20000", "50000"],
                            "Figure 3's evaluation limits.")
_LONG_FACTOR = flags.DEFINE_integer("long_factor", 4, "Budget multiple of the long runs of hill "
                                    "climb and our search that join the best known (quick: 2).",
                                    lower_bound=1, upper_bound=1000)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "regal_table"),
                           "Folder of the report and plots.")

METHODS = ("cpsat", "gp_dfs", "local_search", "hill_climb", "brkga", "tuned_brkga", "idrs",
           "regal", "search", "hill_climb_long", "search_long")
LABELS = {"cpsat": "CP-SAT", "gp_dfs": "GP + DFS", "local_search": "Local search",
          "hill_climb": "Hill climb", "brkga": "BRKGA {evals}", "tuned_brkga": "Tuned BRKGA",
          "idrs": "IDRS", "regal": "REGAL", "search": "Our search",
          "hill_climb_long": "Hill climb, {long} evaluations",
          "search_long": "Our search, {long} evaluations"}


def quick_config(objective: str = "runtime") -> ml_collections.ConfigDict:
  config = default_config.get_config()
  config.learner = "mutants"  # REGAL's table: REGAL's mutant policy (not the default prior).
  config.objective = objective
  config.num_train, config.num_valid, config.num_test = 8, 4, 6
  config.num_steps, config.eval_every, config.log_every = 6, 6, 3
  config.evals, config.reference_seeds, config.eval_seeds = 2000, 1, 1
  config.batch_size, config.samples_per_graph = 2, 2
  config.num_eval_graphs = 4
  config.num_actors = 0
  return config


def policy_and_trainer(policy_dir: str | None, quick: bool, out: str, objective: str):
  """(trainer, policy params, workdir): the trained workdir's task, with its caches."""
  if policy_dir is None:
    if not quick:
      raise errors.ConfigError("--policy names a trained regal.train workdir (or use --quick "
                               "to train a small one)")
    policy_dir = os.path.join(out, f"policy-quick-{objective}")
    config = quick_config(objective)
    logging.info("training a small policy into %s", policy_dir)
    train_lib.train_and_evaluate(config, policy_dir)
  config = train_lib.workdir_config(policy_dir)
  config.num_actors = 0  # Rollouts in this process: the table runs one method at a time.
  trainer = train_lib.Trainer(config, policy_dir)
  return trainer, train_lib.trained_policy(trainer, policy_dir), policy_dir


def brkga_runs(trainer, indices, evals: int, params=None, distributions=None):
  """Objectives (re-scored by the reference model) of plain BRKGA (no heuristic seeds, the
  direct decoder, no local moves): uniform or `params`' mutants, or per-graph (alpha, beta)
  `distributions`."""
  values = []
  for k, i in enumerate(indices):
    problem = trainer.problems[i]
    run_params = params or search.default_params(problem, evals)
    if distributions is not None:
      run_params = run_params.replace(mutant_alpha=distributions[k][0],
                                      mutant_beta=distributions[k][1])
    result = search.optimize(performance.Evaluator.of(problem), evals, seed=references.EVAL_SEED,
                             params=run_params)
    values.append(float(performance.score_reference(problem, result.best_chromosome)[0]))
  return values


def our_search(problem: performance.Problem, evals: int) -> float:
  """What `regal.optimize` reports with `evals` evaluations (default seeds and preset)."""
  return float(
      optimize_lib.run(
          problem.graph, problem.devices,
          methods.RunConfig(
              model=problem.model,
              objective=problem.objective,
              evals=evals,
              seed=references.EVAL_SEED)).result.objective)


def run_table(trainer, policy_params, indices, time_limit: float, limits: Sequence[int],
              progress=logging.info, long_factor: int = 4) -> dict:
  evals = int(trainer.config.evals)
  _, _, _, distributions = trainer.distributions(policy_params, indices, None, greedy=True)
  tuned = None
  if "tuned" in brkga_presets.names():
    tuned = brkga_presets.to_params(brkga_presets.setting("tuned"))
  objectives, seconds, bounds = {}, {}, []

  def timed(method, compute):
    started = time.perf_counter()
    objectives[method] = [float(v) for v in compute()]
    seconds[method] = (time.perf_counter() - started) / len(indices)
    progress(f"{method}: mean objective {np.mean(objectives[method]):.6g}, "
             f"{seconds[method]:.2f} s per graph")

  timed("brkga", lambda: brkga_runs(trainer, indices, evals))
  if tuned is not None:
    timed("tuned_brkga", lambda: brkga_runs(trainer, indices, evals, params=tuned))
  # The policy's features come from the graph and its heuristic seeds: no evaluations.
  timed("regal", lambda: brkga_runs(trainer, indices, evals, distributions=distributions))
  timed("idrs", lambda: [baselines.sampling.idrs(
      trainer.problems[i], alpha, beta, evals,
      seed=references.EVAL_SEED).objective for i, (alpha, beta) in zip(indices, distributions)])
  for method in ("gp_dfs", "local_search", "hill_climb"):
    timed(method, lambda: [methods.run_method(method, trainer.problems[i], evals,
                                                seed=references.EVAL_SEED).objective
                           for i in indices])
  timed("search", lambda: [our_search(trainer.problems[i], evals) for i in indices])
  timed("hill_climb_long", lambda: [methods.run_method(
      "hill_climb", trainer.problems[i], long_factor * evals, seed=references.EVAL_SEED).objective
                                    for i in indices])
  timed("search_long", lambda: [our_search(trainer.problems[i], long_factor * evals)
                                for i in indices])
  if trainer.config.objective == "runtime":  # CP-SAT plans makespans only.
    results = []
    timed("cpsat", lambda: [results.append(methods.run_method(
        "cpsat", trainer.problems[i], evals, seed=0, time_limit=time_limit)) or
                            results[-1].objective for i in indices])
    bounds = [r.details.get("lower_bound") for r in results]
  best_known = np.min(np.asarray([objectives[m] for m in objectives]), axis=0)
  reference = np.asarray(objectives["brkga"])
  rows = []
  for method in METHODS:
    if method not in objectives:
      continue
    values = np.asarray(objectives[method])
    rows.append({"method": method,
                 "improvement_over_brkga_pct": float(np.mean(100 * (reference - values)
                                                             / reference)),
                 "gap_from_best_known_pct": float(np.mean(100 * (values - best_known)
                                                          / best_known)),
                 "best_known_share": float(np.mean(values <= best_known * (1 + 1e-9))),
                 "seconds_per_graph": seconds[method]})
  figure3 = []
  for limit in limits:
    uniform = np.asarray(brkga_runs(trainer, indices, limit))
    regal = np.asarray(brkga_runs(trainer, indices, limit, distributions=distributions))
    figure3.append({"evals": limit, "regal_improvement_pct":
                    float(np.mean(100 * (uniform - regal) / uniform))})
    progress(f"figure 3, {limit} evaluations: REGAL {figure3[-1]['regal_improvement_pct']:+.2f}% "
             f"over uniform BRKGA")
  return {"evals": evals, "graphs": [int(i) for i in indices],
          "ops": [int(trainer.problems[i].graph.num_ops) for i in indices],
          "objectives": objectives, "best_known": best_known.tolist(),
          "long_evals": long_factor * evals,
          "cpsat_lower_bounds": bounds, "rows": rows, "figure3": figure3,
          "tuned_preset": None if tuned is None else brkga_presets.setting("tuned")}


def plot_figures(result: dict, out: str, stem: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  reference = np.asarray(result["objectives"]["brkga"])
  improvement = 100 * (reference - np.asarray(result["objectives"]["regal"])) / reference
  figure, axis = plt.subplots(figsize=(5, 3.2))
  axis.hist(improvement, bins=min(20, max(5, len(improvement) // 2)), color="tab:blue")
  axis.axvline(0, color="black", lw=0.8)
  axis.set_xlabel(f"% improvement of REGAL over BRKGA {result['evals']}")
  axis.set_ylabel("test graphs")
  axis.set_title("Figure 2: per-graph improvement")
  report.save_figure(figure, os.path.join(out, f"{stem}_fig2.png"))
  if result["figure3"]:
    figure, axis = plt.subplots(figsize=(5, 3.2))
    axis.plot([p["evals"] for p in result["figure3"]],
              [p["regal_improvement_pct"] for p in result["figure3"]], "o-")
    axis.axhline(0, color="black", lw=0.8)
    axis.set_xscale("log")
    axis.set_xlabel("evaluation limit")
    axis.set_ylabel("% improvement over uniform BRKGA")
    axis.set_title("Figure 3: REGAL versus the evaluation limit")
    report.save_figure(figure, os.path.join(out, f"{stem}_fig3.png"))


def markdown(result: dict, config, stem: str = "regal_table") -> list[str]:
  lines = []
  label = {m: LABELS[m].format(evals=f"{result['evals'] // 1000}K" if result["evals"] >= 1000
                               else result["evals"], long=result["long_evals"]) for m in LABELS}
  lines += [f"Synthetic test split, {len(result['graphs'])} graphs kept by the "
            f"{config.test_filter_pct:g}% room-for-improvement filter "
            f"({min(result['ops'])}-{max(result['ops'])} ops), {config.model} model, "
            f"{config.num_devices} devices, objective {config.objective}, budget "
            f"{result['evals']} evaluations per method.", ""]
  lines += report.markdown_table(
      ["method", "% improvement over " + label["brkga"], "% gap from best known",
       "best known on", "seconds per graph"],
      [[label[r["method"]], r["improvement_over_brkga_pct"], r["gap_from_best_known_pct"],
        f"{100 * r['best_known_share']:.0f}% of graphs", r["seconds_per_graph"]]
       for r in result["rows"]])
  bounds = [b for b in result["cpsat_lower_bounds"] if b is not None]
  if bounds:
    gaps = [100 * (best - bound) / best for best, bound in
            zip(result["best_known"], result["cpsat_lower_bounds"]) if bound is not None]
    lines += ["", f"CP-SAT's lower bound: the best known solution is within {np.mean(gaps):.2f}% "
              f"of it on average (max {np.max(gaps):.2f}%)."]
  if result["tuned_preset"] is None:
    lines += ["", "No `tuned` BRKGA preset: run `python -m regal_experiments.sweep --sweep "
              "brkga_tuning --save_preset tuned` for that row."]
  else:
    lines += ["", f"Tuned BRKGA: {result['tuned_preset']}."]
  if result["figure3"]:
    lines += ["", "Figure 3 (REGAL over uniform BRKGA at the same evaluation limit):", ""]
    lines += report.markdown_table(["evaluations", "% improvement"],
                                   [[p["evals"], p["regal_improvement_pct"]]
                                    for p in result["figure3"]])
  lines += ["", f"![Figure 2]({stem}_fig2.png)", "", f"![Figure 3]({stem}_fig3.png)"]
  return lines


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  limits = command.integers("limits", _LIMITS.value, 1, 1_000_000_000)
  quick = _QUICK.value
  time_limit = 2.0 if quick and not flags.FLAGS["time_limit"].present else _TIME_LIMIT.value
  if quick and not flags.FLAGS["limits"].present:
    limits = [1000, 2000]
  trainer, params, policy_dir = policy_and_trainer(_POLICY.value, quick, _OUT.value,
                                                   _OBJECTIVE.value)
  indices = trainer.splits["test"]
  max_graphs = _MAX_GRAPHS.value or (6 if quick else 0)
  if max_graphs:
    indices = indices[:max_graphs]
  started = time.perf_counter()
  long_factor = 2 if quick and not flags.FLAGS["long_factor"].present else _LONG_FACTOR.value
  if long_factor < 1:
    raise errors.ConfigError(f"--long_factor must be at least 1, got {long_factor}")
  result = run_table(trainer, params, indices, time_limit, limits,
                     progress=lambda line: print(line, flush=True), long_factor=long_factor)
  reductions = ([f"the first {max_graphs} kept graphs"] if _MAX_GRAPHS.value else []) + (
      [f"Figure 3 at {', '.join(map(str, limits))}"] if flags.FLAGS["limits"].present else [])
  mode = ("quick (a small policy trained for a few steps; 6 graphs; CP-SAT 2 s)" if quick
          else f"reduced ({'; '.join(reductions)})" if reductions else "full")
  lines, facts = report.header(f"REGAL Table 1 on synthetic graphs ({trainer.config.objective})",
                               "regal_experiments.regal_table", mode)
  lines += [f"- policy: `{policy_dir}` (trained on {len(trainer.splits['train'])} graphs)",
            f"- wall time: {time.perf_counter() - started:.0f} s", ""]
  stem = ("regal_table" if trainer.config.objective == "runtime"
          else f"regal_table_{trainer.config.objective}")
  plot_figures(result, _OUT.value, stem)
  report.publish(_OUT.value, stem, lines, markdown(result, trainer.config, stem),
                 {**facts, **result})

if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
