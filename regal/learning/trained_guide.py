"""The guide a training workdir holds (`regal.optimize --policy WORKDIR`): its learned prior
(`prior_train`, the default learner) or REGAL's mutant policy (`policy_runner.RegalGuide`)."""
from __future__ import annotations

from regal.learning import policy_runner


def guide_for(workdir: str, evals: int | None = None):
  """The workdir's learned prior (`evals`, the search's budget, scales its q) or its mutant
  policy."""
  from regal.learning import prior_train  # Local: it loads the training machinery.
  if prior_train.holds_prior(workdir):
    return prior_train.LearnedPriorGuide(workdir, evals)
  return policy_runner.RegalGuide(workdir)
