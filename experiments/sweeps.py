"""The named sweeps of `python -m regal_experiments.sweep --sweep NAME`, and their trial functions.

  brkga_tuning  REGAL section 5.2: BRKGA's hyperparameters (mutant Beta(alpha, beta), population
                size, elite and mutant fractions, populations, rho; 648 settings), each scored
                on training graphs of the default synthetic dataset (synchronous model,
                2 devices, 5000 evaluations) as the mean of objective / single-device
                objective (lower is better). --quick: 2 settings, 2 graphs, 500 evaluations.
  search_tuning the search's defaults (decoder, local improvement; `regal.search`), each
                scored on training data only: the four shared Doppler graphs (Doppler model,
                4 devices), 24 Sinnen task graphs (delay model, their processor counts; the
                stratified sample of seed 0) at the default budget, and 4 training graphs of
                the default synthetic dataset (synchronous model, 2 devices, 5000
                evaluations); score: the mean over the three groups of the mean objective /
                reference (Sinnen: the proven optimum; the others: the best seed's own
                objective, the same for every decoder).
                --quick: 2 settings, 1 graph per group, 2000 evaluations.
  selftest      a toy sweep (squares, one trial that fails on purpose) exercising the runner.
"""
from __future__ import annotations

import time

from regal_experiments.sweep_lib import Sweep

SWEEPS = {
    "brkga_tuning": Sweep(
        name="brkga_tuning", trial="regal_experiments.sweeps:brkga_trial",
        grid={"mutant_alpha": [0.5, 1.0, 2.0], "mutant_beta": [0.5, 1.0, 2.0],
              "population_size": [50, 100, 200], "elite_fraction": [0.1, 0.2, 0.3],
              "mutant_fraction": [0.1, 0.2], "num_populations": [1, 2], "rho": [0.6, 0.7]},
        quick_grid={"mutant_alpha": [1.0], "mutant_beta": [1.0], "population_size": [50, 100],
                    "elite_fraction": [0.2], "mutant_fraction": [0.15], "num_populations": [1],
                    "rho": [0.7]},
        description="BRKGA hyperparameters on training graphs (REGAL 5.2)"),
    "search_tuning": Sweep(
        name="search_tuning", trial="regal_experiments.sweeps:search_trial",
        grid={"decoder": ["direct", "list"], "climbers": [0, 2, 6],
              "cluster_fraction": [0.5, 0.8]},
        quick_grid={"decoder": ["direct"], "climbers": [0, 2]},
        fixed={"improve_interval": 1}, num_cpus=2.0,
        description="search defaults on training graphs (Doppler, Sinnen, synthetic train)"),
    "selftest": Sweep(
        name="selftest", trial="regal_experiments.sweeps:selftest_trial",
        grid={"x": [-1, 0, 1, 2, 3, 4, 5, 6]}, quick_grid={"x": [-1, 0, 1, 2, 3, 4, 5, 6]},
        fixed={"sleep": 0.0}, num_cpus=0.5,
        description="the runner's own check: x -> x^2, x = -1 fails"),
}


def selftest_trial(params: dict, quick: bool) -> dict:
  time.sleep(params.get("sleep", 0.0))
  if params["x"] < 0:
    raise ValueError(f"negative x {params['x']} (this trial fails on purpose)")
  return {"square": params["x"] ** 2}


def brkga_trial(params: dict, quick: bool) -> dict:
  """Mean objective / single-device objective of BRKGA with these settings on training
  graphs (the same graphs and seeds for every setting; every graph padded to one shape, so a
  setting compiles once: `regal.learning.rollout`)."""
  import numpy as np

  from regal_datasets import dataset as dataset_lib
  from regal_datasets import devices as devices_lib
  from regal import search
  from regal.learning.rollout import RolloutWorker, Task
  from regal.scoring import performance
  from regal.search import brkga_presets
  graphs = dataset_lib.load_or_build_synthetic()["train"][:2 if quick else 8]
  evals = 500 if quick else 5000
  settings = brkga_presets.to_params(params)
  problems = [performance.Problem(g, devices_lib.homogeneous(2), model="sync") for g in graphs]
  worker = RolloutWorker(problems, evals)
  tasks = [Task(i, np.full(p.layout.size, float(params["mutant_alpha"])),
                np.full(p.layout.size, float(params["mutant_beta"])), seed=i, evals=evals,
                params=settings) for i, p in enumerate(problems)]
  objectives = worker.run(tasks)
  ratios = [value / performance.score_reference(p, search.single_device_seed(p))[0]
            for value, p in zip(objectives, problems)]
  return {"score": float(np.mean(ratios)), "ratios": [float(r) for r in ratios],
          "graphs": len(graphs), "evals": evals}


def search_trial(params: dict, quick: bool) -> dict:
  """The mean over three groups of training graphs of objective / reference (module doc) for
  BRKGA with the default preset's parameters and these search settings."""
  import os

  import numpy as np

  from regal_datasets import benchmarks
  from regal_datasets import dataset as dataset_lib
  from regal_datasets import devices as devices_lib
  from regal_datasets import io as graph_io
  from regal import search
  from regal.scoring import performance
  from regal.baselines import heuristics
  from regal.search import brkga_presets
  shared = benchmarks.SHARED_GRAPHS
  values = {**brkga_presets.search_values("default"), **params}
  settings = brkga_presets.settings_from_values(values)

  def solve(problem, evals=None):
    """(the search's own objective, the best seed's objective as the seed is: read by the
    direct decoder, whichever decoder the search uses)."""
    seeds = heuristics.seeds(problem)
    budget = 2000 if quick else (evals or search.default_evals(problem))
    result = search.optimize(settings.evaluator(problem), budget, seed=0, seeds=seeds,
                             settings=settings)
    best_seed = min(performance.score_reference(problem, c)[0] for c in seeds.values())
    return result.objective, best_seed

  doppler_files = sorted(os.listdir(os.path.join(shared, "doppler")))[:1 if quick else None]
  doppler = []
  for name in doppler_files:
    graph = graph_io.load_graph(os.path.join(shared, "doppler", name))
    value, seed_value = solve(performance.Problem(graph, devices_lib.homogeneous(4),
                                                  model="doppler"))
    doppler.append(value / seed_value)
  sinnen = []
  for instance in benchmarks.stratified(benchmarks.sinnen_instances(shared),
                                              1 if quick else 24, seed=0):
    graph = graph_io.load_graph(instance["path"])
    value, _ = solve(performance.Problem(graph, devices_lib.homogeneous(
        instance["processors"]), model="delay"))
    sinnen.append(value / instance["optimum"])
  synthetic = []
  for graph in dataset_lib.load_or_build_synthetic()["train"][:1 if quick else 4]:
    value, seed_value = solve(performance.Problem(graph, devices_lib.homogeneous(2),
                                                  model="sync"), evals=5000)
    synthetic.append(value / seed_value)
  groups = {"doppler": float(np.mean(doppler)), "sinnen": float(np.mean(sinnen)),
            "synthetic": float(np.mean(synthetic))}
  return {"score": float(np.mean(list(groups.values()))), **groups,
          "doppler_ratios": doppler, "sinnen_ratios": sinnen, "synthetic_ratios": synthetic}


# Which training group decides each model's settings: the WC model is the Doppler paper's
# asynchronous model, so the Doppler graphs (asynchronous, Doppler model) speak for it.
DECODER_GROUPS = {"doppler": "doppler", "wc": "doppler", "delay": "sinnen", "sync": "synthetic"}


def search_preset(records: list[dict]) -> tuple[dict, dict]:
  """(setting, how it was chosen) of `search_tuning`'s finished trials: for each model, the
  parameters of the trial that did best on the model's training group (`DECODER_GROUPS`);
  a parameter every model agrees on is stored once, else as {model: value}."""
  winners = {model: min(records, key=lambda r: r["result"][group])
             for model, group in DECODER_GROUPS.items()}
  setting = {}
  for key in sorted({k for r in records for k in r["params"]}):
    values = {model: r["params"][key] for model, r in winners.items()}
    setting[key] = (next(iter(values.values())) if len(set(map(str, values.values()))) == 1
                    else values)
  evidence = {model: {"group": group, "trial": winners[model]["params"],
                      "score": winners[model]["result"][group]}
              for model, group in DECODER_GROUPS.items()}
  return setting, {"chosen_per_model": evidence}
