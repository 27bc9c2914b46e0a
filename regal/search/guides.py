"""The one search and what may steer it.

`run_guided(problem, evals, seed, guidance)` is the search every caller runs: `regal.optimize
--method brkga`, REGAL's training rollouts and validation (`regal.learning.rollout`), the
learning table and the sweeps. It is `brkga_search.optimize` with the preset's parameters and
search settings for the problem's model (decoder, local moves), the guidance's chromosomes in
the first population and its per-gene mutant distributions, on the bucketed compiled search
(one compile per size bucket, guided or not).

A guide turns a problem into `Guidance`: heuristic seeds (`HeuristicSeeds`: the list
schedulers, GP, one device), a placement's group split (`GroupSplit`), the Doppler policy's
assignments (`regal.doppler_policy.guide.DopplerSeeds`), the REGAL policy
(`regal.learning.policy_runner.RegalGuide`: mutant distributions from a GNN over the graph and
its seeds). Guides live beside what they wrap and import this module, never the reverse.
Guides chain: each refines the guidance of the one before. Every model evaluation a guide
spends is in `Guidance.evaluations` and comes out of the run's budget, so a guided search never
evaluates more than an unguided one at the same `evals`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol, Sequence

import numpy as np

import brkga
from datasets import analysis, cli, errors
from datasets import devices as devices_lib
from regal.baselines import heuristics
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.search import brkga_presets
from regal.search import brkga_search
from regal.search import progress as search_progress


@dataclasses.dataclass(frozen=True)
class Guidance:
  """What a guide gives the search, on the problem's own chromosome layout."""
  seeds: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # First population.
  mutant_alpha: np.ndarray | None = None  # [layout.size] Beta parameters; None: the preset's.
  mutant_beta: np.ndarray | None = None
  evaluations: int = 0  # Model evaluations spent producing it (counted in the budget).
  details: dict[str, Any] = dataclasses.field(default_factory=dict)
  # A prior over fresh keys (`brkga.Params.prior_q`), [layout.size] each; None: no prior.
  prior_q: np.ndarray | None = None
  prior_mean: np.ndarray | None = None
  prior_spread: np.ndarray | None = None


class Guide(Protocol):
  def planned_evaluations(self, problem: performance.Problem) -> int:
    """The model evaluations `guide` will spend (known before it runs)."""

  def guide(self, problem: performance.Problem, seed: int, before: Guidance) -> Guidance:
    """`before` refined."""


@dataclasses.dataclass(frozen=True)
class HeuristicSeeds:
  """The cheap heuristics' assignments (`baselines.heuristics`) as first-population
  chromosomes, named by heuristic; they spend no model evaluation."""
  names: tuple[str, ...] = heuristics.HEURISTICS

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return 0

  def guide(self, problem: performance.Problem, seed: int, before: Guidance) -> Guidance:
    del seed  # Deterministic.
    return dataclasses.replace(before, seeds={**before.seeds,
                                              **heuristics.seeds(problem, self.names)})


@dataclasses.dataclass(frozen=True)
class GroupSplit:
  """A placement's link group of every op (`devices.link_groups`) as one first-population
  chromosome, the device inside each op's group drawn with the run's seed, priorities in
  topological order. On devices in groups, which ops share a group is what separates the
  basins of good and poor answers (issue 37's NVLink graphs); a search started from a good
  answer's split finds the devices inside the groups itself. Spends no model evaluation."""
  placement: tuple[int, ...]
  name: str = "group_split"

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return 0

  def guide(self, problem: performance.Problem, seed: int, before: Guidance) -> Guidance:
    chromosome = group_split_chromosome(problem, np.asarray(self.placement),
                                        np.random.default_rng(seed))
    return dataclasses.replace(before, seeds={**before.seeds, self.name: chromosome})


def group_split_chromosome(problem: performance.Problem, placement: np.ndarray,
                           rng: np.random.Generator) -> np.ndarray:
  """`GroupSplit`'s chromosome: each op on a device drawn uniformly from `placement`'s group
  of the op, in topological order."""
  num_ops, devices = problem.graph.num_ops, problem.devices
  placement = np.asarray(placement)
  if placement.shape != (num_ops,) or not np.issubdtype(placement.dtype, np.integer) or (
      num_ops and not 0 <= placement.min() <= placement.max() < devices.num_devices):
    raise errors.ConfigError(f"a group split needs a device in 0..{devices.num_devices - 1} "
                             f"for each of the {num_ops} ops")
  group = devices_lib.link_groups(devices)
  members = [np.flatnonzero(group == g) for g in range(group.max() + 1)]
  drawn = np.array([rng.choice(members[group[d]]) for d in placement], dtype=int)
  return chromosome_lib.encode(drawn, problem.graph.topological_order, problem.layout)


@dataclasses.dataclass(frozen=True)
class BottomLevelPrior:
  """A parameter-free prior on the priority genes: each fresh key's priority gene is, with
  probability `q`, drawn around the key that ranks the op by its bottom level (HEFT's upward
  rank: the longest path to an exit, mean compute and transfer times), `spread` wide in
  logit space; placement and transfer genes are left alone. Spends no model evaluation.
  Issue 68's oracle: priority priors alone took +3.8% at 5K evaluations on training graphs,
  this rank +2.2%."""
  q: float = 0.3
  spread: float = 0.5

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return 0

  def guide(self, problem: performance.Problem, seed: int, before: Guidance) -> Guidance:
    del seed  # Deterministic.
    layout = problem.layout
    levels = analysis.mean_bottom_levels(problem.graph, problem.devices)
    order = np.lexsort((np.arange(layout.num_ops), -np.asarray(levels)))
    mean = np.full(layout.size, 0.5, np.float32)
    mean[layout.priority_slice] = chromosome_lib.order_priorities(order)
    q = np.zeros(layout.size, np.float32)
    q[layout.priority_slice] = self.q
    return dataclasses.replace(before, prior_q=q, prior_mean=mean,
                               prior_spread=np.full(layout.size, self.spread, np.float32))


PRIORS = {"none": None, "bottom_level": BottomLevelPrior()}  # `regal.optimize --prior`.


def arm_of(seed_name: str) -> str:
  """The guide arm a seed chromosome's name belongs to ('doppler/greedy' -> 'doppler')."""
  return seed_name.split("/")[0]


def guidance(problem: performance.Problem, seed: int, guides: Sequence[Guide]) -> Guidance:
  """The guides' guidance, in chain order."""
  result = Guidance()
  for one in guides:
    result = one.guide(problem, seed, result)
  return result


def check_budget(problem: performance.Problem, evals: int, guides: Sequence[Guide],
                 preset: str = brkga_presets.DEFAULT) -> None:
  """Refuses, before any guide runs, a budget that leaves the search less than one
  population after the guides' planned evaluations."""
  population = search_params(problem, evals, preset).population_size
  planned = sum(one.planned_evaluations(problem) for one in guides)
  if evals - planned < population:
    raise errors.ConfigError(f"--evals {evals} leaves {evals - planned} evaluations for BRKGA "
                             f"after the guides spend {planned}; it needs at least one "
                             f"population ({population})")


def search_params(problem: performance.Problem, evals: int,
                  preset: str = brkga_presets.DEFAULT):
  """The preset's BRKGA parameters for the searched layout (a size bucket on native
  engines: one compile per bucket) and the whole budget `evals`."""
  return brkga_presets.params(preset, brkga_search.search_layout(problem).size, evals=evals,
                              restarts=brkga_search.restarts_for(problem))


def run_guided(problem: performance.Problem, evals: int, seed: int, guided: Guidance,
               preset: str = brkga_presets.DEFAULT, decoder: str | None = None,
               time_limit: float | None = None,
               progress: Callable[[str], None] | None = None,
               shape: brkga_search.PaddedShape | None = None,
               should_stop: Callable[[], bool] | None = None,
               settings: brkga_search.SearchSettings | None = None,
               params: brkga.Params | None = None) -> brkga_search.SearchResult:
  """The search with `evals` evaluations in all, the guidance's included. `shape`: a padded
  shape shared by many graphs (training: one compile), else the problem's own buckets;
  `should_stop()`: ends it early at a generation boundary (an exact solver's proof);
  `settings` / `params`: in place of the preset's (an A/B of settings)."""
  if params is None:
    params = search_params(problem, evals, preset)
  if settings is None:
    settings = brkga_presets.search_settings(preset, decoder=decoder, model=problem.model)
  left = evals - guided.evaluations
  if left < params.population_size:
    raise errors.ConfigError(f"--evals {evals} leaves {left} evaluations for BRKGA after the "
                             f"guides spent {guided.evaluations}; it needs at least one "
                             f"population ({params.population_size})")
  if guided.mutant_alpha is not None:
    params = params.replace(mutant_alpha=np.asarray(guided.mutant_alpha, np.float32),
                            mutant_beta=np.asarray(guided.mutant_beta, np.float32))
  if guided.prior_q is not None:
    params = params.replace(prior_q=np.asarray(guided.prior_q, np.float32),
                            prior_mean=np.asarray(guided.prior_mean, np.float32),
                            prior_spread=np.asarray(guided.prior_spread, np.float32))
  with cli.stoppable():  # From the line on: a signal prompted by it stops the search.
    if progress is not None:
      progress(f"searching: BRKGA on {problem.graph.num_ops} ops, {left} evaluations "
               f"(population {params.population_size}, {len(guided.seeds) + 1} seeds); SIGINT "
               f"(Ctrl-C) stops it and keeps the best found")
    live = None if progress is None else search_progress.SearchProgress(left, time_limit)
    try:
      result = brkga_search.optimize(problem, evals=left, seed=seed, params=params,
                                     seeds=guided.seeds, settings=settings,
                                     time_limit=time_limit, shape=shape,
                                     should_stop=should_stop, progress=live)
    except ValueError as error:  # e.g. a budget below one population
      raise errors.ConfigError(str(error)) from None
  return dataclasses.replace(result, evaluations=result.evaluations + guided.evaluations)
