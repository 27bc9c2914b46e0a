"""Scoring chromosomes: decode, simulate with a performance model, reduce to an objective.

This is the one scoring path every optimizer uses. The models (wc, the default; sync;
doppler; delay) are records of `regal.scoring.models`, which every dispatch here reads.
Objectives (smaller is better):
  runtime               the makespan;
  memory                the largest per-device peak memory;
  runtime_under_memory  the makespan if every device stays within its memory limit, otherwise
                        a score above every feasible one (REGAL section 3.2): the sum of all
                        durations (no schedule of either model takes longer) times one plus the
                        relative excess, so infeasible solutions still rank by excess.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from regal_datasets import errors, padding
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import decoders, models, native_common, parallel, registries
from regal.scoring import resident as resident_lib
from regal.scoring.schedule import Schedule
from regal.scoring.sim_graph import SimGraph, build_sim_graph

MODELS = models.names()  # The built-in models; `models.get` knows any registered later.
FLOAT32_MAX = float(np.finfo(np.float32).max)
# How batched scoring runs: "jax" (a model's JAX version, any backend), "native" (its compiled
# host loop), "auto" (native where the model has one and JAX runs on a CPU in float32, or
# where it has no JAX version; else jax).
ENGINES = registries.ENGINES
OBJECTIVES = registries.OBJECTIVES


@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
  """A graph on a device set, scored by one model and objective."""
  graph: Graph
  devices: DeviceSpec
  model: str = "wc"
  objective: str = "runtime"
  memory_limit: float | None = None  # Per device; default: the devices' capacities.
  dtype: type = np.float32
  engine: str = "auto"

  def __post_init__(self):
    spec = models.get(self.model)
    if self.objective not in OBJECTIVES:
      raise errors.ConfigError(f"unknown objective {self.objective!r}; known: "
                               f"{', '.join(OBJECTIVES)}")
    if self.objective == "runtime_under_memory" and self.memory_limit is None and np.isinf(
        self.devices.memory_capacity).all():
      raise errors.ConfigError("objective runtime_under_memory needs a memory limit "
                               "(--memory_limit or device memory capacities)")
    if self.memory_limit is not None and not self.memory_limit > 0:
      raise errors.ConfigError(f"memory limit must be positive, got {self.memory_limit}")
    if self.devices.shares_ports and not spec.ports:
      raise errors.ConfigError(
          f"the {self.model} model gives every device pair a link of its own, but these "
          f"devices share ports ({self.devices.name}: each GPU's NVLink serves all its peers): "
          f"use --model wc, or a --device_spec without ports")
    if not spec.memory and self.objective != "runtime":
      raise errors.ConfigError(f"the {self.model} model has no memory: use objective runtime")
    if self.engine not in ENGINES:
      raise errors.ConfigError(f"unknown engine {self.engine!r}; known: {', '.join(ENGINES)}")
    if self.engine == "native" and spec.native is None:
      raise errors.ConfigError(f"the {self.model} model has no native engine")
    if self.engine == "native" and spec.native_float32_only and np.dtype(
        self.dtype) != np.float32:
      raise errors.ConfigError(f"the native engine scores the {self.model} model in float32")
    if self.engine == "jax" and spec.jax is None:
      raise errors.ConfigError(f"the {self.model} model is scored by the native engine only")
    if np.dtype(self.dtype) == np.float32:
      _check_float32_range(self)

  @functools.cached_property
  def resident(self) -> resident_lib.ResidentParameters | None:
    """A split graph's parameters, held by the devices that read them (in every peak)."""
    return resident_lib.of(self.graph)

  def with_resident(self, placement, peak_memory):
    """Peaks [..., D] with the resident parameters of placements [..., O] added (numpy or
    JAX; unchanged for a graph without them)."""
    if self.resident is None:
      return peak_memory
    held = self.resident.per_device(placement, self.devices.num_devices)
    return peak_memory + held.astype(peak_memory.dtype)

  @functools.cached_property
  def layout(self) -> chromosome_lib.Layout:
    return chromosome_lib.Layout(self.graph.num_ops, self.graph.num_tensors,
                                 self.devices.num_devices)

  @property
  def memory_limits(self) -> np.ndarray:
    if self.memory_limit is not None:
      return np.full(self.devices.num_devices, float(self.memory_limit))
    return np.asarray(self.devices.memory_capacity, np.float64)

  def duration_bound(self) -> float:
    """No schedule of the wc or sync model takes longer than doing every task in a row."""
    devices, graph = self.devices, self.graph
    off_diagonal = ~np.eye(devices.num_devices, dtype=bool)
    per_byte = float((1.0 / devices.bandwidth[off_diagonal]).max(initial=0.0))
    latency = float(devices.latency[off_diagonal].max(initial=0.0))
    compute = graph.compute_cost.sum() / devices.speed.min()
    transfers = ((graph.tensor_size.sum() * per_byte + graph.num_tensors * latency)
                 * (devices.num_devices - 1))
    return float(compute + transfers + 1.0)


def _check_float32_range(problem: Problem) -> None:
  """The models compute in float32: every duration must survive it (an op time below its
  smallest normal number would count as 0, a sum past its largest as infinity), and so must
  the memory that every tensor alive at once would take."""
  graph, devices = problem.graph, problem.devices
  where = f"graph {graph.name!r} on these devices"
  if not problem.duration_bound() < FLOAT32_MAX:
    raise errors.ConfigError(
        f"{where}: running every op and transfer in a row takes {problem.duration_bound():.3g}, "
        f"beyond float32's {FLOAT32_MAX:.3g}, in which the models compute; scale the costs or "
        f"sizes down")
  tiny = float(np.finfo(np.float32).tiny)
  costs = graph.compute_cost[graph.compute_cost > 0]
  if costs.size and costs.min() / devices.speed.max() < tiny:
    raise errors.ConfigError(
        f"{where}: the cheapest op takes {costs.min() / devices.speed.max():.3g} on the fastest "
        f"device (speed {devices.speed.max():.3g}), below float32's smallest normal number "
        f"{tiny:.3g}: the models would count it as no time; scale the speeds down")
  sizes = graph.tensor_size[graph.tensor_size > 0]
  off_diagonal = ~np.eye(devices.num_devices, dtype=bool)
  if sizes.size and off_diagonal.any():
    fastest = float(devices.bandwidth[off_diagonal].max())
    quickest = sizes.min() / fastest + float(devices.latency[off_diagonal].min())
    if 0 < quickest < tiny or (quickest == 0 and np.isfinite(fastest)):
      raise errors.ConfigError(
          f"{where}: the smallest tensor crosses the fastest link (bandwidth {fastest:.3g}) in "
          f"{quickest:.3g}, below float32's smallest normal number {tiny:.3g}; scale the "
          f"bandwidths down")
  memory = float(graph.tensor_size.sum() + graph.extra_memory.sum())
  if models.get(problem.model).memory and not memory < FLOAT32_MAX:
    raise errors.ConfigError(
        f"{where}: the tensors and working memory add up to {memory:.3g} bytes, beyond "
        f"float32's {FLOAT32_MAX:.3g}, in which the models track peak memory; scale the sizes "
        f"down")


def objective_value(problem: Problem, makespan, peak_memory):
  """The objective from makespans [...] and peaks [..., D] (numpy or jax arrays)."""
  xp = jnp if isinstance(makespan, jax.Array) else np
  if problem.objective == "runtime":
    return makespan
  if problem.objective == "memory":
    return xp.max(peak_memory, axis=-1)
  limits = xp.asarray(problem.memory_limits, dtype=peak_memory.dtype)
  excess = xp.sum(xp.maximum(peak_memory - limits, 0), axis=-1)
  # A product with the reciprocal, not a quotient: XLA folds a division by a constant into
  # one, so numpy (the host scorers) and JAX would round differently.
  relative = excess * (1 / xp.sum(xp.where(xp.isinf(limits), 0, limits)))
  bound = problem.duration_bound()
  return xp.where(excess > 0, bound * (1 + relative), makespan)


# ----- reference (host) scoring ------------------------------------------------------------
def simulate_reference(problem: Problem, placement: np.ndarray, op_priority: np.ndarray,
                       transfer_priority: np.ndarray) -> Schedule:
  """One solution through the model's slow, readable reference; its peaks hold the resident
  parameters too (`resident_lib.held_bytes`)."""
  schedule = models.get(problem.model).reference(problem.graph, problem.devices, placement,
                                                 op_priority, transfer_priority, problem.dtype)
  if problem.resident is None:
    return schedule
  held = resident_lib.held_bytes(problem.graph, placement, problem.devices.num_devices)
  peak = np.asarray(schedule.peak_memory)
  return schedule._replace(peak_memory=(peak + np.asarray(held)).astype(peak.dtype))


def score_reference(problem: Problem, chromosome: np.ndarray) -> tuple[float, Schedule]:
  decoded = chromosome_lib.decode(np.asarray(chromosome, np.float32), problem.layout)
  schedule = simulate_reference(problem, np.asarray(decoded.placement),
                                np.asarray(decoded.op_priority),
                                np.asarray(decoded.transfer_priority))
  value = objective_value(problem, np.float64(schedule.makespan),
                          np.asarray(schedule.peak_memory, np.float64))
  return float(value), schedule


# ----- batched JAX scoring -----------------------------------------------------------------
class ReferenceScores:
  """`score_reference` of one problem's chromosomes, each computed once: a search's answer,
  its seeds and the candidates a result chooses from share one reference run each."""

  def __init__(self, problem: Problem):
    self.problem = problem
    self._scores: dict[bytes, tuple[float, Schedule]] = {}

  @staticmethod
  def _key(chromosome: np.ndarray) -> bytes:
    return np.asarray(chromosome, np.float32).tobytes()

  def __call__(self, chromosome: np.ndarray) -> tuple[float, Schedule]:
    key = self._key(chromosome)
    if key not in self._scores:
      self._scores[key] = score_reference(self.problem, chromosome)
    return self._scores[key]

  def remember(self, chromosome: np.ndarray, objective: float, schedule: Schedule) -> None:
    """Records a score computed elsewhere by `score_reference` on this problem."""
    self._scores[self._key(chromosome)] = (objective, schedule)


# ----- host scoring (the native engines), and one compiled fitness per size bucket -----------
# The native search scores a chromosome by its objective plus TIE_BREAK times its mean op
# completion time where the model gives that time (`Model.native_completion`) and the
# objective is the runtime (under a memory limit a feasible score must stay below every
# infeasible one, `objective_value`). The mean completion is at most the makespan, so the score is
# within 1% above the objective, and only makespans less than 1% apart can trade places.
# Why: sharded workloads' makespans come in steps (one block more or less on the busiest
# device), and between two steps every move leaves the makespan unchanged, so the search and
# its climbers see a plateau; the completion times tell which of the equal makespans is nearer
# the next step down. Chosen on training graphs (sharded 2d-grid chain_mm, llama_block and
# llama_layer on WC x8 and llama_layer x4, ffnn at 300 flops/byte x8; default budgets, seeds
# 0-4; weights 0, 1e-3, 1e-2, 3e-2, 1e-1): mean gap to the best of all runs 9.44% -> 6.44%,
# seeds within 1% 5 -> 11 of 25; against no tie-breaker 14 paired wins and 6 losses (1e-3:
# 7.68%, 7 of 25, 18 wins and 2 losses; 1e-1: 5.51%, 12 of 25, but trading up to 10% of
# makespan). The answer is the lowest objective of the search's final populations, and every
# reported objective is the model's own (`brkga_search`).
TIE_BREAK = 1e-2


def breaks_ties(problem: Problem) -> bool:
  """Whether the search's score of `problem` carries the tie-breaker (`TIE_BREAK`)."""
  return (models.get(problem.model).native_completion is not None
          and problem.objective == "runtime" and scoring_engine(problem) == "native")


def host_scorer(problem: Problem, tie_break: bool = False
                ) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
  """For a problem of the native engine: a host function (placement [P, o], op priority
  [P, o], transfer priority [P, t, D]) -> objective [P] (float32), the same values as
  `make_fitness_fn`, without JAX (compiled now, so no call compiles inside a callback).
  `tie_break`: the search's score instead, where `breaks_ties(problem)`."""
  search, objective = _native_scorers(problem)
  return search if tie_break else objective


def _native_scorers(problem: Problem) -> tuple[Callable, Callable]:
  """(the search's score, the objective) as host functions over one host graph: where the
  search breaks ties both read the same simulation, one with its mean completion time."""
  if scoring_engine(problem) != "native":
    raise errors.ConfigError("host scoring needs the native engine")
  spec, memory = models.get(problem.model), needs_memory(problem)
  if breaks_ties(problem):
    simulate = spec.native_completion(problem.graph, problem.devices, memory)
  else:
    native = spec.native(problem.graph, problem.devices, memory)
    simulate = lambda *arrays: (*native(*arrays), None)  # noqa: E731

  def score(placement, priority, transfer, tie_break: bool):
    makespan, peak, completion = simulate(placement, priority, transfer)
    if memory:
      peak = problem.with_resident(placement, peak)
    if tie_break and completion is not None:
      makespan = np.asarray(makespan + TIE_BREAK * completion, np.float32)
    return np.asarray(objective_value(problem, makespan, peak), np.float32)
  search = functools.partial(score, tie_break=True)
  objective = functools.partial(score, tie_break=False)
  layout = problem.layout
  objective(np.zeros((0, layout.num_ops), np.int32), np.zeros((0, layout.num_ops), np.float32),
            np.zeros((0, layout.num_tensors, layout.num_devices), np.float32))
  return search, objective


DECODERS = decoders.BUILT_IN  # The registry's built-in decoders (`regal.scoring.decoders`).


def host_decoder(problem: Problem, decoder: str = "direct", bias: float = 0.0
                 ) -> Callable[[np.ndarray], chromosome_lib.Decoded]:
  """A host function: chromosomes [P, n] of the problem's layout -> their decoded assignments
  (numpy), by the named decoder (`regal.scoring.decoders`)."""
  return decoders.get(decoder).host(problem, bias)


class BucketScorer:
  """`BucketScorer(problem, decoder, bias, bucket)` scores chromosomes of the padded layout
  `bucket` (default `bucket_layout(problem, decoder)`) on the host, decoded by the problem's
  decoder: `search_scores` as the search ranks them (its host scorer, with the tie-breaker
  where `breaks_ties`), `objectives` by the objective itself. One search program serves every
  graph of a bucket: only the scorer changes."""

  def __init__(self, problem: Problem, decoder: str = "direct", bias: float = 0.0,
               bucket: chromosome_lib.Layout | None = None):
    search, objective = _native_scorers(problem)
    own, bucket = problem.layout, bucket or bucket_layout(problem, decoder)
    record = decoders.get(decoder)
    if record.bucket_host is not None:  # One compiled pass from the bucket layout.
      decode_bucket = record.bucket_host(problem, own, bucket)
    else:
      decode = record.host(problem, bias)
      decode_bucket = lambda chromosomes: decode(chromosome_lib.from_bucket_batch(  # noqa: E731
          own, bucket, np.asarray(chromosomes)))

    def scorer_of(score):  # Bucket-layout chromosomes, decoded on the host.
      return lambda chromosomes: score(*decode_bucket(chromosomes))

    self._search_scores = scorer_of(search)
    self._objectives = scorer_of(objective)

  def objectives(self, chromosomes: np.ndarray) -> np.ndarray:
    """Bucket-layout chromosomes [P, bucket.size] -> their objectives [P] (float32)."""
    return np.asarray(self._objectives(chromosomes), np.float32)

  def search_scores(self, chromosomes: np.ndarray) -> np.ndarray:
    """Bucket-layout chromosomes [P, bucket.size] -> the search's scores [P] (float32): the
    objective, with the tie-breaker where `breaks_ties`."""
    return np.asarray(self._search_scores(chromosomes), np.float32)


def reads_transfer_genes(problem: Problem, decoder: str = "direct") -> bool:
  """Whether the decoded schedule depends on a chromosome's transfer genes: the model reads
  transfer priorities and the decoder takes them from the genes (the consumer decoder derives
  them from the op priorities instead)."""
  return models.get(problem.model).reads_transfer_priority and not decoders.get(
      decoder).derives_transfers


def bucket_layout(problem: Problem, decoder: str = "direct") -> chromosome_lib.Layout:
  """The problem's layout with ops and tensors rounded up to size buckets; no tensors (no
  transfer genes) where no decoded schedule depends on them (`reads_transfer_genes`)."""
  return chromosome_lib.Layout(padding.bucket_size(problem.graph.num_ops),
                               padding.bucket_size(problem.graph.num_tensors)
                               if reads_transfer_genes(problem, decoder) else 0,
                               problem.devices.num_devices)


def needs_memory(problem: Problem) -> bool:
  """Whether scoring must track memory: only the memory objectives read it."""
  return problem.objective != "runtime"


def sim_graph_for(problem: Problem, memory: bool | None = None) -> SimGraph:
  """The padded work lists the JAX event models (wc, sync) walk (benchmarks read them)."""
  memory = needs_memory(problem) if memory is None else memory
  return build_sim_graph(problem.graph, problem.devices, dtype=problem.dtype, memory=memory)


def scoring_engine(problem: Problem) -> str:
  """The engine batched scoring uses for `problem` ("jax" or "native"; see `ENGINES`)."""
  spec = models.get(problem.model)
  if spec.jax is None:
    return "native"
  if spec.native is None:
    return "jax"
  if problem.engine != "auto":
    return problem.engine
  float32 = np.dtype(problem.dtype) == np.float32 or not spec.native_float32_only
  return "native" if float32 and jax.default_backend() == "cpu" else "jax"


def make_fitness_fn(problem: Problem, decoder: str = "direct", bias: float = 0.0
                    ) -> Callable[..., jnp.ndarray]:
  """A jitted function chromosomes [P, n] -> objective values [P] (smaller is better), the
  chromosomes read by the named decoder (`regal.scoring.decoders`), scored by the model's
  native host loop or its JAX version."""
  record = decoders.get(decoder)

  def decode(chromosomes):
    return record.traced(problem, chromosomes, bias)

  if scoring_engine(problem) == "native":
    score = host_scorer(problem)

    @jax.jit
    def host_fitness(chromosomes: jnp.ndarray) -> jnp.ndarray:
      # The host loop spreads the population over the cores itself.
      return native_common.makespan_callback(score, *decode(chromosomes))
    return host_fitness

  data, simulate = models.get(problem.model).jax(problem.graph, problem.devices, problem.dtype,
                                                 needs_memory(problem))

  def local_fitness(data, chromosomes: jnp.ndarray):
    decoded = decode(chromosomes)
    makespan, peak = simulate(data, decoded.placement, decoded.op_priority,
                              decoded.transfer_priority)
    if needs_memory(problem):
      peak = problem.with_resident(decoded.placement, peak)
    return objective_value(problem, makespan, peak)

  @jax.jit
  def fitness(chromosomes: jnp.ndarray) -> jnp.ndarray:
    if not record.shardable:  # A host decoder: no sharding.
      return local_fitness(data, chromosomes)
    return parallel.over_local_devices(local_fitness, chromosomes.shape[0])(data, chromosomes)

  return fitness


class ChromosomeScorer:
  """The problem's batched model on chromosomes [B, n] (float32, direct decoder), counting
  evaluations: the native engines' host scorer directly (no compile), else the jitted fitness
  on fixed-size batches (one compile). The hill climb and local search score their moves
  with it."""

  def __init__(self, problem: Problem, batch_size: int):
    self.host = host_scorer(problem) if scoring_engine(problem) == "native" else None
    self.fitness = None if self.host else make_fitness_fn(problem)
    self.batch_size = batch_size
    self.layout = problem.layout
    self.evaluations = 0

  def __call__(self, chromosomes: np.ndarray) -> np.ndarray:
    chromosomes = np.asarray(chromosomes, np.float32)
    self.evaluations += len(chromosomes)
    if self.host is not None:
      decoded = chromosome_lib.decode(chromosomes, self.layout)
      return np.asarray(self.host(decoded.placement, decoded.op_priority,
                                  decoded.transfer_priority), np.float64)
    values = []
    for begin in range(0, len(chromosomes), self.batch_size):
      chunk = chromosomes[begin:begin + self.batch_size]
      rows = len(chunk)
      chunk = np.concatenate([chunk, np.repeat(chunk[:1], self.batch_size - rows, 0)])
      values.append(np.asarray(self.fitness(jnp.asarray(chunk)), np.float64)[:rows])
    return np.concatenate(values)


@dataclasses.dataclass(frozen=True, eq=False)
class Evaluator:
  """Everything the search needs to know about scoring one problem, resolved once (issue 71):
  the model's and the decoder's records, the engine, whether the search runs on the bucket
  layout (native engines) and with which layouts, whether its score breaks ties and reads
  transfer and priority genes; its host decoder; and the scorers built from them (`fitness`,
  `bucket_scorer`). The search takes it instead of asking this module about the problem
  again, and reads its facts as fields."""
  problem: Problem
  model: models.Model
  decoder: decoders.Decoder
  bias: float
  engine: str
  bucketed: bool  # The search runs on the bucket layout, scored on the host (native engines).
  breaks_ties: bool
  reads_transfer_genes: bool
  reads_priorities: bool  # Priority genes change a schedule: the model or the decoder reads them.
  layout: chromosome_lib.Layout  # The problem's own.
  bucket: chromosome_lib.Layout  # The layout padded to size buckets (the decoder's genes).
  # The direct decoder's searched layout: what the default parameters are sized by, so a
  # decoder changes which genes are searched, not the population (`brkga_search.search_layout`).
  direct_layout: chromosome_lib.Layout
  # Chromosomes [P, n] of the problem's layout -> their assignments (numpy).
  host_decode: Callable[[np.ndarray], chromosome_lib.Decoded]

  @staticmethod
  def of(problem: Problem, decoder: str = "direct", bias: float = 0.0) -> "Evaluator":
    model, record = models.get(problem.model), decoders.get(decoder)
    engine = scoring_engine(problem)
    bucketed = engine == "native"
    return Evaluator(
        problem, model, record, bias, engine, bucketed, breaks_ties(problem),
        reads_transfer_genes(problem, decoder),
        model.reads_op_priority or record.reads_priority(model), problem.layout,
        bucket_layout(problem, decoder), bucket_layout(problem) if bucketed else problem.layout,
        record.host(problem, bias))

  def fitness(self) -> Callable[..., jnp.ndarray]:
    """The jitted batched fitness (`make_fitness_fn`)."""
    return make_fitness_fn(self.problem, self.decoder.name, self.bias)

  def bucket_scorer(self, bucket: chromosome_lib.Layout | None = None) -> "BucketScorer":
    """The host scorer of bucket-layout chromosomes (`BucketScorer`)."""
    return BucketScorer(self.problem, self.decoder.name, self.bias, bucket)
