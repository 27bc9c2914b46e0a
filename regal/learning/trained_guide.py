"""The guide a training workdir holds (`regal.optimize --policy WORKDIR`): that of the learner
whose policy file it holds (`learners.trained_in`: the learned prior, `prior_guide`; REGAL's
mutant policy, `policy_runner.RegalGuide`; or one registered elsewhere). Each loads only what
its inference needs."""
from __future__ import annotations

from regal_datasets import errors
from regal.learning import learners


def guide_for(workdir: str, evals: int | None = None):
  """The workdir's trained guide (`evals`: the search's budget, which may scale it)."""
  found = learners.trained_in(workdir)
  if found is None or found[0].guide is None:
    raise errors.ConfigError(f"no trained policy in {workdir}")
  return found[0].guide(workdir, evals)
