r"""Does a learned prior pay? The imitation-trained prior network against the unguided search,
the best parameter-free prior and the perfect predictor of its own labels.

  python -m regal_experiments.learned_prior_table                 # validation graphs: choose q
  python -m regal_experiments.learned_prior_table --eval_split test --learned_q 0.6  # once, on test
  python -m regal_experiments.learned_prior_table --quick         # tiny: 4+2 graphs, 2K labels

Issue 68, items 1-3: labels from long runs (the best of `--label_runs` unguided searches of
`--label_evals` evaluations on each training and validation graph, on Ray actors, cached per
graph in `--workdir` and resumed after a kill), a network (`regal.learning.prior_net`) trained
by maximum likelihood on the training graphs' labels (validation labels choose the step), and
its prior in the search's fresh keys with probability q (`regal.learning.prior_policy.
PriorGuide`). Arms on the `--split` graphs, paired seeds, `--evals` each: the learned prior per
q; the bottom-level prior at q 0.6 (`prior_table`'s best on validation); the label oracle
(priors from the graph's own long-run labels, a perfect predictor: this predictor family's upper
bound, not a guide). Improvement per graph: the mean over seeds of 100 (unguided - arm) /
unguided; over graphs the mean with a 95% bootstrap interval (`prior_lib.table_rows`).
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

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import errors  # noqa: E402
from regal_experiments import command, prior_lib, report  # noqa: E402
from regal.learning import policy as policy_lib  # noqa: E402
from regal.learning import prior_guide, prior_net, prior_policy, prior_train  # noqa: E402
from regal.learning import rollout_pool, stats  # noqa: E402
from regal.search import guides  # noqa: E402


_LEARNED_Q = flags.DEFINE_list("learned_q", ["0.3", "0.6", "1.0"],
                               "Prior probabilities of the learned prior.")
_LABEL_EVALS = flags.DEFINE_integer("label_evals", 50_000, "Evaluations of each long run.",
                                    lower_bound=100, upper_bound=10 ** 8)
_LABEL_RUNS = flags.DEFINE_integer("label_runs", 2, "Long runs per graph (their best is the "
                                   "label).", lower_bound=1, upper_bound=100)
_STEPS = flags.DEFINE_integer("steps", 400, "Adam steps.", lower_bound=1, upper_bound=10 ** 6)
_ACTORS = flags.DEFINE_integer("actors", 2, "Ray actors for the long runs (0: in-process).",
                               lower_bound=0, upper_bound=256)
_WORKDIR = flags.DEFINE_string("workdir", "runs/learned_prior", "Where the long runs' answers "
                               "are cached (per graph, resumable).")
_EVALS = flags.DEFINE_integer("evals", 5000, "Evaluations per search (REGAL's protocol: 5,000).",
                              lower_bound=100, upper_bound=10 ** 8)
_SEEDS = flags.DEFINE_integer("seeds", 5, "Paired search seeds per graph.", lower_bound=1,
                              upper_bound=100)
_QUICK = flags.DEFINE_bool("quick", False, "4 training and 2 measured graphs, 2K-evaluation "
                           "labels, 20 steps, 2 seeds of 1K evaluations, q 0.6.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "learned_prior_table"),
                           "Folder of the report.")
_DECOMPOSE = flags.DEFINE_bool("decompose", False, "Also the arms with one half of the prior "
                                "(order or placement) from the measured graph's own labels.")
_SHARP = flags.DEFINE_bool("sharp", False, "Also the learned prior with sharp affinity means "
                           "(the probability itself, not calibrated).")
_SEED_PLACEMENTS = flags.DEFINE_bool("seed_placements", True, "The prior's features include "
                                     "each heuristic seed's placement class per op "
                                     "(`prior_policy.features`); off: the shares only.")
_PRIOR_SEEDS = flags.DEFINE_multi_enum("prior_seeds", [], ["predicted", "heuristics"],
                                      "Also the learned prior at q 1 with these first-"
                                      "population seeds in the predicted order "
                                      "(`prior_policy.PriorGuide.seeds`).")
_DEFAULT_BUDGET = flags.DEFINE_bool("default_budget", False, "At each graph's default budget "
                                    "(regal.optimize's) instead of --evals: unguided, the "
                                    "learned prior with its predicted seed at q 1 and at the "
                                    "budget-scaled q (`prior_guide.budget_q`); --max_graphs "
                                    "of the graphs.")
_MAX_GRAPHS = flags.DEFINE_integer("max_graphs", 0, "At most this many measured graphs (0: "
                                   "all).", lower_bound=0, upper_bound=100_000)
_COSINE = flags.DEFINE_bool("cosine", False, "Train with the rate decaying along a cosine and "
                            "gradients clipped to norm 1 (`prior_policy.TrainSettings`).")
_AGGREGATION = flags.DEFINE_enum("aggregation", None, ["sum", "mean"], "The encoder's message "
                                 "aggregation (default: the training config's).")
_EVAL_SPLIT = flags.DEFINE_enum("eval_split", "valid", ["valid", "test"],
                                "Graphs measured: validation (where q is chosen) or, once, test.")


def answers(problems: list, tag: str, evals: int, runs: int, actors: int, workdir: str
            ) -> list[np.ndarray]:
  """The best long-run answer of every problem, cached in `workdir` per graph."""
  os.makedirs(workdir, exist_ok=True)
  pools = []

  def pool_of():
    pools.append(rollout_pool.RolloutPool(problems, evals, num_actors=actors))
    return pools[-1]
  try:
    done = prior_train.long_run_answers(
        pool_of, list(range(len(problems))), runs, evals,
        os.path.join(workdir, f"answers_{tag}_{evals}x{runs}.npz"), f"long runs ({tag})")
  finally:
    for pool in pools:
      pool.shutdown()
  return [done[i] for i in range(len(problems))]


def verdict_line(objective: dict[str, np.ndarray], rows: list[dict]
                 ) -> tuple[str, list[float]]:
  """The best guide arm (a learned prior; not an oracle or a half-oracle decomposition arm)
  against the unguided search and against the bottom-level prior: (line, [mean, low, high]
  of the points over the bottom-level prior)."""
  guided = [r for r in rows if r["arm"].startswith("learned") and "label" not in r["arm"]]
  best = max(guided, key=lambda r: r["mean_improvement_pct"])
  bottom = next(r for r in rows if r["arm"].startswith("bottom_level"))
  improvement = {arm: 100 * (objective["unguided"] - objective[arm]) / objective["unguided"]
                 for arm in (best["arm"], bottom["arm"])}
  over_bottom = improvement[best["arm"]] - improvement[bottom["arm"]]
  low, high = stats.bootstrap_interval(over_bottom, np.random.default_rng(0))
  mean = float(over_bottom.mean(axis=1).mean())
  return (f"Verdict: the best learned arm, {best['arm']}, is "
          f"{best['mean_improvement_pct']:+.2f}% [{best['ci95_pct'][0]:+.2f}, "
          f"{best['ci95_pct'][1]:+.2f}] against the unguided search, and {mean:+.2f} points "
          f"[{low:+.2f}, {high:+.2f}] against the bottom-level prior.", [mean, low, high])


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("learned_q", "evals", "seeds", "label_evals", "steps",
                                       "eval_split"))
  try:
    qs = [0.6] if _QUICK.value else [float(q) for q in _LEARNED_Q.value]
  except ValueError:
    raise errors.ConfigError(f"--learned_q takes numbers in (0, 1], got "
                             f"{_LEARNED_Q.value}") from None
  if not qs or not all(0 < q <= 1 for q in qs):
    raise errors.ConfigError(f"--learned_q takes numbers in (0, 1], got {_LEARNED_Q.value}")
  quick = _QUICK.value
  seeds = 2 if quick else _SEEDS.value
  evals = 1000 if quick else _EVALS.value
  label_evals = 2000 if quick else _LABEL_EVALS.value
  steps = 20 if quick else _STEPS.value
  train, config = prior_lib.problems("train", 4 if quick else 0)
  valid, _ = prior_lib.problems("valid", 2 if quick else 0)
  measured = valid if _EVAL_SPLIT.value == "valid" else prior_lib.problems(
      "test", 2 if quick else 0)[0]
  workdir = _WORKDIR.value
  runs = _LABEL_RUNS.value
  started = time.perf_counter()
  train_answers = answers(train, "train", label_evals, runs, _ACTORS.value, workdir)
  valid_answers = answers(valid, "valid", label_evals, runs, _ACTORS.value, workdir)
  label_seconds = time.perf_counter() - started
  measured_answers = valid_answers if _EVAL_SPLIT.value == "valid" else answers(
      measured, "test", label_evals, runs, _ACTORS.value, workdir)
  policy_config = policy_lib.PolicyConfig(**{
      **config.policy.to_dict(), **({"aggregation": _AGGREGATION.value}
                                    if _AGGREGATION.value else {})})
  net = prior_net.PriorNet(policy_config, prior_net.num_classes(train[0].devices))
  started = time.perf_counter()
  params, history = prior_policy.train(
      net, prior_policy.batch(train, train_answers, _SEED_PLACEMENTS.value),
      prior_policy.batch(valid, valid_answers, _SEED_PLACEMENTS.value),
      prior_policy.TrainSettings(steps=steps, **({"schedule": "cosine", "clip_norm": 1.0}
                                                  if _COSINE.value else {})),
      log=lambda k, t, v: print(f"step {k}: train loss {t:.3f}, valid loss {v:.3f}", flush=True)
      if k % 100 == 0 else None)
  train_seconds = time.perf_counter() - started
  learned = lambda problem: prior_policy.outputs(  # noqa: E731
      net, params, problem, _SEED_PLACEMENTS.value)
  arms = {"unguided": None, "bottom_level q=0.6": guides.BottomLevelPrior(0.6)}
  for q in qs:
    arms[f"learned q={q:g}"] = prior_policy.PriorGuide(learned, q)
  arms["label oracle q=1"] = lambda index: prior_policy.PriorGuide(
      lambda problem: prior_policy.label_outputs(problem, measured_answers[index]), 1.0,
      placement="sharp")
  for kind in _PRIOR_SEEDS.value:  # First-population seeds in the predicted order.
    arms[f"learned q=1 + {kind} seeds"] = prior_policy.PriorGuide(learned, 1.0, seeds=kind)
  if _SHARP.value:  # The affinity mapping before calibration (`prior_net.affinity_means`).
    for q in qs:
      arms[f"learned sharp q={q:g}"] = prior_policy.PriorGuide(learned, q, placement="sharp")
  if _DECOMPOSE.value:  # Which half of the predictor holds it back: one half from the labels.
    def mixed(index: int, order_from_labels: bool):
      def outputs_of(problem):
        ours, labels = learned(problem), prior_policy.label_outputs(
            problem, measured_answers[index])
        order, placement = (labels, ours) if order_from_labels else (ours, labels)
        return prior_net.PriorOutputs(order.key[:problem.graph.num_ops],
                                      order.key_spread[:problem.graph.num_ops],
                                      placement.class_logits[:problem.graph.num_ops])
      return prior_policy.PriorGuide(outputs_of, 1.0, placement="sharp")
    arms["learned order, label placement q=1"] = lambda index: mixed(index, False)
    arms["label order, learned placement q=1"] = lambda index: mixed(index, True)
  if _DEFAULT_BUDGET.value:  # The product's budget: only what could ship, and unguided.
    evals = "default"
    arms = {"unguided": None, "bottom_level q=0.6": guides.BottomLevelPrior(0.6),
            "learned q=1 + predicted seeds": prior_policy.PriorGuide(learned, 1.0,
                                                                     seeds="predicted"),
            "learned budget q + predicted seeds": lambda index: prior_policy.PriorGuide(
                learned, prior_guide.budget_q(1.0, _EVALS.value, prior_lib.budget(
                    measured[index], "default")), seeds="predicted")}
  if _MAX_GRAPHS.value:
    measured = measured[:_MAX_GRAPHS.value]
  objective, seconds = prior_lib.measure(measured, arms, seeds, evals)
  rows = prior_lib.table_rows(objective, seconds)
  lines, facts = report.header("A learned prior against the unguided search",
                               "regal_experiments.learned_prior_table", "quick" if quick else "full")
  body = [f"{len(measured)} {_EVAL_SPLIT.value} graphs of `{config.dataset}` ({config.model} "
          f"model, {config.objective}, {config.num_devices} devices), {seeds} paired seeds "
          f"each, {evals if isinstance(evals, str) else f'{evals:,}'} evaluations per search; "
          f"unguided "
          f"{np.mean(seconds['unguided']):.2f} s per search. Labels: the best of {runs} "
          f"unguided runs of {label_evals:,} evaluations on each of {len(train)} training and "
          f"{len(valid)} validation graphs ({label_seconds:.0f} s, cached); {steps} Adam steps "
          f"({train_seconds:.0f} s), the step of lowest validation loss kept.", ""]
  body += prior_lib.markdown_rows(rows)
  if "label oracle q=1" in arms:
    body += ["", "The label oracle is an upper bound, not a guide: priors from the measured "
             "graph's own long-run labels (keys spread 0.5, classes at 0.9)."]
  verdict, over_bottom = verdict_line(objective, rows)
  body += ["", verdict]
  name = (f"learned_prior_table_{_EVAL_SPLIT.value}" + ("_decompose" if _DECOMPOSE.value else "")
          + (f"_{_AGGREGATION.value}" if _AGGREGATION.value else "")
          + ("_sharp" if _SHARP.value else "")
          + ("" if _SEED_PLACEMENTS.value else "_shares_only")
          + ("_cosine" if _COSINE.value else "")
          + "".join(f"_{kind}_seeds" for kind in _PRIOR_SEEDS.value)
          + ("_default_budget" if _DEFAULT_BUDGET.value else "")
          + (f"_{_MAX_GRAPHS.value}graphs" if _MAX_GRAPHS.value else ""))
  report.publish(_OUT.value, name, lines, body,
                 {**facts, "evals": evals, "seeds": seeds, "label_evals": label_evals,
                  "label_runs": runs, "steps": steps, "history": history,
                  "graphs": [p.graph.name for p in measured], "rows": rows,
                  "over_bottom_level": over_bottom,
                  "objectives": {arm: v.tolist() for arm, v in objective.items()}})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
