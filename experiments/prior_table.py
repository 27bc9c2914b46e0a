r"""Does a parameter-free prior pay? The bottom-level prior against the same search unguided.

  python -m experiments.prior_table                    # validation graphs, q 0.1, 0.3, 0.6
  python -m experiments.prior_table --q 0.6 --split train      # confirm on other graphs
  python -m experiments.prior_table --oracle 20000     # + the upper bound of a long run's answer
  python -m experiments.prior_table --quick            # 4 graphs, 2 seeds, q 0.3

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

from datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import dataclasses  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from datasets import dataset as dataset_lib  # noqa: E402
from datasets import devices as devices_lib  # noqa: E402
from datasets import errors  # noqa: E402
from experiments import command, report  # noqa: E402
from regal.learning import stats  # noqa: E402
from regal.learning.configs import default as default_config  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.search import guides  # noqa: E402

SEED_BASE = 30_000_017  # Search seeds of this table: none of training's or the test table's.

_QS = flags.DEFINE_list("q", ["0.1", "0.3", "0.6"], "Prior probabilities to measure.")
_SPREAD = flags.DEFINE_float("spread", 0.5, "The prior's spread (logit space).",
                             lower_bound=1e-3, upper_bound=100.0)
_EVALS = flags.DEFINE_integer("evals", 5000, "Evaluations per search (REGAL's protocol: 5,000).",
                              lower_bound=100, upper_bound=10 ** 8)
_SEEDS = flags.DEFINE_integer("seeds", 5, "Paired search seeds per graph.", lower_bound=1,
                              upper_bound=100)
_MAX_GRAPHS = flags.DEFINE_integer("max_graphs", 16, "Validation graphs (0: all).",
                                   lower_bound=0, upper_bound=100_000)
_SPLIT = flags.DEFINE_enum("split", "valid", ["valid", "train"], "Which graphs: validation "
                           "(where q is chosen), or training graphs to confirm a choice on "
                           "graphs it was not made on (never the test split).")
_ORACLE = flags.DEFINE_integer("oracle", 0, "Also the upper bound: priors around the answer "
                               "of an unguided run of this many evaluations on the same graph "
                               "(its order, and its order and placement; not counted in the "
                               "budget: an oracle, not a guide). 0: none.",
                               lower_bound=0, upper_bound=10 ** 8)
_QUICK = flags.DEFINE_bool("quick", False, "4 graphs, 2 seeds, q 0.3.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "prior_table"),
                           "Folder of the report.")


def problems(split: str, max_graphs: int) -> tuple[list[performance.Problem], object]:
  config = default_config.get_config()
  dataset = dataset_lib.for_training(config.dataset, config.num_train, config.num_valid,
                                     config.num_test)
  devices = devices_lib.homogeneous(config.num_devices)
  graphs = dataset[split][:max_graphs or None]
  return [performance.Problem(g, devices, model=config.model, objective=config.objective)
          for g in graphs], config


@dataclasses.dataclass(frozen=True)
class OraclePrior:
  """The upper bound a prior could reach: fresh keys drawn, with probability `q`, around a
  long run's answer on the same graph (`genes`: "order", its priority genes; "all", its
  priority and placement genes). The long run's evaluations are not counted."""
  answer: np.ndarray
  q: float
  spread: float
  genes: str

  def guide(self, problem: performance.Problem, seed: int,
            before: guides.Guidance) -> guides.Guidance:
    del seed
    layout = problem.layout
    mean = np.asarray(self.answer, np.float32).copy()
    steered = np.zeros(layout.size, bool)
    steered[layout.priority_slice] = True
    if self.genes == "all":
      steered[layout.affinity_slice] = True
    return dataclasses.replace(before, prior_q=np.where(steered, self.q, 0).astype(np.float32),
                               prior_mean=mean,
                               prior_spread=np.full(layout.size, self.spread, np.float32))


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
  todo, config = problems(_SPLIT.value, max_graphs)
  arms = {"unguided": None, **{f"q={q:g}": guides.BottomLevelPrior(q, _SPREAD.value)
                               for q in qs}}
  if _ORACLE.value:
    for q in qs:
      arms.update({f"oracle order q={q:g}": ("order", q), f"oracle all q={q:g}": ("all", q)})
  objective = {arm: np.zeros((len(todo), seeds)) for arm in arms}
  seconds = {arm: [] for arm in arms}
  for index, problem in enumerate(todo):
    seeded = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
    if _ORACLE.value:
      answer = guides.run_guided(problem, _ORACLE.value, SEED_BASE - 1, seeded).best_chromosome
    for k in range(seeds):
      for arm, prior in arms.items():
        started = time.perf_counter()
        if isinstance(prior, tuple):  # An oracle arm: around this graph's long-run answer.
          prior = OraclePrior(answer, prior[1], _SPREAD.value, prior[0])
        guided = seeded if prior is None else prior.guide(problem, SEED_BASE + k, seeded)
        result = guides.run_guided(problem, evals, SEED_BASE + k, guided)
        seconds[arm].append(time.perf_counter() - started)
        objective[arm][index, k] = result.objective
    base = objective["unguided"][index]
    line = ", ".join(f"{arm} {100 * np.mean(1 - objective[arm][index] / base):+.2f}%"
                     for arm in arms if arm != "unguided")
    print(f"{index + 1}/{len(todo)} {problem.graph.name} ({problem.graph.num_ops} ops): {line}",
          flush=True)
  rows = []
  for arm in arms:
    if arm == "unguided":
      continue
    improvement = 100 * (objective["unguided"] - objective[arm]) / objective["unguided"]
    low, high = stats.bootstrap_interval(improvement, np.random.default_rng(0))
    rows.append({"arm": arm, "mean_improvement_pct": float(improvement.mean(axis=1).mean()),
                 "ci95_pct": [low, high],
                 "win_rate": float((objective[arm] < objective["unguided"]).mean()),
                 "loss_rate": float((objective[arm] > objective["unguided"]).mean()),
                 "seconds": float(np.mean(seconds[arm]))})
  lines, facts = report.header("The bottom-level prior against the unguided search",
                               "experiments.prior_table", "quick" if _QUICK.value else "full")
  body = [f"{len(todo)} {_SPLIT.value} graphs of `{config.dataset}` ({config.model} model, "
          f"{config.objective}, {config.num_devices} devices), {seeds} paired seeds each, "
          f"{evals:,} evaluations per search, prior spread {_SPREAD.value:g}; unguided "
          f"{np.mean(seconds['unguided']):.2f} s per search.", ""]
  body += report.markdown_table(
      ["arm", "improvement % (mean over graphs)", "95% interval", "better", "worse",
       "s per search"],
      [[r["arm"], f"{r['mean_improvement_pct']:+.2f}",
        f"[{r['ci95_pct'][0]:+.2f}, {r['ci95_pct'][1]:+.2f}]", f"{100 * r['win_rate']:.0f}%",
        f"{100 * r['loss_rate']:.0f}%", f"{r['seconds']:.2f}"] for r in rows])
  if _ORACLE.value:
    body += ["", f"Oracle arms (upper bounds, not guides): priors around the answer of an "
             f"unguided {_ORACLE.value:,}-evaluation run of the same graph, not counted."]
  guides_only = [r for r in rows if not r["arm"].startswith("oracle")]
  best = max(guides_only, key=lambda r: r["mean_improvement_pct"])
  pays = best["ci95_pct"][0] > 0
  body += ["", f"Verdict: the best arm, {best['arm']}, is {best['mean_improvement_pct']:+.2f}% "
           f"against the unguided search; "
           + ("its interval excludes 0: it pays." if pays else
              "its interval holds 0: no evidence it pays.")]
  name = ("prior_table" + ("" if _SPLIT.value == "valid" else f"_{_SPLIT.value}")
          + ("" if _SPREAD.value == 0.5 else f"_spread{_SPREAD.value:g}")
          + (f"_oracle{_ORACLE.value}" if _ORACLE.value else ""))
  report.publish(_OUT.value, name, lines, body,
                 {**facts, "evals": evals, "seeds": seeds, "graphs": [p.graph.name for p in todo],
                  "spread": _SPREAD.value, "rows": rows, "pays": pays,
                  "objectives": {arm: v.tolist() for arm, v in objective.items()}})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
