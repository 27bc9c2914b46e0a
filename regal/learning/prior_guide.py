"""A trained prior at inference (`regal.optimize --policy WORKDIR` or `--policy default`): read
from the workdir's `prior.msgpack`, checked against the problem, run as a guide of the search.

Kept apart from the training (`prior_train`) so that a guided run loads only what inference
needs: no optimizer, no rollout pool, no training loop (issue 82: the guide's whole cost per
call counts at equal wall time; `experiments/results/policy_cost`).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import ml_collections
import numpy as np

from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal.learning import checkpoint
from regal.learning import policy as policy_lib
from regal.learning import prior_net, prior_policy
from regal.search import guides

PRIOR_FILE = checkpoint.PRIOR_FILE


def network(config: ml_collections.ConfigDict) -> prior_net.PriorNet:
  """The prior's network for a training config (its devices: `regal.train`'s identical ones)."""
  return prior_net.PriorNet(policy_lib.PolicyConfig(**config.policy.to_dict()),
                            prior_net.num_classes(devices_lib.homogeneous(config.num_devices)))


def load(workdir: str, problem) -> tuple[prior_net.PriorNet, Any, float, Any, int]:
  """(network, parameters, chosen q, its `config.prior`, the budget q was chosen at) of the
  learned prior in `workdir`, checked against the problem (its model, device layout and
  objective must be what the prior was trained for)."""
  path = os.path.join(workdir, PRIOR_FILE)
  meta = checkpoint.read_meta(path)
  checkpoint.check_trained_for(meta, workdir, problem.model, problem.devices, problem.objective)
  config = ml_collections.ConfigDict(meta["config_values"])
  if "q" not in meta:
    raise errors.ConfigError(f"the policy in {workdir} is not calibrated yet: rerun its "
                             f"training to finish")
  params, _ = checkpoint.restore_raw(path)  # No template: `init` costs ~0.4 s.
  return network(config), params, float(meta["q"]), config.prior, int(config.evals)


def holds_prior(workdir: str) -> bool:
  return os.path.exists(os.path.join(workdir, PRIOR_FILE))


def budget_q(q: float, trained_evals: int, evals: int | None) -> float:
  """The prior's q for a search of `evals` evaluations: the calibrated q up to the budget it
  was calibrated at, then falling as trained_evals / evals (the prior's share of the budget
  stays what it was calibrated for; past it the search explores as unguided)."""
  if not evals or evals <= trained_evals:
    return q
  return q * trained_evals / evals


def prior_guide(net, params, q: float, prior: ml_collections.ConfigDict,
                seeds: dict | None = None) -> prior_policy.PriorGuide:
  """The network's prior at `q` as a guide, with the guide settings of `prior` (a training
  config's `prior`); `seeds`: the heuristics' chromosomes when the caller has them."""
  return prior_policy.PriorGuide(
      lambda p: prior_policy.outputs(net, params, p, seeds=seeds), q,
      prior.get("placement", "calibrated"), prior.get("seeds", "none"))


@dataclasses.dataclass(frozen=True)
class LearnedPriorGuide:
  """The learned prior of a training workdir as a guide (`regal.optimize --policy WORKDIR`),
  at the q its validation chose, scaled for budgets past the calibrated one (`budget_q`;
  `evals`: the search's budget, None: the calibrated q). No model evaluation."""
  workdir: str
  evals: int | None = None

  def planned_evaluations(self, problem) -> int:
    del problem
    return 0

  def guide(self, problem, seed: int, before: guides.Guidance) -> guides.Guidance:
    net, params, q, prior, trained_evals = load(self.workdir, problem)
    q = budget_q(q, trained_evals, self.evals)
    guided = prior_guide(net, params, q, prior, before.seeds).guide(problem, seed, before)
    return dataclasses.replace(guided, details={
        **guided.details, "policy": self.workdir, "prior_q": q,
        "steered_genes": int(np.sum(guided.prior_q > 0))})
