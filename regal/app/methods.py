"""Every method `regal.optimize` runs, one record each (as anrg-saga registers its schedulers):
BRKGA (the one search, steered by its guides), the Doppler policy, each baseline, and the
methods that split a profiled workload (`baselines.pipeline_methods`). A schedule method
takes the problem, the run's `RunConfig`, its budget and the problem's reference scores, and
returns a `baselines.MethodResult`; a split method takes a workload (`Method.split`). One
name may do both (cpsat). What a method reads (`Method.reads`) is what `regal.optimize`
accepts with it."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from regal_datasets import errors
from regal import baselines
from regal.app import choices, registries
from regal.baselines import data_parallel, heuristics
from regal.baselines import registries as baseline_registries
from regal.doppler_policy import options as doppler_options
from regal.scoring import decoders, models, performance
from regal.search import brkga_presets, guides
from regal.search import method as search_method
from regal.search import options as search_options
from regal.search.options import BrkgaOptions
from regal.search import registries as search_registries

# A record names its implementation; what only some methods run (Doppler's policy, the learned
# guides, CP-SAT, the profiled workloads' splits) loads when one of them runs.

MAX_EVALS = choices.MAX_EVALS  # Evaluation counters are int32 inside the search.
SPLIT_OBJECTIVES = ("throughput", "latency")  # `baselines.pipeline_methods.OBJECTIVES`' keys.
POLISH = search_options.POLISH  # `BrkgaOptions.polish`

# The guides that seed the search (`--seed_arms`): every built-in heuristic by default (any
# registered, `heuristics.register`, when named); Doppler's policy trains, so it is opt-in.
DEFAULT_ARMS = heuristics.HEURISTICS


def known_arms() -> tuple[str, ...]:
  return (*baseline_registries.HEURISTICS.names(), doppler_options.NAME)


def parse_arms(spec: str) -> tuple[str, ...]:
  arms = tuple(a.strip() for a in spec.split(",") if a.strip())
  check_arms(arms, shown=spec)
  return arms


def check_arms(arms: tuple[str, ...], shown: str | None = None) -> None:
  """One line naming the known arms, for an unknown arm or none."""
  unknown = [a for a in arms if a not in known_arms()]
  if unknown or not arms:
    what = unknown or (repr(shown) if shown is not None else arms)
    raise errors.ConfigError(f"unknown seed arm(s) {what}; known: {', '.join(known_arms())}")


def seed_guides(arms: tuple[str, ...] = DEFAULT_ARMS,
                doppler: doppler_options.DopplerOptions | None = None) -> list[guides.Guide]:
  """The guides of the named arms: the heuristics' seeds, then the Doppler policy's."""
  chain = [guides.HeuristicSeeds(tuple(a for a in arms if a != doppler_options.NAME))]
  if doppler_options.NAME in arms:
    from regal.doppler_policy import guide as doppler_guide
    chain.append(doppler_guide.DopplerSeeds(doppler or doppler_options.DopplerOptions()))
  return chain


@dataclasses.dataclass(frozen=True)
class Setup:
  """How the graph is prepared and scored before any method sees it: `shard`, "off", "auto"
  or a shard count (an imported graph's ops split first: `regal.app.sharding`); `coarsen`,
  "off", "auto" or a group count (solved coarse, expanded, refined); `engine`, how batched
  scoring runs ("auto", "native", "jax")."""
  shard: str = "off"
  coarsen: str = "off"
  engine: str = "auto"


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """What one `regal.optimize` run does besides the graph and devices: what every method
  shares, and each method's own options. The problem's `model`, `objective` and
  `memory_limit`; the `method`; `evals`: the budget (default: `search.default_evals` of the
  searched graph); `time_limit`: seconds that end BRKGA at a generation boundary (default:
  `brkga_search.DEFAULT_SEARCH_SECONDS` with the default budget, which binds only on a CPU
  slower than the one it was sized on; else none), or the cpsat and quickp solvers' limit
  (default 10 s); `setup`: the graph's preparation and scoring; `brkga`: the search's options
  (`search.options.BrkgaOptions`); `doppler`: the Doppler policy's, for the method and the
  doppler seed arm (`doppler_policy.options.DopplerOptions`)."""
  model: str = "wc"
  objective: str = "runtime"
  memory_limit: float | None = None
  method: str = "brkga"
  evals: int | None = None
  seed: int = 0
  time_limit: float | None = None
  setup: Setup = Setup()
  brkga: BrkgaOptions = BrkgaOptions()
  doppler: doppler_options.DopplerOptions = doppler_options.DopplerOptions()

  def validate(self) -> "RunConfig":
    """One-line errors, before any work, for values out of range and options the method
    would ignore."""
    get_schedule(self.method)  # An unknown method: one line naming the known ones.
    if self.evals is not None and not 1 <= self.evals <= MAX_EVALS:
      raise errors.ConfigError(f"evals must be between 1 and {MAX_EVALS:,}, got {self.evals}")
    if not 0 <= self.seed <= errors.MAX_SEED:
      raise errors.ConfigError(f"seed must be between 0 and {errors.MAX_SEED}, got {self.seed}")
    brkga, setup = self.brkga, self.setup
    check_arms(tuple(brkga.arms))
    if self.doppler.measured is not None and ("reward" not in get(self.method).reads
                                              or setup.coarsen != "off"):
      raise errors.ConfigError("measured rewards serve Doppler's stage III: use them with "
                               "--method doppler and without --coarsen")
    search_registries.PRIORS.get(brkga.prior)  # An unknown prior: one line naming the known.
    if brkga.exact_solver not in ("auto", "off"):
      raise errors.ConfigError(f"exact_solver must be auto or off, got "
                               f"{brkga.exact_solver!r}")
    from regal.app import sharding  # Local: sharding builds on the baselines.
    shard = sharding.parse(setup.shard)
    if shard != "off" and setup.coarsen != "off":
      raise errors.ConfigError("--shard and --coarsen pull opposite ways (split ops, then "
                               "group them): give one")
    if brkga.polish not in POLISH:
      raise errors.ConfigError(f"polish must be one of {', '.join(POLISH)}, got "
                               f"{brkga.polish!r}")
    reads = get(self.method).reads
    for option, given, why in (
        ("brkga_preset", brkga.preset not in ("", brkga_presets.DEFAULT),
         "--brkga_preset sets BRKGA's parameters"),
        ("policy", bool(brkga.policy_dir), "--policy runs REGAL, i.e. BRKGA"),
        ("prior", brkga.prior != "none", "--prior steers BRKGA's fresh keys"),
        ("decoder", brkga.decoder is not None, "--decoder sets how BRKGA reads chromosomes")):
      if given and option not in reads:
        raise errors.ConfigError(f"{why}: use it with --method {' or '.join(readers(option))}")
    if brkga.decoder is not None:
      why = decoders.get(brkga.decoder).unsupported(models.get(self.model))
      if why:
        raise errors.ConfigError(why)
    return self


@dataclasses.dataclass(frozen=True)
class Method:
  """A method: `run(problem, config, evals, scores)` on a schedule problem; `reads`: which
  options it uses (the budget, the time limit, the seed, the batched engine, its own; a flag
  it ignores is refused). A baseline also has `solve(problem, evals, seed, time_limit)`, what
  `run_method` calls without a run's config; `makespan_only`: it plans the makespan alone
  (the memory objectives are refused). `split(workload, config, deadline)` splits a profiled
  workload for the `split_objectives` it models. `refines_coarsened`: on a coarsened graph
  its answer is climbed on the original one (a search's multilevel refinement);
  `shards_by_batch`: it splits an imported graph itself, each op on its batch (one shard per
  device unless `--shard K`), where other methods split only with `--shard`."""
  name: str
  run: Callable[[performance.Problem, RunConfig, int, performance.ReferenceScores],
                baselines.MethodResult] | None
  reads: frozenset[str]
  solve: Callable[[performance.Problem, int, int, float], baselines.MethodResult] | None = None
  makespan_only: bool = False
  split: Callable[[Any, Any, float], tuple[np.ndarray, dict]] | None = None
  split_objectives: tuple[str, ...] = SPLIT_OBJECTIVES
  refines_coarsened: bool = False
  shards_by_batch: bool = False


def _run_brkga(problem: performance.Problem, config: RunConfig, evals: int,
               scores: performance.ReferenceScores) -> baselines.MethodResult:
  """BRKGA (`search.method.run`) steered by the guides the run names: the seed arms (the
  Doppler policy's among them), the aligned shards of a sharded graph, a prior over fresh
  keys, and REGAL's trained policy or prior with `policy_dir`."""
  options = config.brkga
  chain = seed_guides(options.arms, config.doppler)
  if data_parallel.is_sharded(problem.graph):
    chain.append(guides.AlignedShards())
  prior = search_registries.PRIORS.get(options.prior).make(evals)
  if prior is not None:
    chain.append(prior)
  if options.policy_dir:
    from regal.learning import shipped, trained_guide
    policy_dir = shipped.resolve(options.policy_dir, problem.model,
                                 problem.devices.num_devices, problem.objective)
    chain.append(trained_guide.guide_for(policy_dir, evals))
    options = dataclasses.replace(options, policy_dir=policy_dir)
  return search_method.run(problem, options, chain, evals, config.seed, config.time_limit,
                           budget_given=config.evals is not None, scores=scores)


def _run_doppler(problem: performance.Problem, config: RunConfig, evals: int,
                 scores: performance.ReferenceScores) -> baselines.MethodResult:
  from regal.doppler_policy import method as doppler_method
  del scores  # It re-scores its few best assignments itself.
  doppler = config.doppler
  return doppler_method.doppler(problem, evals, config.seed, checkpoint=doppler.checkpoint,
                                save=doppler.save, measured=doppler.measured,
                                stage3_steps=doppler.stage3_steps)


def _run_baseline(problem: performance.Problem, config: RunConfig, evals: int,
                  scores: performance.ReferenceScores) -> baselines.MethodResult:
  del scores
  time_limit = 10.0 if config.time_limit is None else config.time_limit
  result = run_method(config.method, problem, evals=evals, seed=config.seed,
                      time_limit=time_limit)
  if get(config.method).makespan_only:
    result = dataclasses.replace(result, settings={"time_limit": time_limit})
  return result


def _baseline(name: str, solve, reads: frozenset[str] = frozenset(), **more) -> Method:
  return Method(name, _run_baseline, reads, solve, **more)


def _splitter(name: str):
  """`baselines.pipeline_methods.<name>`, loaded when a split runs."""
  def split(workload, config, deadline):
    from regal.baselines import pipeline_methods
    return getattr(pipeline_methods, name)(workload, config, deadline)
  return split


def _split(name: str, split, reads: frozenset[str] = frozenset()) -> Method:
  return Method(name, None, reads, split=split)


def register(method: Method) -> Method:
  """`RunConfig(method=name)` and `optimize_lib.run` run it from then on (or
  `pipeline_lib.run`, for a method that splits): in `registries.METHODS` where it takes a
  graph (`run`), in `registries.SPLIT_METHODS` where it splits (`split`)."""
  for registry, takes in ((registries.METHODS, method.run), (registries.SPLIT_METHODS,
                                                             method.split)):
    if takes is not None:
      registry.register(method)
  return method


def unregister(name: str) -> Method:
  """Takes a method out (a test's toy, once it is done)."""
  found = [registry.unregister(name) for registry in (registries.METHODS,
                                                      registries.SPLIT_METHODS)
           if name in registry]
  return found[0]


def get(name: str) -> Method:
  """Method `name`, of either kind (an unknown one: one line naming them all)."""
  for registry in (registries.METHODS, registries.SPLIT_METHODS):
    if name in registry:
      return registry.get(name)
  known = dict.fromkeys(schedule_names() + split_names())
  raise errors.ConfigError(f"unknown method {name!r}; known: {', '.join(known)}")


# The one method registry: each method and the options it reads besides the problem
# (flag names); `regal.optimize` refuses a flag nothing in the run would read
# (`optimize_cli.readers`: these records, and what the other flags switch on, such as the
# doppler seed arm's options or CP-SAT beside BRKGA).
_BATCHED = frozenset({"evals", "seed", "engine"})
_SOLVER = frozenset({"time_limit", "seed"})
# What BRKGA reads besides the batched options: its guides and settings; what the Doppler
# policy reads: its checkpoint, save path and reward.
_BRKGA_OPTIONS = frozenset({"time_limit", "seed_arms", "brkga_preset", "policy", "prior",
                            "decoder"})
_DOPPLER_OPTIONS = frozenset({"doppler_checkpoint", "doppler_save", "reward"})
B = baselines  # Each baseline's module loads when its method runs (`baselines.__getattr__`).
for _method in (
    Method("brkga", _run_brkga, _BATCHED | _BRKGA_OPTIONS, refines_coarsened=True),
    Method("doppler", _run_doppler, _BATCHED | _DOPPLER_OPTIONS),
    _baseline("critical_path", lambda p, evals, seed, limit: B.list_scheduling.critical_path(p)),
    _baseline("critical_path_doppler",
              lambda p, evals, seed, limit: B.list_scheduling.critical_path_doppler(p)),
    _baseline("heft", lambda p, evals, seed, limit: B.list_scheduling.heft(p)),
    _baseline("gp_dfs", lambda p, evals, seed, limit: B.partition.gp_dfs(p)),
    _baseline("local_search",
              lambda p, evals, seed, limit: B.local_search.local_search(p, evals, seed), _BATCHED),
    _baseline("hill_climb",
              lambda p, evals, seed, limit: B.local_search.hill_climb(p, evals, seed), _BATCHED),
    _baseline("random", lambda p, evals, seed, limit: B.sampling.random_search(p, evals, seed),
              _BATCHED),
    _baseline("enumerative", lambda p, evals, seed, limit: B.enumerative.enumerative(p, seed),
              frozenset({"seed"})),
    _baseline("cpsat", lambda p, evals, seed, limit: B.exact.cpsat(p, limit, seed=seed), _SOLVER,
              makespan_only=True, split=_splitter("cpsat"), split_objectives=("throughput",)),
    _baseline("quickp", lambda p, evals, seed, limit: B.exact.quickp(p, limit, seed=seed),
              _SOLVER, makespan_only=True),
    _baseline("data_parallel", lambda p, evals, seed, limit: B.data_parallel.data_parallel(p),
              shards_by_batch=True),
    # A profiled workload's split (`--objective throughput`, `--model blocks`); cpsat above.
    _split("search", _splitter("search"), frozenset({"evals", "seed", "time_limit"})),
    _split("pipedream", _splitter("pipedream")),
    _split("contiguous_dp", _splitter("contiguous_dp")),
    _split("one_accelerator", _splitter("one_accelerator")),
):
  register(_method)
schedule_names = registries.METHODS.names  # `regal.optimize --method` on a graph.
split_names = registries.SPLIT_METHODS.names  # On a profiled workload.


METHODS = schedule_names()  # The built-in schedule methods.
SPLIT_METHODS = split_names()  # The built-in split methods.


def get_schedule(name: str) -> Method:
  """Method `name`, which must take a schedule problem."""
  method = get(name)
  if method.run is None:
    raise errors.ConfigError(f"--method {name} splits a profiled workload: it needs "
                             f"--objective throughput or --model blocks")
  return method


def get_split(name: str, objective: str) -> Method:
  """Method `name`, which must split a profiled workload for `objective` (throughput or
  latency)."""
  from regal.baselines import pipeline_methods
  pipeline_methods.check_objective(objective)
  how = "--objective throughput" if objective == "throughput" else "--model blocks"
  method = registries.SPLIT_METHODS.get(name) if name in registries.SPLIT_METHODS else None
  if method is None:
    raise errors.ConfigError(f"{how} takes --method {', '.join(split_names())}; got {name!r}")
  if objective not in method.split_objectives:
    raise errors.ConfigError(f"--method {name} models the pipeline max-load only (--objective "
                             f"throughput), not {how}")
  return method


def run_method(name: str, problem: performance.Problem, evals: int = 5000, seed: int = 0,
               time_limit: float = 10.0) -> baselines.MethodResult:
  """Runs baseline `name` without a run's config (the experiments' tables): `evals` is the
  search budget, `time_limit` CP-SAT's (seconds)."""
  method = get(name)
  if method.solve is None:
    raise errors.ConfigError(f"--method {name} needs a run's config: use optimize_lib.run")
  try:
    return method.solve(problem, evals, seed, time_limit)
  except ValueError as error:
    raise errors.ConfigError(str(error)) from None


def readers(option: str) -> tuple[str, ...]:
  """The schedule methods that read `option` (a flag's name: "evals", "seed_arms", ...)."""
  return tuple(name for name in schedule_names() if option in get(name).reads)
