"""Training configurations for `python -m regal.train` (ml_collections).

  --config=regal/configs/default.py          the quick default: ~4 minutes on 2 CPU cores
  --config=regal/configs/default.py:paper    REGAL's synthetic setting (hours to days)
"""
from __future__ import annotations

import ml_collections


def get_config(preset: str = "") -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.dataset = "synthetic"
  config.num_train = 64  # Distinct training graphs of the default synthetic dataset.
  config.num_valid = 16
  config.num_test = 16
  config.num_devices = 2
  config.model = "sync"  # REGAL's synthetic task: synchronous model, runtime.
  config.objective = "runtime"
  config.evals = 1000  # Per graph, the 400 feature evaluations included.
  config.batch_size = 4
  config.num_steps = 60
  config.learning_rate = 1e-3
  config.clip_norm = 10.0
  config.entropy_weight = 0.0
  config.normalize_advantage = False
  config.common_random_numbers = False  # Every rollout of a graph uses one seed.
  config.eval_every = 20
  config.num_eval_graphs = 8  # Validation graphs scored at each evaluation.
  config.log_every = 5
  config.num_actors = 2  # Ray actors for rollouts; 0 runs them in the driver.
  config.seed = 0
  config.policy = ml_collections.ConfigDict(dict(
      hidden=32, rounds=2, update="residual", aggregation="sum", placement_bins=2,
      priority_bins=16))
  if preset == "paper":
    config.num_train, config.num_valid, config.num_test = 10000, 1000, 1000
    config.evals = 5000
    config.num_steps = 100000
    config.learning_rate = 1e-4
    config.eval_every = 1000
    config.num_eval_graphs = 200
    config.log_every = 50
    config.num_actors = 10
    config.policy.hidden = 64
    config.policy.rounds = 4
  elif preset:
    raise ValueError(f"unknown preset {preset!r}; known: paper")
  return config
