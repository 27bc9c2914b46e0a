"""The Doppler policy as a guide of the one search (`regal.search.guides`): its best, greedy
and sampled assignments as first-population chromosomes named `doppler/...`; the episodes its
training spends are counted in the search's budget."""
from __future__ import annotations

import dataclasses

from regal.doppler_policy import method
from regal.doppler_policy.options import NAME  # noqa: F401  (re-exported)
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.search import guides


@dataclasses.dataclass(frozen=True)
class DopplerSeeds:
  options: method.DopplerOptions = method.DopplerOptions()

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return method.planned_evaluations(self.options.evals)

  def guide(self, problem: performance.Problem, seed: int,
            before: guides.Guidance) -> guides.Guidance:
    options = self.options
    assignments, spent = method.seed_assignments(problem, options.checkpoint, options.evals,
                                                 options.samples, seed)
    names = [f"{NAME}/best", f"{NAME}/greedy"] + [f"{NAME}/sample{k}"
                                                 for k in range(options.samples)]
    seeds = {name: chromosome_lib.encode(placement, order, problem.layout)
             for name, (placement, order) in zip(names, assignments)}
    return dataclasses.replace(before, seeds={**before.seeds, **seeds},
                               evaluations=before.evaluations + spent)
