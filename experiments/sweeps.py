"""The named sweeps of `python -m experiments.sweep --sweep NAME`, and their trial functions.

  brkga_tuning  REGAL section 5.2: BRKGA's hyperparameters (mutant Beta(alpha, beta), population
                size, elite and mutant fractions, populations, rho; 648 settings), each scored
                on training graphs of the default synthetic dataset (synchronous model,
                2 devices, 5000 evaluations) as the mean of objective / single-device
                objective (lower is better). --quick: 2 settings, 2 graphs, 500 evaluations.
  selftest      a toy sweep (squares, one trial that fails on purpose) exercising the runner.
"""
from __future__ import annotations

import time

from experiments.sweep_lib import Sweep

SWEEPS = {
    "brkga_tuning": Sweep(
        name="brkga_tuning", trial="experiments.sweeps:brkga_trial",
        grid={"mutant_alpha": [0.5, 1.0, 2.0], "mutant_beta": [0.5, 1.0, 2.0],
              "population_size": [50, 100, 200], "elite_fraction": [0.1, 0.2, 0.3],
              "mutant_fraction": [0.1, 0.2], "num_populations": [1, 2], "rho": [0.6, 0.7]},
        quick_grid={"mutant_alpha": [1.0], "mutant_beta": [1.0], "population_size": [50, 100],
                    "elite_fraction": [0.2], "mutant_fraction": [0.15], "num_populations": [1],
                    "rho": [0.7]},
        description="BRKGA hyperparameters on training graphs (REGAL 5.2)"),
    "selftest": Sweep(
        name="selftest", trial="experiments.sweeps:selftest_trial",
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
  setting compiles once: `regal.rollout`)."""
  import numpy as np
  from datasets import dataset as dataset_lib
  from datasets import devices as devices_lib
  from regal import performance, search
  from regal.configs import brkga_presets
  from regal.rollout import RolloutWorker, Task
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
