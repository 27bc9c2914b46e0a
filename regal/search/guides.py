"""The one search and what may steer it.

`run_guided(problem, evals, seed, guidance)` is the search every caller runs: `regal.optimize
--method brkga`, REGAL's training rollouts and validation (`regal.learning.rollout`), the
learning table and the sweeps. It is `brkga_search.optimize` as a `SearchPlan` says
(`plan_search`: what scores the problem, built once, the preset's search settings for the
problem's model (decoder, local moves) and BRKGA's parameters), with the guidance's chromosomes
in the first population and its per-gene mutant distributions, on the bucketed compiled search
(one compile per size bucket, guided or not).

A guide turns a problem into `Guidance`: heuristic seeds (`HeuristicSeeds`: the list
schedulers, GP, one device), a placement's group split (`GroupSplit`), islands confined to
splits of the ops among link groups (`GroupIsland`), the Doppler policy's
assignments (`regal.doppler_policy.guide.DopplerSeeds`), the REGAL policy
(`regal.learning.policy_runner.RegalGuide`: mutant distributions from a GNN over the graph and
its seeds). Guides live beside what they wrap and import this module, never the reverse.
Guides chain: each refines the guidance of the one before. Every model evaluation a guide
spends is in `Guidance.evaluations` and comes out of the run's budget, so a guided search never
evaluates more than an unguided one at the same `evals`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Protocol, Sequence

import numpy as np

import regal_brkga as brkga
from regal_datasets import analysis, cli, errors
from regal_datasets import devices as devices_lib
from regal.baselines import data_parallel, heuristics
from regal.baselines import partition
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.search import brkga_presets
from regal.search import brkga_search
from regal.search import progress as search_progress
from regal.search import registries


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
  single_device: bool = True  # The search's own one-device seed (a confined island: none).


class Guide(Protocol):
  """A guide; one that runs searches of its own may also refuse a run budget too small for them
  (`check_evals(problem, evals, population)`, called by `check_budget` before any guide runs)."""

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
class AlignedShards:
  """A sharded graph's blocks placed by shard index (`baselines.data_parallel`) as one
  first-population chromosome: the assignment `--shard` measured its split with. Spends no
  model evaluation."""
  name: str = "aligned_shards"

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return 0

  def guide(self, problem: performance.Problem, seed: int, before: Guidance) -> Guidance:
    del seed  # Deterministic.
    placement, order = data_parallel.aligned_assignment(problem.graph, problem.devices)
    chromosome = chromosome_lib.encode(placement, order, problem.layout)
    return dataclasses.replace(before, seeds={**before.seeds, self.name: chromosome})


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


def confinement_prior(problem: performance.Problem, op_group: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """A prior (`Guidance.prior_q` / `prior_mean` / `prior_spread`) that keeps every fresh key's
  placement inside its op's link group `op_group` [o]: each affinity gene of a device outside
  the group is always drawn at ~0 (q = 1, no spread), below every gene inside it, which keep
  their own draws. Crossover copies genes, so a population that starts confined stays so;
  only the climbs' moves can leave the groups."""
  layout = problem.layout
  device_group = devices_lib.link_groups(problem.devices)
  outside = device_group[None, :] != np.asarray(op_group)[:, None]  # [o, d]
  q = np.zeros(layout.size, np.float32)
  q[layout.affinity_slice] = outside.ravel()
  mean = np.where(q > 0, 1e-6, 0.5).astype(np.float32)
  return q, mean, np.zeros(layout.size, np.float32)


SPLITS = ("stage_balanced", "metis")  # `GroupIsland.split`'s parameter-free sources.


@dataclasses.dataclass(frozen=True)
class GroupIsland:
  """Issue 68's group prior, run as islands, on devices in link groups (NVLink groups): which
  ops share a group decides those problems' basins (`experiments/results/group_island`).
  Each of `candidates` splits of the ops into the groups (`split`: a `SPLITS` source, or a
  placement whose link groups are the split, e.g. a learned prediction) gets an island: the
  search confined to it (`confinement_prior`, its group-split chromosome as the seed) for
  `island_share` of the run's `evals`; beside them a free run (the guidance so far, unconfined)
  gets `free_share`. The best island and the free run seed the search that follows, so a poor
  split loses to the free run's basin instead of capturing the search. Every evaluation is
  counted in the budget. Devices in one group: no island, nothing spent."""
  evals: int  # The whole run's budget, which the shares are of.
  split: str | tuple[int, ...] = "stage_balanced"
  candidates: int = 4
  island_share: float = 0.05
  free_share: float = 0.2
  name: str = "island"

  def __post_init__(self):
    if isinstance(self.split, str) and self.split not in SPLITS:
      raise errors.ConfigError(f"unknown split {self.split!r}; known: {', '.join(SPLITS)}")
    if not (self.candidates >= 1 and 0 < self.island_share and 0 <= self.free_share
            and self.candidates * self.island_share + self.free_share < 1):
      raise errors.ConfigError("a group island needs at least one candidate and shares that "
                               "leave the search part of the budget")

  def _budgets(self, problem: performance.Problem) -> tuple[int, int, int]:
    """(islands, evaluations of each, of the free run); no island on devices in one group."""
    if devices_lib.link_groups(problem.devices).max(initial=0) == 0:
      return 0, 0, 0
    candidates = 1 if not isinstance(self.split, str) or self.split == "metis" else (
        self.candidates)  # One split only where it is fixed.
    return (candidates, int(self.evals * self.island_share), int(self.evals * self.free_share))

  def planned_evaluations(self, problem: performance.Problem) -> int:
    islands, each, free = self._budgets(problem)
    return islands * each + (free if islands else 0)

  def check_evals(self, problem: performance.Problem, evals: int, population: int) -> None:
    """Refuses a run budget whose shares leave an island or the free run less than one
    population."""
    if not self._budgets(problem)[0]:
      return
    share = min(s for s in (self.island_share, self.free_share) if s > 0)
    if evals * share < population:
      raise errors.ConfigError(f"--evals {evals} is too few for the group islands: each island "
                               f"and the free run search {share:.0%} of it or more, which needs "
                               f"one population ({population}); give --evals "
                               f"{math.ceil(population / share)} or more")

  def splits(self, problem: performance.Problem, seed: int) -> list[np.ndarray]:
    """The candidate splits: each op's link group."""
    device_group = devices_lib.link_groups(problem.devices)
    groups = int(device_group.max()) + 1
    if not isinstance(self.split, str):
      placement = np.asarray(self.split)
      if placement.shape != (problem.graph.num_ops,) or not (
          0 <= placement.min(initial=0) <= placement.max(initial=0) < len(device_group)):
        raise errors.ConfigError(f"a group island's split needs a device in "
                                 f"0..{len(device_group) - 1} for each of the "
                                 f"{problem.graph.num_ops} ops")
      return [device_group[placement]]
    if self.split == "metis":
      return [partition.balanced_partition(problem.graph, groups)]
    rng = np.random.default_rng([seed, 0x15])
    return [partition.stage_balanced_split(problem.graph, groups, rng)
            for _ in range(self._budgets(problem)[0])]

  def guide(self, problem: performance.Problem, seed: int, before: Guidance) -> Guidance:
    islands, each, free = self._budgets(problem)
    if not islands:
      return before
    device_group = devices_lib.link_groups(problem.devices)
    first_device = np.array([np.flatnonzero(device_group == g)[0]
                             for g in range(device_group.max() + 1)])
    spent, best, scores = 0, None, []
    for index, op_group in enumerate(self.splits(problem, seed)):
      island_seed = derived_seed(seed, index + 1)
      q, mean, spread = confinement_prior(problem, op_group)
      start = group_split_chromosome(problem, first_device[op_group],
                                     np.random.default_rng(island_seed))
      result = run_guided(problem, each, island_seed, Guidance(
          seeds={"split": start}, prior_q=q, prior_mean=mean, prior_spread=spread,
          single_device=False))
      spent += result.evaluations
      scores.append({"objective": result.objective, "evaluations": result.evaluations})
      if best is None or result.objective < best.objective:
        best = result
    seeds = {**before.seeds, f"{self.name}/split": np.asarray(best.best_chromosome)}
    details = {"islands": scores}
    if free:
      unconfined = free_run(problem, free, seed, before)
      spent += unconfined.evaluations
      seeds[f"{self.name}/free"] = np.asarray(unconfined.best_chromosome)
      details["free"] = {"objective": unconfined.objective,
                         "evaluations": unconfined.evaluations}
    return dataclasses.replace(before, seeds=seeds, evaluations=before.evaluations + spent,
                               details={**before.details, self.name: details})


def free_run(problem: performance.Problem, evals: int, seed: int,
             before: Guidance) -> brkga_search.SearchResult:
  """`GroupIsland`'s free run: the search as `before` guides it, unconfined, with `evals`
  evaluations of its own and a seed apart from the run's."""
  return run_guided(problem, evals, derived_seed(seed, 0),
                    dataclasses.replace(before, evaluations=0))


def derived_seed(seed: int, index: int) -> int:
  """A sub-run's seed, apart from the run's own and every other sub-run's."""
  return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


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


@dataclasses.dataclass(frozen=True)
class Prior:
  """A parameter-free prior (`regal.optimize --prior NAME`): `make(evals)` is its guide for a
  run of `evals` evaluations (None: no guide); `needs_link_groups`: it does nothing on devices
  in one link group (the run refuses it there)."""
  name: str
  make: Callable[[int], Guide | None]
  needs_link_groups: bool = False


def register_prior(name: str, make: Callable[[int], Guide],
                   needs_link_groups: bool = False) -> Prior:
  """Adds a parameter-free prior: `make(evals)` is its guide (`RunConfig(prior=name)`,
  `regal.optimize --prior name`)."""
  return registries.PRIORS.register(Prior(name, make, needs_link_groups))


def unregister_prior(name: str) -> Prior:
  return registries.PRIORS.unregister(name)


register_prior("none", lambda evals: None)
register_prior("bottom_level", lambda evals: BottomLevelPrior())
register_prior("group_island", lambda evals: GroupIsland(evals), needs_link_groups=True)


def arm_of(seed_name: str) -> str:
  """The guide arm a seed chromosome's name belongs to ('doppler/greedy' -> 'doppler')."""
  return seed_name.split("/")[0]


def guidance(problem: performance.Problem, seed: int, guides: Sequence[Guide]) -> Guidance:
  """The guides' guidance, in chain order."""
  result = Guidance()
  for one in guides:
    result = one.guide(problem, seed, result)
  return result


@dataclasses.dataclass(frozen=True)
class SearchPlan:
  """One search's problem, resolved once (`plan_search`): what scores it
  (`performance.Evaluator`), the preset's search settings and BRKGA's parameters for the whole
  budget. What runs the search reads it here instead of asking the scoring layer again."""
  evaluator: performance.Evaluator
  settings: brkga_search.SearchSettings
  params: brkga.Params


def plan_search(problem: performance.Problem, evals: int, preset: str = brkga_presets.DEFAULT,
                decoder: str | None = None,
                settings: brkga_search.SearchSettings | None = None,
                params: brkga.Params | None = None) -> SearchPlan:
  """The preset's plan for `problem` and the whole budget `evals` (`decoder`: in place of the
  preset's); `settings` / `params`: in place of the preset's (an A/B of settings)."""
  if settings is None:
    settings = brkga_presets.search_settings(preset, decoder=decoder, model=problem.model)
  evaluator = settings.evaluator(problem)
  if params is None:
    params = search_params(evaluator, evals, preset)
  return SearchPlan(evaluator, settings, params)


def check_budget(plan: SearchPlan, evals: int, guides: Sequence[Guide]) -> None:
  """Refuses, before any guide runs, a budget that leaves the search less than one
  population after the guides' planned evaluations."""
  population = plan.params.population_size
  problem = plan.evaluator.problem
  for one in guides:
    if hasattr(one, "check_evals"):
      one.check_evals(problem, evals, population)
  planned = sum(one.planned_evaluations(problem) for one in guides)
  if evals - planned < population:
    raise errors.ConfigError(f"--evals {evals} leaves {evals - planned} evaluations for BRKGA "
                             f"after the guides spend {planned}; it needs at least one "
                             f"population ({population})")


def search_params(evaluator: performance.Evaluator, evals: int,
                  preset: str = brkga_presets.DEFAULT):
  """The preset's BRKGA parameters for the searched layout (a size bucket on native
  engines: one compile per bucket) and the whole budget `evals`."""
  return brkga_presets.params(preset, brkga_search.search_layout(evaluator).size, evals=evals,
                              restarts=brkga_search.restarts_for(evaluator.breaks_ties))


def run_guided(problem: performance.Problem, evals: int, seed: int, guided: Guidance,
               plan: SearchPlan | None = None, time_limit: float | None = None,
               progress: search_progress.Reporter | None = None,
               shape: brkga_search.PaddedShape | None = None,
               should_stop: Callable[[], bool] | None = None) -> brkga_search.SearchResult:
  """The search with `evals` evaluations in all, the guidance's included, as `plan` says
  (default: the default preset's, `plan_search`). `shape`: a padded shape shared by many
  graphs (training: one compile), else the problem's own buckets; `should_stop()`: ends it
  early at a generation boundary (an exact solver's proof); `progress`: where the search says
  it starts and shows its live line (None: silent)."""
  if plan is None:
    plan = plan_search(problem, evals)
  elif plan.evaluator.problem is not problem:
    raise ValueError("the plan was made for another problem")
  params = plan.params
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
      progress.say(f"searching: BRKGA on {problem.graph.num_ops} ops, {left} evaluations "
               f"(population {params.population_size}, {len(guided.seeds) + 1} seeds); SIGINT "
               f"(Ctrl-C) stops it and keeps the best found")
    live = None if progress is None else search_progress.SearchProgress(
        left, time_limit, shown=progress.shown)
    try:
      result = brkga_search.optimize(
          plan.evaluator, evals=left, seed=seed, params=params, seeds=guided.seeds,
          settings=plan.settings, shape=shape,
          control=brkga_search.Control(time_limit, should_stop, live),
          single_device=guided.single_device)
    except ValueError as error:  # e.g. a budget below one population
      raise errors.ConfigError(str(error)) from None
  return dataclasses.replace(result, evaluations=result.evaluations + guided.evaluations)
