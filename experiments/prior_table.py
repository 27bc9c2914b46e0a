r"""Does a parameter-free prior pay? The bottom-level prior against the same search unguided.

  python -m regal_experiments.prior_table                    # validation graphs, q 0.1, 0.3, 0.6
  python -m regal_experiments.prior_table --q 0.6 --split train      # confirm on other graphs
  python -m regal_experiments.prior_table --oracle 20000     # + the upper bound of a long run's answer
  python -m regal_experiments.prior_table --quick            # 4 graphs, 2 seeds, q 0.3
  python -m regal_experiments.prior_table --model wc --devices 8 --evals default --oracle 5x
      # where users run: the WC model, 8 devices, each graph's default budget; the long run
      # at 5x it gives the headroom (unguided's gap to the best known), the oracles' bound

Issue 68's parameter-free guide (`regal.search.guides.BottomLevelPrior`: each fresh key's
priority gene, with probability q, drawn around the op's upward rank) on REGAL's protocol: the
synthetic dataset of `regal.train`'s default config (its model, objective and device count),
the *validation* split (`--split train` confirms a choice on training graphs; never the test
graphs), `--evals` per search. Both arms run the
one search (`guides.run_guided`) with the same heuristic seeds, budget and search seed; the
prior spends no evaluation and its seconds are in its arm's wall time. Per graph the mean
improvement over seeds, 100 (unguided - guided) / unguided; over graphs the mean with a 95%
bootstrap interval (graphs resampled, then seeds), win and loss rates, mean seconds per search.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import os  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import errors  # noqa: E402
from regal_experiments import command, prior_lib, report  # noqa: E402
from regal.learning import stats  # noqa: E402
from regal.search import guides  # noqa: E402

_QS = flags.DEFINE_list("q", ["0.1", "0.3", "0.6"], "Prior probabilities to measure.")
_SPREAD = flags.DEFINE_float("spread", 0.5, "The prior's spread (logit space).",
                             lower_bound=1e-3, upper_bound=100.0)
_EVALS = flags.DEFINE_string("evals", "5000", "Evaluations per search (REGAL's protocol: "
                             "5,000), or 'default': each graph's default budget "
                             "(regal.optimize's).")
_MODEL = flags.DEFINE_enum("model", None, ["sync", "wc"], "The performance model (default: "
                           "regal.train's default config's).")
_DEVICES = flags.DEFINE_integer("devices", None, "Homogeneous devices (default: regal.train's "
                                "default config's).", lower_bound=2, upper_bound=16)
_SEEDS = flags.DEFINE_integer("seeds", 5, "Paired search seeds per graph.", lower_bound=1,
                              upper_bound=100)
_MAX_GRAPHS = flags.DEFINE_integer("max_graphs", 16, "Validation graphs (0: all).",
                                   lower_bound=0, upper_bound=100_000)
_SPLIT = flags.DEFINE_enum("split", "valid", ["valid", "train"], "Which graphs: validation "
                           "(where q is chosen), or training graphs to confirm a choice on "
                           "graphs it was not made on (never the test split).")
_ORACLE = flags.DEFINE_string("oracle", "0", "Also the upper bound: priors around the answer "
                              "of an unguided run of this many evaluations on the same graph, "
                              "or Nx: N times its budget (its order, and its order and "
                              "placement; not counted in the budget: an oracle, not a guide), "
                              "and the headroom: the unguided search's gap to that run. 0: none.")
_QUICK = flags.DEFINE_bool("quick", False, "4 graphs, 2 seeds, q 0.3.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "prior_table"),
                           "Folder of the report.")


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("q", "evals", "seeds", "max_graphs", "split"))
  try:
    qs = [0.3] if _QUICK.value else [float(q) for q in _QS.value]
  except ValueError:
    raise errors.ConfigError(f"--q takes numbers in (0, 1], got {_QS.value}") from None
  if not qs or not all(0 < q <= 1 for q in qs):
    raise errors.ConfigError(f"--q takes numbers in (0, 1], got {_QS.value}")
  seeds, max_graphs = (2, 4) if _QUICK.value else (_SEEDS.value, _MAX_GRAPHS.value)
  evals = 2000 if _QUICK.value else _EVALS.value
  if evals != "default":
    try:
      evals = int(evals)
    except ValueError:
      evals = 0
    if not 100 <= evals <= 10 ** 8:
      raise errors.ConfigError(f"--evals takes 100 to 10^8 evaluations or 'default', got "
                               f"{_EVALS.value!r}")
  oracle = prior_lib.parse_oracle(_ORACLE.value)
  todo, config = prior_lib.problems(_SPLIT.value, max_graphs, _MODEL.value, _DEVICES.value)
  arms = {"unguided": None, **{f"q={q:g}": guides.BottomLevelPrior(q, _SPREAD.value)
                               for q in qs}}
  if oracle:
    for q in qs:
      arms.update({f"oracle order q={q:g}": ("order", q), f"oracle all q={q:g}": ("all", q)})
  best_known: dict[int, float] = {}
  objective, seconds = prior_lib.measure(todo, arms, seeds, evals, oracle, _SPREAD.value,
                                         best_known)
  rows = prior_lib.table_rows(objective, seconds)
  lines, facts = report.header("The bottom-level prior against the unguided search",
                               "regal_experiments.prior_table", "quick" if _QUICK.value else "full")
  budgets = [prior_lib.budget(p, evals) for p in todo]
  budget_text = (f"{evals:,} evaluations" if evals != "default" else
                 f"each graph's default budget ({min(budgets):,} to {max(budgets):,} "
                 f"evaluations)")
  long_text = (f"{oracle:,}-evaluation" if isinstance(oracle, int) else
               f"{oracle:g}x-budget")
  body = [f"{len(todo)} {_SPLIT.value} graphs of `{config.dataset}` ({config.model} model, "
          f"{config.objective}, {config.num_devices} devices), {seeds} paired seeds each, "
          f"{budget_text} per search, prior spread {_SPREAD.value:g}; unguided "
          f"{np.mean(seconds['unguided']):.2f} s per search.", ""]
  body += prior_lib.markdown_rows(rows)
  headroom = None
  if oracle:
    best = np.array([best_known[i] for i in range(len(todo))])
    gap = 100 * (objective["unguided"] - np.minimum(best[:, None], objective["unguided"])) / (
        objective["unguided"])
    low, high = stats.bootstrap_interval(gap, np.random.default_rng(0))
    headroom = {"mean_pct": float(gap.mean(axis=1).mean()), "ci95_pct": [low, high],
                "max_pct": float(gap.max()), "per_graph_pct": gap.mean(axis=1).tolist(),
                "best_known": best.tolist()}
    body += ["", f"Oracle arms (upper bounds, not guides): priors around the answer of an "
             f"unguided {long_text} run of the same graph, not counted. Headroom: the "
             f"unguided search ends {headroom['mean_pct']:.2f}% above that run's answer on "
             f"average ([{low:.2f}, {high:.2f}], at most {headroom['max_pct']:.2f}%): what a "
             f"perfect prior toward it could gain."]
  guides_only = [r for r in rows if not r["arm"].startswith("oracle")]
  best = max(guides_only, key=lambda r: r["mean_improvement_pct"])
  pays = best["ci95_pct"][0] > 0
  body += ["", f"Verdict: the best arm, {best['arm']}, is {best['mean_improvement_pct']:+.2f}% "
           f"against the unguided search; "
           + ("its interval excludes 0: it pays." if pays else
              "its interval holds 0: no evidence it pays.")]
  name = ("prior_table" + ("" if _SPLIT.value == "valid" else f"_{_SPLIT.value}")
          + ("" if _SPREAD.value == 0.5 else f"_spread{_SPREAD.value:g}")
          + (f"_{config.model}_x{config.num_devices}" if _MODEL.value or _DEVICES.value
             else "")
          + ("_default_budget" if evals == "default" else "")
          + (f"_oracle{_ORACLE.value.strip().lower()}" if oracle else ""))
  report.publish(_OUT.value, name, lines, body,
                 {**facts, "evals": evals, "budgets": budgets, "seeds": seeds,
                  "model": config.model, "devices": config.num_devices,
                  "graphs": [p.graph.name for p in todo], "headroom": headroom,
                  "spread": _SPREAD.value, "rows": rows, "pays": pays,
                  "objectives": {arm: v.tolist() for arm, v in objective.items()}})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
