"""What the prior tables share: REGAL's protocol problems, the paired measurement of guide arms
against the unguided search, and the rows of the report (`regal_experiments.prior_table`,
`regal_experiments.learned_prior_table`)."""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from regal_datasets import dataset as dataset_lib
from regal_datasets import devices as devices_lib
from regal_experiments import report
from regal.learning import stats
from regal.learning.configs import default as default_config
from regal.scoring import performance
from regal.search import guides

SEED_BASE = 30_000_017  # Search seeds of the prior tables: none of training's or the test table's.


def problems(split: str, max_graphs: int, model: str | None = None,
             num_devices: int | None = None) -> tuple[list[performance.Problem], object]:
  """The `split` graphs of `regal.train`'s default dataset as problems (its model and device
  count unless `model` / `num_devices` say otherwise); the config, those overrides applied."""
  config = default_config.get_config()
  config.model = model or config.model
  config.num_devices = num_devices or config.num_devices
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


def budget(problem: performance.Problem, evals: int | str) -> int:
  """`evals`, or with "default" the problem's default budget (`regal.optimize`'s)."""
  from regal.search import brkga_search
  return brkga_search.default_evals(problem) if evals == "default" else int(evals)


def parse_oracle(value: str) -> int | float:
  """`--oracle`: evaluations of the long run (an int; 0: none) or "Nx", N times each graph's
  budget (a float)."""
  text = value.strip().lower()
  try:
    amount = float(text[:-1]) if text.endswith("x") else int(text)
  except ValueError:
    amount = -1
  if amount < 0 or (text.endswith("x") and amount < 1):
    from regal_datasets import errors
    raise errors.ConfigError(f"--oracle takes a number of evaluations or a multiple of the "
                             f"budget such as 10x, got {value!r}")
  return amount


def oracle_budget(problem: performance.Problem, evals: int | str, oracle: int | float) -> int:
  """The long run's evaluations: `oracle` itself (an int) or that multiple of the budget."""
  return int(oracle) if isinstance(oracle, int) else int(oracle * budget(problem, evals))


def measure(todo: list[performance.Problem], arms: dict, seeds: int, evals: int | str,
            oracle_evals: int | float = 0, spread: float = 0.5, best_known: dict | None = None
            ) -> tuple[dict[str, np.ndarray], dict[str, list[float]]]:
  """({arm: objectives [graphs, seeds]}, {arm: seconds per search}) of every arm on every
  graph and paired seed (`evals`: a budget, or "default": each graph's default). An arm is
  None (unguided), a guide, a callable (graph index -> guide), or an oracle tuple (genes, q)
  around the answer of an unguided long run (`oracle_budget`); `best_known`, a dict, gets
  each graph's long-run objective."""
  objective = {arm: np.zeros((len(todo), seeds)) for arm in arms}
  seconds = {arm: [] for arm in arms}
  for index, problem in enumerate(todo):
    seeded = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
    if oracle_evals:
      long_run = guides.run_guided(problem, oracle_budget(problem, evals, oracle_evals),
                                   SEED_BASE - 1, seeded)
      answer = long_run.best_chromosome
      if best_known is not None:
        best_known[index] = float(long_run.objective)
    for k in range(seeds):
      for arm, prior in arms.items():
        started = time.perf_counter()
        if isinstance(prior, tuple):  # An oracle arm: around this graph's long-run answer.
          prior = OraclePrior(answer, prior[1], spread, prior[0])
        elif callable(prior) and not hasattr(prior, "guide"):
          prior = prior(index)
        guided = seeded if prior is None else prior.guide(problem, SEED_BASE + k, seeded)
        result = guides.run_guided(problem, budget(problem, evals), SEED_BASE + k, guided)
        seconds[arm].append(time.perf_counter() - started)
        objective[arm][index, k] = result.objective
    base = objective["unguided"][index]
    line = ", ".join(f"{arm} {100 * np.mean(1 - objective[arm][index] / base):+.2f}%"
                     for arm in arms if arm != "unguided")
    print(f"{index + 1}/{len(todo)} {problem.graph.name} ({problem.graph.num_ops} ops): {line}",
          flush=True)
  return objective, seconds


def table_rows(objective: dict[str, np.ndarray], seconds: dict[str, list[float]]) -> list[dict]:
  """Per guided arm: mean improvement over graphs, its 95% bootstrap interval, win and loss
  rates against the unguided arm of the same seeds, seconds per search."""
  rows = []
  for arm in objective:
    if arm == "unguided":
      continue
    improvement = 100 * (objective["unguided"] - objective[arm]) / objective["unguided"]
    low, high = stats.bootstrap_interval(improvement, np.random.default_rng(0))
    rows.append({"arm": arm, "mean_improvement_pct": float(improvement.mean(axis=1).mean()),
                 "ci95_pct": [low, high],
                 "win_rate": float((objective[arm] < objective["unguided"]).mean()),
                 "loss_rate": float((objective[arm] > objective["unguided"]).mean()),
                 "seconds": float(np.mean(seconds[arm]))})
  return rows


def markdown_rows(rows: list[dict]) -> list[str]:
  return report.markdown_table(
      ["arm", "improvement % (mean over graphs)", "95% interval", "better", "worse",
       "s per search"],
      [[r["arm"], f"{r['mean_improvement_pct']:+.2f}",
        f"[{r['ci95_pct'][0]:+.2f}, {r['ci95_pct'][1]:+.2f}]", f"{100 * r['win_rate']:.0f}%",
        f"{100 * r['loss_rate']:.0f}%", f"{r['seconds']:.2f}"] for r in rows])


