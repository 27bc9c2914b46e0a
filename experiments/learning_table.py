r"""Does the learned guide pay? The guided search against the same search unguided.

  python -m regal_experiments.learning_table --policy runs/regal               # the synthetic test split
  python -m regal_experiments.learning_table --policy runs/regal --quick       # 6 graphs, 3 seeds
  python -m regal_experiments.learning_table --policy runs/regal_wc --family doppler   # zero-shot

Only graphs the policy never saw: the test split of the workdir's dataset (`--family
synthetic`), or zero-shot the Doppler files (doppler model), the sharded workloads (WC) or a
Sinnen sample (delay model), on the policy's device count. Both arms run the one search
(`regal.search.guides.run_guided`, what `regal.optimize` runs) with the same heuristic seeds,
budget and search seed; the guided arm adds the policy's mutant distributions (its features
cost no evaluations, its GNN's seconds are in its wall time). For each graph and seed:

  improvement   100 (unguided - guided) / unguided, per graph the mean over seeds; its mean
                over graphs with a bootstrap 95% interval (graphs resampled, then seeds)
  win rate      the share of (graph, seed) pairs where the guided search is strictly better
  headroom      (unguided - guided) / (unguided - best known), summed over pairs: the share of
                the gap to the best known that the guide closes; best known is the best of
                every run, the unguided search at `--long_factor` times the budget included
  evaluations   the guided search's evaluations until it matched the unguided result (from
                its per-generation history; the budget when it never did)

Writes `learning_table[_<family>].md` / `.json` and a per-graph plot under `--out`.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import glob  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import benchmarks  # noqa: E402
from regal_datasets import dataset as dataset_lib  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import cli, errors  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal_experiments.paired_stats import first_match, summarize  # noqa: E402
from regal.learning import train_lib, trained_guide  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.search import guides  # noqa: E402

FAMILIES = ("synthetic", "doppler", "sharded", "sinnen")
SHARED = benchmarks.SHARED_GRAPHS
SEED_BASE = 20_000_003  # Search seeds of this table: none of training's.

_POLICY = flags.DEFINE_string("policy", None, "A trained regal.train workdir.")
_FAMILY = flags.DEFINE_enum("family", "synthetic", FAMILIES, "Which unseen graphs.")
_EVALS = flags.DEFINE_list("evals", ["5000"], "Budgets (evaluations per search); 'default': "
                           "regal.optimize's default budget of each graph.")
_SEEDS = flags.DEFINE_integer("seeds", 5, "Paired search seeds per graph.", lower_bound=1,
                              upper_bound=100)
_LONG_FACTOR = flags.DEFINE_integer("long_factor", 20, "Budget multiple of the unguided run "
                                    "that joins the best known.", lower_bound=1,
                                    upper_bound=1000)
_MAX_GRAPHS = flags.DEFINE_integer("max_graphs", 0, "At most this many graphs (0: all).",
                                   lower_bound=0, upper_bound=100_000)
_QUICK = flags.DEFINE_bool("quick", False, "6 graphs, 3 seeds, long runs at 5x.")
_SHARED = flags.DEFINE_string("shared", SHARED, "The shared graphs folder (zero-shot families).")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "learning_table"),
                           "Folder of the report.")


def family_problems(family: str, config, shared: str) -> list[performance.Problem]:
  """The unseen graphs of `family` as problems on the policy's device count."""
  devices = devices_lib.homogeneous(config.num_devices)
  if family == "synthetic":
    dataset = dataset_lib.for_training(config.dataset, config.num_train, config.num_valid,
                                       config.num_test)
    return [performance.Problem(g, devices, model=config.model, objective=config.objective)
            for g in dataset["test"]]
  if family == "sharded":
    from regal_datasets import sharded
    graphs = [sharded.generate(name, config.num_devices) for name in sharded.WORKLOADS]
    return [performance.Problem(g, devices, model="wc") for g in graphs]
  pattern = {"doppler": ("doppler", "*.txt"), "sinnen": ("sinnen", "**/*.dot")}[family]
  paths = sorted(glob.glob(os.path.join(shared, *pattern), recursive=True))
  if not paths:
    raise errors.ConfigError(f"{shared}: no {family} graphs ({os.path.join(*pattern)})")
  if family == "sinnen":
    paths = paths[::max(1, len(paths) // 12)][:12]  # A fixed sample across the set.
  model = "doppler" if family == "doppler" else "delay"
  problems = []
  for path in paths:
    graph = graph_io.load_graph(path)
    if graph.num_ops >= config.num_devices:
      problems.append(performance.Problem(graph, devices, model=model))
  return problems


def paired_runs(problems, workdir: str, budget: str, seeds: int, progress) -> list[dict]:
  """Per graph: both arms' objectives, wall seconds and evaluations over `seeds` seeds."""
  rows = []
  for index, problem in enumerate(problems):
    evals = (guides.brkga_search.default_evals(problem) if budget == "default"
             else int(budget))
    seeded = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
    row = {"graph": problem.graph.name, "ops": problem.graph.num_ops, "evals": evals,
           "unguided": [], "guided": [], "unguided_seconds": [], "guided_seconds": [],
           "guided_evals_to_match": [], "steered_genes": 0}
    params = guides.plan_search(problem, evals).params
    for k in range(seeds):
      seed = SEED_BASE + k
      started = time.perf_counter()
      plain = guides.run_guided(problem, evals, seed, seeded)
      row["unguided_seconds"].append(time.perf_counter() - started)
      started = time.perf_counter()
      guided = trained_guide.guide_for(workdir, evals).guide(problem, seed, seeded)
      steered = guides.run_guided(problem, evals, seed, guided)
      row["guided_seconds"].append(time.perf_counter() - started)
      row["steered_genes"] = guided.details["steered_genes"]
      row["unguided"].append(float(plain.objective))
      row["guided"].append(float(steered.objective))
      # Histories are search scores (the objective with its tie-breaker): matched against
      # the unguided run's final score, in the same units.
      row["guided_evals_to_match"].append(first_match(steered, plain.history[-1], params))
    rows.append(row)
    change = 100 * (np.mean(row["unguided"]) - np.mean(row["guided"])) / np.mean(row["unguided"])
    progress(f"{index + 1}/{len(problems)} {problem.graph.name} ({problem.graph.num_ops} ops, "
             f"{evals} evaluations): guided {change:+.2f}% over unguided, "
             f"{row['steered_genes']} genes steered")
  return rows


def long_runs(problems, rows, factor: int) -> list[float]:
  """The unguided search with `factor` times each graph's budget (one seed)."""
  return [float(guides.run_guided(p, factor * r["evals"], SEED_BASE, guides.guidance(
      p, 0, [guides.HeuristicSeeds()])).objective) for p, r in zip(problems, rows)]


def plot(rows: list[dict], path: str, title: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  unguided = np.array([r["unguided"] for r in rows])
  guided = np.array([r["guided"] for r in rows])
  improvement = 100 * (unguided - guided) / unguided
  order = np.argsort(improvement.mean(axis=1))
  figure, axis = plt.subplots(figsize=(6, 3.2))
  for position, g in enumerate(order):
    axis.plot([position] * improvement.shape[1], improvement[g], ".", color="tab:grey")
    axis.plot(position, improvement[g].mean(), "o", color="tab:blue")
  axis.axhline(0, color="black", lw=0.8)
  axis.set_xlabel("graph (sorted)")
  axis.set_ylabel("% better than unguided")
  axis.set_title(title)
  report.save_figure(figure, path)


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  if not _POLICY.value:
    raise errors.ConfigError("--policy names a trained regal.train workdir")
  budgets = [b.strip() for b in _EVALS.value]
  for budget in budgets:
    if budget != "default" and not (budget.isdigit() and 0 < int(budget) <= 10_000_000):
      raise errors.ConfigError(f"--evals: {budget!r} is neither a budget nor 'default'")
  config = train_lib.workdir_config(_POLICY.value)
  quick = _QUICK.value
  seeds = 3 if quick and not flags.FLAGS["seeds"].present else _SEEDS.value
  factor = 5 if quick and not flags.FLAGS["long_factor"].present else _LONG_FACTOR.value
  problems = family_problems(_FAMILY.value, config, _SHARED.value)
  max_graphs = _MAX_GRAPHS.value or (6 if quick else 0)
  if max_graphs:
    problems = problems[:max_graphs]
  started = time.perf_counter()
  progress = lambda line: print(line, flush=True)  # noqa: E731
  results = {}
  for budget in budgets:
    rows = paired_runs(problems, _POLICY.value, budget, seeds, progress)
    long = long_runs(problems, rows, factor)
    best = np.array([min([l] + r["unguided"] + r["guided"]) for l, r in zip(long, rows)])
    results[budget] = {"rows": rows, "long": long, "best_known": best.tolist(),
                       "summary": summarize(rows, best)}
    progress(f"{budget}: {results[budget]['summary']}")
  stem = "learning_table" + ("" if _FAMILY.value == "synthetic" else f"_{_FAMILY.value}")
  mode = (f"quick ({len(problems)} graphs, {seeds} seeds, long runs at {factor}x)" if quick
          else f"{len(problems)} graphs, {seeds} seeds, long runs at {factor}x")
  lines, facts = report.header(f"Guided against unguided search ({_FAMILY.value})",
                               "regal_experiments.learning_table", mode)
  trained = (f"a learned prior, {config.prior.steps} steps on long runs' answers"
             if config.get("learner", "mutants") == "prior" else
             f"REGAL's mutant policy, {config.num_steps} steps")
  lines += [f"- policy: `{_POLICY.value}` ({config.model} model, {config.num_devices} devices, "
            f"{trained} on {config.dataset}; the learned prior's q scaled by the budget past "
            f"{config.evals:,})",
            f"- wall time: {time.perf_counter() - started:.0f} s", ""]
  table = []
  for budget, result in results.items():
    s = result["summary"]
    table.append([budget, s["mean_improvement_pct"],
                  f"[{s['ci95_pct'][0]:.2f}, {s['ci95_pct'][1]:.2f}]",
                  f"{100 * s['win_rate']:.0f}% / {100 * s['loss_rate']:.0f}%",
                  None if s["headroom_captured"] is None else 100 * s["headroom_captured"],
                  s["unguided_gap_to_best_known_pct"], s["median_guided_evals_to_match"],
                  f"{s['guided_seconds']:.2f} / {s['unguided_seconds']:.2f}"])
  body = report.markdown_table(
      ["evaluations", "% improvement (mean over graphs)", "bootstrap 95% CI", "wins / losses",
       "% headroom captured", "unguided % above best known",
       "guided evaluations to match unguided (median)", "seconds guided / unguided"], table)
  body += ["", f"{len(problems)} graphs x {seeds} paired seeds; improvement = 100 (unguided - "
           f"guided) / unguided; both arms have the same seeds, budget and search seed.", ""]
  for budget in results:
    path = os.path.join(_OUT.value, f"{stem}_{budget}.png")
    plot(results[budget]["rows"], path, f"{_FAMILY.value}, {budget} evaluations")
    body.append(f"![{budget}]({os.path.basename(path)})")
  report.publish(_OUT.value, stem, lines, body,
                 {**facts, "policy": _POLICY.value, "family": _FAMILY.value, "seeds": seeds,
                  "long_factor": factor, "results": results})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
