"""The guide a training workdir holds (`regal.optimize --policy WORKDIR`): its learned prior
(`prior_guide`, the default learner's) or REGAL's mutant policy (`policy_runner.RegalGuide`).
Each loads only what its inference needs."""
from __future__ import annotations

from regal.learning import prior_guide


def guide_for(workdir: str, evals: int | None = None):
  """The workdir's learned prior (`evals`, the search's budget, scales its q) or its mutant
  policy."""
  if prior_guide.holds_prior(workdir):
    return prior_guide.LearnedPriorGuide(workdir, evals)
  from regal.learning import policy_runner  # Local: REINFORCE's machinery.
  return policy_runner.RegalGuide(workdir)
