"""Running a trained REGAL policy on any graph (`regal.optimize --policy WORKDIR`).

`RegalGuide` is a guide of the one search (`regal.search.guides`): features of the graph and
of its heuristic seeds (no model evaluations), the policy's most likely mutant
distributions (the neutral action leaves a gene uniform), then the search with the whole
budget. Training runs the same features, the same readout and the same search.
"""
from __future__ import annotations

import dataclasses
import os

import jax
import ml_collections
import numpy as np

from regal_datasets import errors
from regal_datasets.padding import bucket_size
from regal.learning import checkpoint
from regal.learning import features as features_lib
from regal.learning import policy as policy_lib
from regal.learning import reinforce
from regal.baselines import heuristics
from regal.scoring import performance
from regal.search import guides


def trained_config(meta: dict, workdir: str, problem: performance.Problem
                   ) -> ml_collections.ConfigDict:
  """The training config in a checkpoint's metadata, checked against the problem
  (`checkpoint.check_trained_for`: its model, device layout and objective's features)."""
  checkpoint.check_trained_for(meta, workdir, problem.model, problem.devices,
                               problem.objective)
  return ml_collections.ConfigDict(meta["config_values"])


def load(workdir: str, problem: performance.Problem):
  """(policy config, policy params) of the best-validated policy in `workdir` (else its last
  checkpoint's), checked against the
  problem (device count and feature width must match what the policy was trained on)."""
  path = checkpoint.in_workdir(workdir)
  if not os.path.exists(path):
    raise errors.ConfigError(f"no trained policy in {workdir} ({checkpoint.WORKDIR_FILE} "
                             f"missing)")
  meta = checkpoint.read_meta(path)
  if "config_values" not in meta:
    raise errors.ConfigError(f"{path}: checkpoint written without its config")
  config = trained_config(meta, workdir, problem)
  policy_config = policy_lib.PolicyConfig(**config.policy.to_dict())
  example = policy_lib.batch_graphs([features_lib.graph_features(problem)],
                                    problem.graph.num_ops + 1, max(problem.graph.num_edges, 1))
  template = reinforce.state_template(example, config.num_devices, policy_config,
                                      reinforce.TrainConfig())
  best = checkpoint.best_in_workdir(workdir)  # The best-validated policy, when there is one.
  state, _ = checkpoint.restore(best if os.path.exists(best) else path, template)
  return policy_config, state.policy_params


def feature_seeds(problem: performance.Problem) -> dict[str, np.ndarray]:
  """The seeds the policy's features are read from: the default heuristic arms, whatever
  arms the search itself is given (so features match training's)."""
  return heuristics.seeds(problem)


def padded_graph(problem: performance.Problem, seeds: dict[str, np.ndarray]):
  """The problem's features as a batch of one, padded to size buckets (one compile per
  bucket)."""
  graph = problem.graph
  return policy_lib.batch_graphs([features_lib.graph_features(
      problem, features_lib.seed_features(problem, seeds))], bucket_size(graph.num_ops + 1),
      bucket_size(max(graph.num_edges, 1)))


_APPLY = {}


def mutant_distributions(problem: performance.Problem, policy_config: policy_lib.PolicyConfig,
                         params) -> tuple[np.ndarray, np.ndarray]:
  """(alpha, beta) per gene: the policy's most likely actions on this graph."""
  key = (policy_config, problem.devices.num_devices)
  if key not in _APPLY:
    _APPLY[key] = jax.jit(policy_lib.Policy(policy_config, problem.devices.num_devices).apply)
  logits = _APPLY[key](params, padded_graph(problem, feature_seeds(problem)))
  alpha, beta = policy_lib.mutant_distributions(policy_lib.greedy(logits), problem.layout,
                                                policy_config)
  return np.asarray(alpha), np.asarray(beta)


@dataclasses.dataclass(frozen=True)
class RegalGuide:
  """A trained policy's mutant distributions (`regal.optimize --policy WORKDIR`)."""
  workdir: str

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return 0  # Features come from the graph and its heuristic seeds.

  def guide(self, problem: performance.Problem, seed: int,
            before: guides.Guidance) -> guides.Guidance:
    del seed  # The readout is deterministic.
    policy_config, params = load(self.workdir, problem)
    alpha, beta = mutant_distributions(problem, policy_config, params)
    steered = int(np.sum((alpha != 1) | (beta != 1)))
    return dataclasses.replace(before, mutant_alpha=alpha, mutant_beta=beta, details={
        **before.details, "policy": self.workdir, "steered_genes": steered})
