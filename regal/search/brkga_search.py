"""BRKGA over a graph: a performance model's objective as the fitness of random-key chromosomes.

`optimize` runs the domain-free engine (`brkga`) on REGAL's chromosomes (`regal.scoring.chromosome`),
read by the direct decoder or the list-scheduling one (`regal.scoring.list_decoder`) and scored by
`regal.scoring.performance`; with `SearchSettings.memetic` the best elites climb on the same fitness
after each generation (`regal.search.local_moves`, the engine's improve hook). Seed chromosomes
(the caller's, e.g. `regal.search.guides.HeuristicSeeds`: every cheap heuristic by default in
`regal.optimize`) enter the first population, and the result names the seed the winner descends from. The default
budget (`default_evals`) is sized from the graph; `time_limit` ends a search early. Why each
default is what it is, measured: `experiments/results/search_settings.md` (the comments below
name its sections).

Default hyperparameters follow Goncalves & Resende (2011) as REGAL used them
(`brkga.goncalves_resende`): population proportional to the chromosome length (20..200), 20%
elites, 15% mutants, elite inheritance probability 0.7, one population, restarted after
`RESTART_PATIENCE` generations without progress (`restarts_for`: a search whose score breaks
ties restarts sooner, from its seeds); a small budget caps the
population so that the search still runs `brkga.BUDGET_GENERATIONS` generations; other
populations, mutant shares and inheritance probabilities did not pay
(`experiments/results/search_settings.md#population`).

With a native scoring engine (the CPU default), the search runs on the problem's layout padded
to size buckets (`performance.bucket_layout`), driven from the host (`brkga.run_on_host`: its
jitted steps, then the graph's `performance.BucketScorer` on the host), so one set of compiled
programs serves every graph of a bucket: a process optimizing many graphs (`regal.optimize
--graph a,b,c`, the task-graph table) compiles once per bucket, not per graph, and, holding no
host callback, the programs persist on disk for the next process (`regal.startup`). Padded
genes decode to ops and tensors the scorer drops. The JAX engine runs the whole search as one
program (`brkga.run`).
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import regal_brkga as brkga
from regal_datasets import cli
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import bounds, decoders, performance
from regal.search import compile_clock, local_moves


Memetic = local_moves.Memetic  # Declared once, beside the climb that reads it.


@dataclasses.dataclass(frozen=True)
class SearchSettings:
  """How `optimize` reads and polishes chromosomes: the decoder (`regal.scoring.decoders`), its
  device-key bias (`regal.scoring.list_decoder`) and local improvement."""
  decoder: str = "direct"
  bias: float = 0.0
  memetic: Memetic = Memetic()

  def evaluator(self, problem: performance.Problem) -> performance.Evaluator:
    """What scores `problem` under these settings (their decoder and bias)."""
    return performance.Evaluator.of(problem, self.decoder, self.bias)

  def validate(self) -> "SearchSettings":
    if self.decoder not in decoders.names():
      raise ValueError(f"unknown decoder {self.decoder!r}; known: "
                       f"{', '.join(decoders.names())}")
    if not self.bias >= 0:
      raise ValueError(f"out of range: bias {self.bias}")
    self.memetic.validate()
    return self


def swap_fraction(problem: performance.Problem, settings: SearchSettings) -> float:
  """Priority swaps are wasted on a model that ignores priorities, unless the decoder reads
  them (the list decoder plans its placement in priority order; the consumer decoder orders
  transfers by them, where the model reads transfer priorities)."""
  return _swap_share(performance.Evaluator.of(problem, settings.decoder, settings.bias),
                     settings)


@dataclasses.dataclass(frozen=True)
class SearchResult:
  best_chromosome: np.ndarray
  objective: float
  placement: np.ndarray  # [o]
  order: np.ndarray  # [o] ops by priority
  # The search's score of its best after each generation: the objective, plus the
  # tie-breaker where `performance.breaks_ties` (at most 1% above it; the answer is then the
  # lowest objective of the final populations, which can be below the last score's makespan).
  history: np.ndarray
  evaluations: int
  compile_seconds: float
  search_seconds: float
  seed_objectives: dict[str, float]
  origin: str | None = None  # The seed the best descends from through elite parents.
  stopped_early: bool = False  # A time limit ended the search before its budget.
  # Why it ended: "budget", or what stopped it early: "time_limit", "signal" or "caller"
  # (`should_stop`: the exact solver's proof); `progress.STOP_REASONS` says each in words.
  stop_reason: str = "budget"


def single_device_seed(problem: performance.Problem, device: int = 0) -> np.ndarray:
  """Every op on one device, in topological order."""
  graph = problem.graph
  return chromosome_lib.encode(np.full(graph.num_ops, device), graph.topological_order,
                               problem.layout)


def bucketed(problem: performance.Problem) -> bool:
  """Whether `optimize` searches the bucket layout with the registered host scorer."""
  return performance.scoring_engine(problem) == "native"


@dataclasses.dataclass(frozen=True)
class PaddedShape:
  """The static shapes a bucketed search compiles for: the chromosome layout padded to size
  buckets and the local moves' neighbour capacity. Graphs of one shape share the compiled
  search; `common_shape` pads many graphs to one (a training run: one compile in all)."""
  bucket: chromosome_lib.Layout
  capacity: int


def padded_shape(problem: performance.Problem, decoder: str = "direct") -> PaddedShape:
  """The problem's own shape for a search by `decoder` (which decides whether the chromosome
  carries transfer genes: `performance.bucket_layout`)."""
  return PaddedShape(performance.bucket_layout(problem, decoder),
                     local_moves.neighbour_capacity(problem.graph))


def common_shape(problems, decoder: str = "direct") -> PaddedShape:
  """The smallest shape every problem fits (same device count) for a search by `decoder`."""
  shapes = [padded_shape(p, decoder) for p in problems]
  devices = {s.bucket.num_devices for s in shapes}
  if len(devices) != 1:
    raise ValueError(f"one padded shape needs one device count, got {sorted(devices)}")
  return PaddedShape(chromosome_lib.Layout(max(s.bucket.num_ops for s in shapes),
                                           max(s.bucket.num_tensors for s in shapes),
                                           devices.pop()),
                     max(s.capacity for s in shapes))


def search_layout(evaluator: performance.Evaluator) -> chromosome_lib.Layout:
  """The layout whose size the default parameters depend on: the chromosome BRKGA evolves for
  the problem under the direct decoder. A decoder that derives the transfer priorities
  (`consumer`) evolves the same layout without its transfer genes (`padded_shape`) under the
  same parameters, so the decoder changes which genes are searched, not the population."""
  return evaluator.direct_layout


MIN_DEFAULT_EVALS = 5_000
MAX_DEFAULT_EVALS = 600_000
# Cost units the default budget buys: ~8 s of the native scorers on this project's 2-core
# AMD EPYC (~0.02 us per unit; search_settings.md#default_eval_units).
DEFAULT_EVAL_UNITS = 3.9e8
# A default-budget run also stops after this much search, at a generation boundary, so a
# slower CPU than the one the budget was sized on still answers in about this time (the
# result says `stopped_early`, and then depends on the machine's speed).
DEFAULT_SEARCH_SECONDS = 10.0
JAX_SLOWDOWN = 40.0  # Native scorer evaluations per second / the JAX models' on a 2-core CPU.
# Evaluations per op and device where a small graph's default budget stops (below the cost
# units' bound).
EVALS_PER_OP_DEVICE = 500
# A search that restarts from its seeds (`restarts_for`) spends twice as many evaluations
# per op and device on small graphs (search_settings.md#restarting_evals_per_op_device).
RESTARTING_EVALS_PER_OP_DEVICE = 1000


def _cost_units(problem: performance.Problem) -> float:
  """What one evaluation costs the native scorers, in units of ~0.02 us (at least 1)."""
  graph = problem.graph
  return max(graph.num_ops * problem.devices.num_devices + 0.4 * len(graph.edge_src), 1.0)


def default_evals(problem: performance.Problem) -> int:
  """The default budget, in evaluations (so a run is deterministic for its seed), sized from
  the graph so the search takes up to ~8-10 s on this project's 2-core CPU: one evaluation
  costs about ops * devices + edges / 2 units (measured on the native WC and Doppler scorers:
  ~0.02 us per unit), `DEFAULT_EVAL_UNITS` in all, and small graphs need at most
  `evals_per_op_device` evaluations per op and device. The JAX engines (the sync model; any
  model off a CPU) score ~40x fewer per second on a CPU, so they get a 40th. Rounded up to a
  thousand, within 5,000..600,000. `DEFAULT_SEARCH_SECONDS` bounds such a run on a slower
  machine."""
  graph, devices = problem.graph, problem.devices.num_devices
  evals = min(DEFAULT_EVAL_UNITS / _cost_units(problem),
              evals_per_op_device(problem) * graph.num_ops * devices)
  if performance.scoring_engine(problem) == "jax":
    evals /= JAX_SLOWDOWN
  evals = int(np.ceil(evals / 1000.0)) * 1000
  return int(np.clip(evals, MIN_DEFAULT_EVALS, MAX_DEFAULT_EVALS))


def evals_per_op_device(problem: performance.Problem) -> int:
  """Where a small graph's default budget stops, per op and device: more for a search that
  restarts from its seeds."""
  if restarts_for(performance.breaks_ties(problem))[1] == brkga.SEEDS:
    return RESTARTING_EVALS_PER_OP_DEVICE
  return EVALS_PER_OP_DEVICE


REFINE_UNITS = 6.5e7  # A sixth of `DEFAULT_EVAL_UNITS`: ~1-1.5 s of the native scorers.
MIN_REFINE_EVALS = 2_000
MAX_REFINE_EVALS = 20_000
# Moves the refining climb scores per step: fewer moves per step take more steps for the
# same evaluations and gained more on 20,000-op graphs (chosen by measurement; see
# `regal_experiments.scaling`); two keep both of a 2-core machine's cores busy.
REFINE_BATCH = 2


def refine_evals(problem: performance.Problem) -> int:
  """The budget of the climb that refines a coarsened search's answer on the original graph
  (`regal.app.optimize_lib`): a sixth of what `default_evals` sizes for the graph before its
  limits (~1-1.5 s of the native scorers on this 2-core CPU), within 2,000..20,000."""
  evals = int(np.ceil(REFINE_UNITS / _cost_units(problem) / 1000.0)) * 1000
  return int(np.clip(evals, MIN_REFINE_EVALS, MAX_REFINE_EVALS))


# Generations without a better best after which the populations restart from fresh keys,
# keeping only the best so far (search_settings.md#restart_patience).
RESTART_PATIENCE = 100
# Where the search's score breaks makespan ties (`performance.breaks_ties`), it rarely
# stagnates for 100 generations: it restarts after 50, from its seeds, the best kept aside
# (search_settings.md#tie_breaking_restarts).
TIE_BREAKING_RESTARTS = (50, brkga.SEEDS)
DEFAULT_RESTARTS = (RESTART_PATIENCE, brkga.BEST)


def restarts_for(breaks_ties: bool) -> tuple[int, str]:
  """(restart patience, what a restart keeps) for a search whose score breaks makespan ties
  (`performance.Evaluator.breaks_ties`) or not."""
  return TIE_BREAKING_RESTARTS if breaks_ties else DEFAULT_RESTARTS


def default_brkga_params(num_genes: int, evals: int | None = None,
                         restarts: tuple[int, str] = DEFAULT_RESTARTS
                         ) -> brkga.Params:
  """Goncalves & Resende's parameters for `num_genes` genes and a budget of `evals`, with
  restarts on stagnation (`restarts`: patience and what a restart keeps, `restarts_for`)."""
  patience, restart_from = restarts
  return brkga.goncalves_resende(num_genes, evals=evals).replace(
      restart_patience=patience, restart_from=restart_from)


def default_params(problem: performance.Problem, evals: int | None = None) -> brkga.Params:
  """The default parameters (`default_brkga_params`) for the searched layout."""
  return params_for(performance.Evaluator.of(problem), evals)


def params_for(evaluator: performance.Evaluator, evals: int | None = None) -> brkga.Params:
  """`default_params` of the evaluator's problem."""
  return default_brkga_params(search_layout(evaluator).size, evals=evals,
                              restarts=restarts_for(evaluator.breaks_ties))


# Token -> (deadline, should_stop, progress, compile clock, target) of a running search.
_DEADLINES: dict[int, tuple[float, Callable[[], bool] | None, Any, compile_clock.CompileClock,
                            float]] = {}
_STOPPED: dict[int, str] = {}  # Stop token -> why `_time_up` stopped that search.


def _time_up(token, generation, evaluations, best) -> np.ndarray:
  """Once a generation, on the host: shows the search's progress and says whether to stop
  (and records why): a signal, a best that meets the lower bound (`target`: proven optimal),
  the time limit, the caller. The time limit counts search time: compiling does not use it
  up."""
  token = int(token)
  deadline, should_stop, progress, clock, target = _DEADLINES.get(
      token, (np.inf, None, None, None, -np.inf))
  compiling = 0.0 if clock is None else clock.seconds
  if progress is not None:
    progress.generation(int(generation), int(evaluations), float(best), compiling)
  reason = ("signal" if cli.stop_requested() else "bound" if float(best) <= target
            else "time_limit" if time.perf_counter() - compiling >= deadline
            else "caller" if should_stop is not None and should_stop() else None)
  if reason is not None:
    _STOPPED.setdefault(token, reason)
  return np.bool_(reason is not None)


def _stop_fn(token):
  """`brkga.run`'s stop: whether the deadline registered under `token` has passed, or SIGINT
  or SIGTERM asked the search to stop (`regal_datasets.cli.stoppable`)."""
  return lambda state: jax.pure_callback(_time_up, jax.ShapeDtypeStruct((), jnp.bool_), token,
                                         state.generation, state.evaluations,
                                         state.best_fitness)


class _deadline:
  """`with _deadline(run, objective_of) as deadline:` registers, under `deadline.token`, the
  run's wall-clock limit, its predicate that ends it early (e.g. an exact solver's proof), its
  live progress (`progress.SearchProgress`, or None) and the objective that proves its best
  optimal (`_Run.target`); after the block `deadline.reason` says why it ended ("budget"
  unless `_time_up` stopped it) and `deadline.compile_seconds` what JAX compiled in it (not
  counted against the limit). `objective_of(chromosome)`: the objective of the search's best
  where its score carries a tie-breaker (the live line and the bound read objectives)."""
  _next = 0

  def __init__(self, run: "_Run",
               objective_of: Callable[[np.ndarray], float] | None = None):
    control = run.control
    self.seconds, self.should_stop, self.progress = (control.time_limit, control.should_stop,
                                                     control.progress)
    self.target = run.target
    self.objective_of = objective_of
    self.clock = compile_clock.CompileClock()

  def __enter__(self) -> "_deadline":
    _deadline._next += 1
    self.token = _deadline._next
    self.clock.__enter__()
    _DEADLINES[self.token] = (np.inf if self.seconds is None
                              else time.perf_counter() + self.seconds, self.should_stop,
                              self.progress, self.clock, self.target)
    if self.progress is not None:
      self.progress.searching()
    return self

  def __exit__(self, *exc) -> None:
    del _DEADLINES[self.token]
    self.clock.__exit__(*exc)
    self.compile_seconds = self.clock.seconds
    self.reason = _STOPPED.pop(self.token, "budget")
    if exc[0] is not None and self.progress is not None:
      self.progress.close()  # Else the answer's line closes it (`_last_line`).

  def stop(self, state: brkga.State) -> bool:
    """`brkga.run_on_host`'s stop. A score with the tie-breaker is at most `TIE_BREAK` above
    its objective (a mean completion is at most the makespan): the objective is worked out
    only where it could meet the target, or the live line shows it."""
    best = float(state.best_fitness)
    if self.objective_of is not None and (
        best <= self.target * (1 + performance.TIE_BREAK) or
        (self.progress is not None and self.progress.due())):
      best = self.objective_of(np.asarray(state.best_chromosome))
    return bool(_time_up(self.token, state.generation, state.evaluations, best))


def _last_line(run: "_Run", outcome: "_Outcome") -> None:
  """The live line's last word: the search's answer, as the summary will show it."""
  if run.control.progress is not None:
    run.control.progress.finished(int(outcome.result.evaluations), outcome.objective,
                          outcome.search_seconds, outcome.compile_seconds,
                          outcome.compiled > 0, kept=run.evaluator.bucketed)


def _search_fn(fitness, run: "_Run", layout: chromosome_lib.Layout):
  """search(rng, seeds, table, token) -> brkga.Result: BRKGA, memetic when asked."""
  memetic = run.memetic

  def search(rng, seeds, table, token):
    improve = None
    if memetic.climbers > 0:
      improve = local_moves.elite_improver(fitness, table, layout, memetic)
    return brkga.run(fitness, rng, run.params, run.evals, layout.size, seeds=seeds,
                     improve=improve, improve_interval=memetic.interval, stop=_stop_fn(token))

  return search


def _host_improver(score, table: local_moves.MoveTable, layout: chromosome_lib.Layout,
                   run: "_Run"):
  """The memetic hook of a search scored on the host (None when it does not climb)."""
  if run.memetic.climbers == 0:
    return None
  return local_moves.elite_improver_on_host(score, table, layout, run.memetic)


@dataclasses.dataclass(frozen=True)
class Control:
  """When a search stops early and who hears of it: `time_limit` seconds end it at a
  generation boundary, as does SIGINT or SIGTERM under `cli.run_cli` (during the compile too:
  the search then stops at once), and `should_stop()` turning true; `progress`, a
  `progress.SearchProgress`, is told of the compile and of every generation."""
  time_limit: float | None = None
  should_stop: Callable[[], bool] | None = None
  progress: Any = None


def optimize(evaluator: performance.Evaluator, evals: int = 5000, seed: int = 0,
             params: brkga.Params | None = None,
             seeds: dict[str, np.ndarray] | None = None,
             settings: SearchSettings = SearchSettings(), shape: PaddedShape | None = None,
             control: Control = Control(), single_device: bool = True) -> SearchResult:
  """BRKGA on the evaluator's problem, scored as it says (its decoder and bias are `settings`'s),
  with `evals` fitness evaluations; `seeds` name chromosomes for the first population,
  after the one-device seed (`single_device=False`: without it, e.g. in a population confined
  to a split of the devices, which it would leave). `shape`: the padded shape of a bucketed
  search (default: the problem's own); `control`: when it stops early, who hears of it."""
  problem = evaluator.problem
  if (settings.decoder, settings.bias) != (evaluator.decoder.name, evaluator.bias):
    raise ValueError(f"the settings' decoder {settings.decoder} (bias {settings.bias}) is not "
                     f"the evaluator's {evaluator.decoder.name} ({evaluator.bias})")
  seeds = {**({"single_device": single_device_seed(problem)} if single_device else {}),
           **(seeds or {})}
  if not seeds:
    raise ValueError("a search needs at least one seed chromosome")
  run = _Run(evaluator, evals, seed, params or params_for(evaluator, evals), seeds, settings,
             _swap_share(evaluator, settings), control)
  with cli.stoppable():
    if evaluator.bucketed:
      return _optimize_bucketed(run, shape or PaddedShape(
          evaluator.bucket, local_moves.neighbour_capacity(problem.graph)))
    return _optimize(run)


def _swap_share(evaluator: performance.Evaluator, settings: SearchSettings) -> float:
  return settings.memetic.swap_fraction if evaluator.reads_priorities else 0.0


@dataclasses.dataclass(frozen=True)
class _Run:
  """One search's request, resolved: what scores it, its budget and seed, BRKGA's parameters,
  its seed chromosomes, its settings (with the swap share the model reads), how it may stop
  and who hears of its progress."""
  evaluator: performance.Evaluator
  evals: int
  seed: int
  params: brkga.Params
  seeds: dict[str, np.ndarray]
  settings: SearchSettings
  swaps: float
  control: Control

  @functools.cached_property
  def target(self) -> float:
    """The objective at which the search stops: its best then meets the problem's lower bound
    (`bounds.meets`: proven optimal)."""
    return bounds.target(bounds.structural_lower_bound(self.evaluator.problem))

  @property
  def memetic(self) -> Memetic:
    """The climb as this problem runs it (swaps off where nothing reads priorities)."""
    return dataclasses.replace(self.settings.memetic, swap_fraction=self.swaps)


@dataclasses.dataclass(frozen=True)
class _Outcome:
  """What a search path hands back to `_result`: the engine's result, the answer (own
  layout), the seeds' objectives and the answer's, the seconds spent, whether the answer is
  the engine's own best (whose lineage it tracked) and why the search stopped."""
  result: Any
  best: np.ndarray
  seed_values: np.ndarray
  objective: float
  compile_seconds: float
  search_seconds: float
  searched_best: bool
  stop_reason: str
  compiled: int = 0  # Programs compiled, not loaded from a cache.


def _optimize(run: _Run) -> SearchResult:
  """The search under `jit` (the JAX engine), scored by the jitted fitness."""
  problem = run.evaluator.problem
  seed_matrix = jnp.asarray(np.stack(list(run.seeds.values())), jnp.float32)
  fitness = run.evaluator.fitness()
  seed_values = np.asarray(fitness(seed_matrix))
  layout = problem.layout
  search = _search_fn(fitness, run, layout)
  table = local_moves.move_table(problem.graph)
  start = time.perf_counter()
  if run.control.progress is not None:
    run.control.progress.compiling()
  with compile_clock.CompileClock() as clock:
    compiled = jax.jit(search).lower(jax.random.key(run.seed), seed_matrix, table,
                                     jnp.int32(0)).compile()
  compile_seconds = time.perf_counter() - start
  with _deadline(run) as deadline:
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(jax.random.key(run.seed), seed_matrix, table,
                                            jnp.asarray(deadline.token, jnp.int32)))
    search_seconds = time.perf_counter() - start
  outcome = _Outcome(result, np.asarray(result.best_chromosome), seed_values,
                     float(result.best_fitness), compile_seconds, search_seconds, True,
                     deadline.reason, clock.compiled)
  _last_line(run, outcome)
  return _result(run, outcome)


def _optimize_bucketed(run: _Run, shape: PaddedShape) -> SearchResult:
  """The search driven from the host on the bucket layout (the native engines)."""
  evaluator, settings, params = run.evaluator, run.settings, run.params
  problem = evaluator.problem
  own, bucket, capacity = problem.layout, shape.bucket, shape.capacity
  if bucket.num_tensors == 0 and evaluator.reads_transfer_genes:
    raise ValueError(f"the {settings.decoder} decoder reads transfer genes, which the padded "
                     f"shape {bucket} does not carry")
  seed_matrix = np.stack([chromosome_lib.to_bucket(own, bucket, np.asarray(c, np.float32),
                                                   fill=0.0) for c in run.seeds.values()])
  table = local_moves.move_table(problem.graph, bucket.num_ops, capacity)
  # Per-gene settings on the bucket's genes; the padded genes, which decode to nothing, stay
  # uniform and unsteered.
  guided = params.replace(**{name: mutant_genes(own, bucket, getattr(params, name), fill)
                             for name, fill in (("mutant_alpha", 1.0), ("mutant_beta", 1.0),
                                                ("prior_q", 0.0), ("prior_mean", 0.5),
                                                ("prior_spread", 1.0))})
  scorer = evaluator.bucket_scorer(bucket)
  if run.control.progress is not None:
    run.control.progress.compiling()
  # Scored on the host between jitted steps (`brkga.run_on_host`): no program holds a host
  # callback, so each step's executable is kept for the next process (`regal_brkga.programs`).
  objective_of = ((lambda chromosome: float(scorer.objectives(chromosome[None])[0]))
                  if evaluator.breaks_ties else None)
  with _deadline(run, objective_of) as deadline:
    start = time.perf_counter()
    result = jax.block_until_ready(brkga.run_on_host(
        scorer.search_scores, jax.random.key(run.seed), guided, run.evals, bucket.size,
        seeds=seed_matrix,
        improve=_host_improver(scorer.search_scores, table, bucket, run),
        improve_interval=settings.memetic.interval, stop=deadline.stop))
    search_seconds = time.perf_counter() - start - deadline.clock.seconds
  compile_seconds = deadline.compile_seconds
  # The search's score may carry a tie-breaker (`performance.TIE_BREAK`), under which a
  # makespan up to 1% longer can rank first: the answer is the lowest objective among the
  # search's best and its final populations. Those were all scored by the search, and the
  # objective is the same simulation's makespan, so reading it again is not counted.
  searched = np.asarray(result.best_chromosome)[None]
  if evaluator.breaks_ties:
    searched = np.concatenate([searched, np.asarray(result.final_population).reshape(
        -1, bucket.size)])
  values = scorer.objectives(np.concatenate([seed_matrix, searched]))
  found = values[len(seed_matrix):]
  pick = int(np.argmin(found))  # The first of equals: the search's own best.
  best = chromosome_lib.from_bucket(own, bucket, searched[pick])
  outcome = _Outcome(result, best, values[:len(seed_matrix)], float(found[pick]),
                     compile_seconds, search_seconds, pick == 0, deadline.reason,
                     deadline.clock.compiled)
  _last_line(run, outcome)
  return _result(run, outcome)


def mutant_genes(own: chromosome_lib.Layout, bucket: chromosome_lib.Layout,
                 values, fill: float = 1.0) -> jnp.ndarray:
  """A per-gene setting of fresh keys (a mutant Beta parameter or a prior's; a scalar, or one
  per gene of the graph's own layout) per gene of the bucket layout. The padded genes, which
  decode to nothing, get `fill` (1 for the Betas, 0 for the prior's q): a guide that steers
  no gene keeps the engine's uniform draws, and a scalar draws what the same value given
  gene by gene does, bit for bit."""
  values = np.asarray(values, np.float32)
  if values.ndim == 0:
    values = np.full(own.size, values, np.float32)
  if values.shape != (own.size,):
    raise ValueError(f"mutant distributions must have one value per gene ({own.size}), got "
                     f"{values.shape}")
  return jax.device_put(chromosome_lib.to_bucket(own, bucket, values, fill=fill).astype(
      np.float32))  # As it is: `jnp.asarray` would compile a copy.


def _result(run: _Run, outcome: _Outcome) -> SearchResult:
  """The search's answer; under a decoder other than the direct one it is re-encoded for the
  direct decoder (same placement, order and transfer priorities), which every consumer reads.
  Its seed lineage is known where it is the engine's own best (`outcome.searched_best`)."""
  evaluator, result, params, evals = run.evaluator, outcome.result, run.params, run.evals
  best = outcome.best
  decoded = evaluator.host_decode(np.asarray(best, np.float32)[None])
  placement = np.asarray(decoded.placement[0])
  order = chromosome_lib.priority_order(np.asarray(decoded.op_priority[0]))
  if not evaluator.decoder.identity:
    best = chromosome_lib.encode(placement, order, evaluator.layout,
                                 np.asarray(decoded.transfer_priority[0]))
  history = np.asarray(result.history)
  generations = int(result.generations)
  evaluations = int(result.evaluations)
  return SearchResult(
      best_chromosome=best, objective=outcome.objective, placement=placement,
      order=order, history=history[:generations + 1], evaluations=evaluations,
      compile_seconds=outcome.compile_seconds, search_seconds=outcome.search_seconds,
      seed_objectives={name: float(v) for name, v in zip(run.seeds, outcome.seed_values)},
      origin=(list(run.seeds)[int(result.best_origin)]
              if outcome.searched_best and int(result.best_origin) >= 0 else None),
      stopped_early=evaluations + params.offspring_per_generation <= evals and
      generations < brkga.max_generations(params, evals),
      stop_reason=outcome.stop_reason)
