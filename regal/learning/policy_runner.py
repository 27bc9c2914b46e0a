"""Running a trained REGAL policy on any graph (`regal.optimize --policy WORKDIR`).

REGAL's search on one graph: BRKGA features from a 400-evaluation uniform run, the policy's
greedy (most likely) mutant distributions, then BRKGA with those distributions and the rest of
the budget (the paper counts both parts against it).
"""
from __future__ import annotations

import os

import jax
import ml_collections
import numpy as np

from datasets import errors
from regal.learning import checkpoint
from regal.learning import features as features_lib
from regal.learning import policy as policy_lib
from regal.learning import reinforce

FEATURE_EVALS = features_lib.BRKGA_FEATURE_EVALS  # What `mutant_distributions` spends.
from regal.scoring import performance


def load(workdir: str, problem: performance.Problem):
  """(policy config, policy params) of the checkpoint in `workdir`, checked against the
  problem (device count and feature width must match what the policy was trained on)."""
  path = checkpoint.in_workdir(workdir)
  if not os.path.exists(path):
    raise errors.ConfigError(f"no trained policy in {workdir} ({checkpoint.WORKDIR_FILE} "
                             f"missing)")
  meta = checkpoint.read_meta(path)
  if "config_values" not in meta:
    raise errors.ConfigError(f"{path}: checkpoint written without its config")
  config = ml_collections.ConfigDict(meta["config_values"])
  if config.num_devices != problem.devices.num_devices:
    raise errors.ConfigError(f"the policy in {workdir} was trained for {config.num_devices} "
                             f"devices, the problem has {problem.devices.num_devices}")
  if (config.objective == "memory") != (problem.objective == "memory"):
    raise errors.ConfigError(f"the policy in {workdir} was trained for objective "
                             f"{config.objective}; its features differ from {problem.objective}'s")
  policy_config = policy_lib.PolicyConfig(**config.policy.to_dict())
  example = policy_lib.batch_graphs([features_lib.graph_features(problem)],
                                    problem.graph.num_ops + 1, max(problem.graph.num_edges, 1))
  template = reinforce.init_state(jax.random.key(0), example, config.num_devices,
                                  policy_config, reinforce.TrainConfig())
  state, _ = checkpoint.restore(path, template)
  return policy_config, state.policy_params


def mutant_distributions(problem: performance.Problem, policy_config: policy_lib.PolicyConfig,
                         params, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
  """(alpha, beta) per gene from the policy on this graph, and the evaluations spent on its
  BRKGA features."""
  part = features_lib.run_brkga_features(problem, seed)
  graph = policy_lib.batch_graphs([features_lib.graph_features(problem, part)],
                                  problem.graph.num_ops + 1, max(problem.graph.num_edges, 1))
  logits = policy_lib.Policy(policy_config, problem.devices.num_devices).apply(params, graph)
  alpha, beta = policy_lib.mutant_distributions(policy_lib.greedy(logits), problem.layout,
                                                policy_config)
  return np.asarray(alpha), np.asarray(beta), FEATURE_EVALS
