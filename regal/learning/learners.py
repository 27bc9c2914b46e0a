"""The learners `python -m regal.train` runs (`config.learner`), one record each in
`registries.LEARNERS`: how a learner trains from a config into a workdir, and which config
fields it never reads (a `--config.FIELD` for one of them is refused in one line)."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import ml_collections

from regal.learning import checkpoint, registries


@dataclasses.dataclass(frozen=True)
class Learner:
  """`train(config, workdir)` trains, writes its report in `workdir` and returns the verdict
  (two lines: what the policy did on unseen graphs, and whether that pays); `ignores`: config
  fields (dotted) it does not read. `policy_file`: the file of a trained workdir that holds
  what steers a search (`checkpoint.save` metadata: model, devices, objective), and
  `guide(workdir, evals)` that guide (`regal.optimize --policy WORKDIR`); None: it trains
  nothing a search can use."""
  name: str
  train: Callable[[ml_collections.ConfigDict, str], str]
  ignores: tuple[str, ...] = ()
  policy_file: str | None = None
  guide: Callable[[str, int | None], Any] | None = None


def register(learner: Learner) -> Learner:
  return registries.LEARNERS.register(learner)


def unregister(name: str) -> Learner:
  return registries.LEARNERS.unregister(name)


def get(name: str) -> Learner:
  return registries.LEARNERS.get(name)


def trained_in(workdir: str) -> tuple[Learner, str] | None:
  """(the learner, its policy file) of a trained workdir, the first registered that finds its
  file there; None where none does."""
  for learner in registries.LEARNERS.values():
    if learner.policy_file and os.path.exists(os.path.join(workdir, learner.policy_file)):
      return learner, os.path.join(workdir, learner.policy_file)
  return None


def _train_prior(config: ml_collections.ConfigDict, workdir: str) -> str:
  from regal.learning import prior_train
  return prior_train.train_and_evaluate(config, workdir)["verdict"]


def _train_mutants(config: ml_collections.ConfigDict, workdir: str) -> str:
  from regal.learning import train_lib
  return train_lib.verdict(train_lib.train_and_evaluate(config, workdir), config.eval_seeds)


def _prior_guide(workdir: str, evals: int | None):
  from regal.learning import prior_guide  # Each guide loads only what its inference needs.
  return prior_guide.LearnedPriorGuide(workdir, evals)


def _mutant_guide(workdir: str, evals: int | None):
  del evals  # REGAL's policy proposes distributions, whatever the budget.
  from regal.learning import policy_runner
  return policy_runner.RegalGuide(workdir)


# What only REGAL's mutant learner reads (the prior learner reads `prior.*` instead).
MUTANTS_ONLY = ("batch_size", "num_steps", "learning_rate", "clip_norm", "entropy_weight",
                "normalize_advantage", "reference_seeds", "eval_seeds", "imitation_steps",
                "imitation_learning_rate", "samples_per_graph", "eval_every",
                "test_filter_pct", "num_eval_graphs", "log_every", "reward", "finetune_from",
                "standin_seconds", "measure_repeats", "policy.placement_bins",
                "policy.priority_bins", "policy.initial_steer")
# The default: a prior over fresh keys by imitation of long runs, then REINFORCE
# (`prior_train`); REGAL's per-gene mutant distributions (`train_lib`).
PRIOR = register(Learner("prior", _train_prior, ignores=MUTANTS_ONLY,
                         policy_file=checkpoint.PRIOR_FILE, guide=_prior_guide))
MUTANTS = register(Learner("mutants", _train_mutants, ignores=("prior",),
                           policy_file=checkpoint.WORKDIR_FILE, guide=_mutant_guide))
