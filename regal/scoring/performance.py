"""Scoring chromosomes: decode, simulate with a performance model, reduce to an objective.

This is the one scoring path every optimizer uses. Models:
  wc       work-conserving asynchronous model (Doppler), JAX (`regal.scoring.wc_model`), the default;
  sync     REGAL's synchronous-transfer model, JAX (`regal.scoring.sync_model`);
  doppler  the Doppler repository's simulator (SimPy reference `regal.scoring.doppler_sim`; batched
           exactly by the compiled event loop `regal.scoring.native_doppler`), runtime only;
  delay    the classic delay model of the task-scheduling literature, ops in the
           priority-driven topological order (reference `reference_models.simulate_delay`,
           JAX `regal.scoring.delay_model`, compiled `regal.scoring.native_delay`), runtime only.
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
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from datasets import errors, padding
from datasets.devices import DeviceSpec
from datasets.graph import Graph
from regal.scoring import parallel
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import (delay_model, doppler_sim, list_decoder, native_common, native_delay,
                           native_doppler, native_sync, native_wc, reference_models, sync_model,
                           wc_model)
from regal.scoring.schedule import Schedule
from regal.scoring.sim_graph import SimGraph, build_sim_graph

MODELS = ("wc", "sync", "doppler", "delay")
FLOAT32_MAX = float(np.finfo(np.float32).max)
# How batched scoring runs: "jax" (the JAX models, any backend), "native" (compiled host loops:
# `regal.scoring.native_wc`, 3-6x faster on a CPU, `regal.scoring.native_delay`, and
# `regal.scoring.native_doppler`, the doppler model's only batched scorer), "auto" (native for the doppler model, and for the
# wc and delay models in float32 when JAX runs on a CPU; else jax).
ENGINES = ("auto", "jax", "native")
WC_CHUNK = 8  # Work entries per loop step (both JAX models): fewer steps beat narrower ones.
OBJECTIVES = ("runtime", "memory", "runtime_under_memory")


@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
  """A graph on a device set, scored by one model and objective."""
  graph: Graph
  devices: DeviceSpec
  model: str = "wc"
  objective: str = "runtime"
  memory_limit: float | None = None  # Per device; default: the devices' capacities.
  pinned: np.ndarray | None = None  # [o] device or -1 (chromosome.NO_PIN)
  noise_sigma: float = 0.0  # Stochastic WC: lognormal sigma of every duration.
  noise_samples: int = 8
  dtype: type = np.float32
  engine: str = "auto"

  def __post_init__(self):
    if self.model not in MODELS:
      raise errors.ConfigError(f"unknown model {self.model!r}; known: {', '.join(MODELS)}")
    if self.objective not in OBJECTIVES:
      raise errors.ConfigError(f"unknown objective {self.objective!r}; known: "
                               f"{', '.join(OBJECTIVES)}")
    if self.objective == "runtime_under_memory" and self.memory_limit is None and np.isinf(
        self.devices.memory_capacity).all():
      raise errors.ConfigError("objective runtime_under_memory needs a memory limit "
                               "(--memory_limit or device memory capacities)")
    if self.memory_limit is not None and not self.memory_limit > 0:
      raise errors.ConfigError(f"memory limit must be positive, got {self.memory_limit}")
    if self.noise_sigma < 0 or (self.noise_sigma > 0 and self.model != "wc"):
      raise errors.ConfigError("stochastic durations (noise_sigma > 0) need the wc model and "
                               "a non-negative sigma")
    if self.model in ("doppler", "delay") and self.objective != "runtime":
      raise errors.ConfigError(f"the {self.model} model has no memory: use objective runtime")
    if self.engine not in ENGINES:
      raise errors.ConfigError(f"unknown engine {self.engine!r}; known: {', '.join(ENGINES)}")
    if self.engine == "native" and self.model != "doppler" and np.dtype(
        self.dtype) != np.float32:
      raise errors.ConfigError("the native engine scores the wc, sync and delay models in "
                               "float32 and the doppler model")
    if self.engine == "jax" and self.model == "doppler":
      raise errors.ConfigError("the doppler model is scored by the native engine only")
    if np.dtype(self.dtype) == np.float32:
      _check_float32_range(self)

  @property
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
  if problem.model in ("wc", "sync") and not memory < FLOAT32_MAX:
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
  relative = excess / xp.sum(xp.where(xp.isinf(limits), 0, limits))
  bound = problem.duration_bound()
  return xp.where(excess > 0, bound * (1 + relative), makespan)


def pin_heaviest_to_first_device(graph: Graph) -> np.ndarray:
  """REGAL's symmetry breaking: the op of largest compute cost sits on device 0."""
  pinned = np.full(graph.num_ops, chromosome_lib.NO_PIN)
  pinned[int(np.argmax(graph.compute_cost))] = 0
  return pinned


# ----- reference (host) scoring ------------------------------------------------------------
def simulate_reference(problem: Problem, placement: np.ndarray, op_priority: np.ndarray,
                       transfer_priority: np.ndarray) -> Schedule:
  """One solution through the slow, readable model (or the SimPy one for 'doppler')."""
  if problem.model == "doppler":
    return doppler_sim.simulate_doppler(problem.graph, problem.devices, placement)
  if problem.model == "delay":
    return reference_models.simulate_delay(problem.graph, problem.devices, placement,
                                           op_priority, dtype=problem.dtype)
  simulate = (reference_models.simulate_wc if problem.model == "wc"
              else reference_models.simulate_synchronous)
  return simulate(problem.graph, problem.devices, placement, op_priority, transfer_priority,
                  dtype=problem.dtype)


def score_reference(problem: Problem, chromosome: np.ndarray) -> tuple[float, Schedule]:
  decoded = chromosome_lib.decode(np.asarray(chromosome, np.float32), problem.layout,
                                  problem.pinned)
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


def _host_scored_fitness_fn(problem: Problem, decoder: str = "direct", bias: float = 0.0
                            ) -> Callable[..., jnp.ndarray]:
  """Batched fitness of the delay and doppler models, and of the sync model on the native
  engine: decode (in JAX, or on the host for the list decoder), then the compiled host loop
  (`host_scorer`: `native_delay`, `native_doppler`, `native_sync`) or the JAX delay model."""
  layout = problem.layout
  pinned = None if problem.pinned is None else jnp.asarray(problem.pinned, jnp.int32)
  native = scoring_engine(problem) == "native"
  score = host_scorer(problem) if native else None
  graph = None if native else jax.tree_util.tree_map(jnp.asarray, delay_model.build_delay_graph(
      problem.graph, problem.devices, problem.dtype))

  def decode(chromosomes):
    if decoder != "direct":
      return _list_decoded(problem, chromosomes, bias)
    return jax.vmap(lambda c: chromosome_lib.decode(c, layout, pinned))(chromosomes)

  def local_fitness(graph, chromosomes):
    decoded = decode(chromosomes)
    return delay_model.makespan_batch(graph, decoded.placement, decoded.op_priority)

  @jax.jit
  def fitness(chromosomes: jnp.ndarray, key: jax.Array | None = None) -> jnp.ndarray:
    del key  # Deterministic.
    if native:  # The host loop spreads the population over the cores itself.
      return native_common.makespan_callback(score, *decode(chromosomes))
    if decoder != "direct":  # A host decoder: no sharding.
      return local_fitness(graph, chromosomes)
    return parallel.over_local_devices(local_fitness, chromosomes.shape[0])(graph, chromosomes)

  return fitness


# ----- host scoring (the native engines), and one compiled fitness per size bucket -----------
def host_scorer(problem: Problem) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
  """For a problem of the native engine: a host function (placement [P, o], op priority
  [P, o], transfer priority [P, t, D]) -> objective [P] (float32), the same values as
  `make_fitness_fn`, without JAX (compiled now, so no call compiles inside a callback)."""
  if scoring_engine(problem) != "native" or problem.noise_sigma > 0:
    raise errors.ConfigError("host scoring needs the native engine and deterministic durations")
  if problem.model == "doppler":
    graph = native_doppler.build_doppler_graph(problem.graph, problem.devices)
    score = lambda placement, priority, transfer: native_doppler.simulate(  # noqa: E731
        graph, placement).astype(np.float32)
  elif problem.model == "delay":
    graph = native_delay.build_native_delay_graph(problem.graph, problem.devices)
    score = lambda placement, priority, transfer: native_delay.simulate(  # noqa: E731
        graph, placement, priority)
  else:
    graph = native_wc.build_native_graph(problem.graph, problem.devices,
                                         memory=problem.objective != "runtime")
    simulate = native_sync.simulate if problem.model == "sync" else native_wc.simulate

    def score(placement, priority, transfer):
      makespan, peak = simulate(graph, placement, priority, transfer)
      return np.asarray(objective_value(problem, makespan, peak), np.float32)
  layout = problem.layout
  score(np.zeros((0, layout.num_ops), np.int32), np.zeros((0, layout.num_ops), np.float32),
        np.zeros((0, layout.num_tensors, layout.num_devices), np.float32))
  return score


# `regal.scoring.chromosome.decode`, `regal.scoring.list_decoder.decode`.
DECODERS = ("direct", "list")


def host_decoder(problem: Problem, decoder: str = "direct", bias: float = 0.0
                 ) -> Callable[[np.ndarray], chromosome_lib.Decoded]:
  """A host function: chromosomes [P, n] of the problem's layout -> their decoded assignments
  (numpy), by the direct or the list-scheduling decoder."""
  if decoder not in DECODERS:
    raise errors.ConfigError(f"unknown decoder {decoder!r}; known: {', '.join(DECODERS)}")
  layout, pinned = problem.layout, problem.pinned
  if decoder == "direct":
    return lambda chromosomes: chromosome_lib.decode(
        np.asarray(chromosomes, np.float32), layout, pinned)
  graph = native_delay.build_native_delay_graph(problem.graph, problem.devices)
  return lambda chromosomes: list_decoder.decode(graph, chromosomes, layout, bias, pinned)


def _list_decoded(problem: Problem, chromosomes: jnp.ndarray, bias: float
                  ) -> chromosome_lib.Decoded:
  """The list decoder under `jit`: a host callback (placement and priorities), the transfer
  keys read in JAX."""
  layout = problem.layout
  decode = host_decoder(problem, "list", bias)
  batch = chromosomes.shape[0]
  placement, priority = jax.pure_callback(
      lambda c: tuple(decode(np.asarray(c))[:2]),
      (jax.ShapeDtypeStruct((batch, layout.num_ops), jnp.int32),
       jax.ShapeDtypeStruct((batch, layout.num_ops), jnp.float32)), chromosomes)
  transfer = chromosomes[:, layout.transfer_slice].reshape(batch, layout.num_tensors,
                                                          layout.num_devices)
  return chromosome_lib.Decoded(placement, priority, transfer)


_REGISTERED: dict[int, tuple[Callable, int, int]] = {}
_REGISTERED_CHROMOSOMES: dict[int, Callable] = {}


class registered_scorer:
  """`with registered_scorer(problem) as handle:` makes the problem's host scorer callable
  from a `bucket_fitness_fn` under `handle` (an int operand, so one compiled search serves
  every graph of a bucket); `bucket`: the padded layout (default `bucket_layout(problem)`)."""

  _next = 0

  def __init__(self, problem: Problem, decoder: str = "direct", bias: float = 0.0,
               bucket: chromosome_lib.Layout | None = None):
    self.entry = (host_scorer(problem), problem.graph.num_ops, problem.graph.num_tensors)
    decode = host_decoder(problem, decoder, bias)
    own, bucket = problem.layout, bucket or bucket_layout(problem)
    score = self.entry[0]

    def score_chromosomes(chromosomes):  # Bucket-layout chromosomes, decoded on the host.
      decoded = decode(chromosome_lib.from_bucket_batch(own, bucket, np.asarray(chromosomes)))
      return score(*decoded)

    self.chromosome_entry = score_chromosomes

  def __enter__(self) -> int:
    registered_scorer._next += 1
    self.handle = registered_scorer._next
    _REGISTERED[self.handle] = self.entry
    _REGISTERED_CHROMOSOMES[self.handle] = self.chromosome_entry
    return self.handle

  def __exit__(self, *exc) -> None:
    del _REGISTERED[self.handle]
    del _REGISTERED_CHROMOSOMES[self.handle]


def score_registered(handle, placement, priority, transfer) -> np.ndarray:
  score, num_ops, num_tensors = _REGISTERED[int(handle)]
  return score(np.asarray(placement)[:, :num_ops], np.asarray(priority)[:, :num_ops],
               np.asarray(transfer)[:, :num_tensors])


def bucket_layout(problem: Problem) -> chromosome_lib.Layout:
  """The problem's layout with ops and tensors rounded up to size buckets."""
  return chromosome_lib.Layout(padding.bucket_size(problem.graph.num_ops),
                               padding.bucket_size(problem.graph.num_tensors),
                               problem.devices.num_devices)


def score_registered_chromosomes(handle, chromosomes) -> np.ndarray:
  return np.asarray(_REGISTERED_CHROMOSOMES[int(handle)](chromosomes), np.float32)


def bucket_fitness_fn(bucket: chromosome_lib.Layout, decoder: str = "direct"
                      ) -> Callable[..., jnp.ndarray]:
  """(chromosomes [P, bucket.size], handle) -> objectives [P] of the problem registered under
  `handle` (`registered_scorer`); padded genes decode to ops and tensors the scorer drops.
  The list decoder decodes on the host, with the registered problem's decoder."""

  if decoder != "direct":
    def fitness(chromosomes: jnp.ndarray, handle: jnp.ndarray) -> jnp.ndarray:
      return jax.pure_callback(score_registered_chromosomes,
                               jax.ShapeDtypeStruct(chromosomes.shape[:1], jnp.float32),
                               handle, chromosomes)
    return fitness

  def fitness(chromosomes: jnp.ndarray, handle: jnp.ndarray) -> jnp.ndarray:
    decoded = jax.vmap(lambda c: chromosome_lib.decode(c, bucket))(chromosomes)
    return jax.pure_callback(score_registered,
                             jax.ShapeDtypeStruct(chromosomes.shape[:1], jnp.float32), handle,
                             decoded.placement, decoded.op_priority, decoded.transfer_priority)

  return fitness


def needs_memory(problem: Problem) -> bool:
  """Whether scoring must track memory: the WC model skips it when only the makespan counts."""
  return problem.objective != "runtime" or problem.model != "wc"


def sim_graph_for(problem: Problem, memory: bool | None = None) -> SimGraph:
  memory = needs_memory(problem) if memory is None else memory
  return build_sim_graph(problem.graph, problem.devices, dtype=problem.dtype, memory=memory)


def scoring_engine(problem: Problem) -> str:
  """The engine batched scoring uses for `problem` ("jax" or "native"; see `ENGINES`)."""
  if problem.model == "doppler":
    return "native"
  if problem.engine != "auto":
    return problem.engine
  native = (problem.model in ("wc", "sync", "delay") and np.dtype(problem.dtype) == np.float32
            and jax.default_backend() == "cpu")
  return "native" if native else "jax"


def scoring_graph(problem: Problem) -> SimGraph | native_wc.NativeGraph:
  """What `simulate_chromosomes` walks: the padded `SimGraph` (jax engine, as JAX arrays) or
  the host arrays of the native engine."""
  if scoring_engine(problem) == "native":
    return native_wc.build_native_graph(problem.graph, problem.devices,
                                        memory=needs_memory(problem))
  return jax.tree_util.tree_map(jnp.asarray, sim_graph_for(problem))


def padded_inputs(problem: Problem, sim: SimGraph | native_wc.NativeGraph,
                   chromosomes: jnp.ndarray, decoded: chromosome_lib.Decoded | None = None):
  layout = problem.layout
  pinned = None if problem.pinned is None else jnp.asarray(problem.pinned, jnp.int32)
  if decoded is None:
    decoded = jax.vmap(lambda c: chromosome_lib.decode(c, layout, pinned))(chromosomes)
  if isinstance(sim, native_wc.NativeGraph):  # Unpadded: the native model has no buckets.
    return decoded.placement, decoded.op_priority, decoded.transfer_priority
  extra_ops = sim.op_mask.shape[0] - layout.num_ops
  extra_tensors = sim.tensor_size.shape[0] - layout.num_tensors
  placement = jnp.pad(decoded.placement, ((0, 0), (0, extra_ops)))
  op_priority = jnp.pad(decoded.op_priority, ((0, 0), (0, extra_ops)))
  transfer_priority = jnp.pad(decoded.transfer_priority, ((0, 0), (0, extra_tensors), (0, 0)))
  return placement, op_priority, transfer_priority


def _simulate(problem: Problem, sim: SimGraph | native_wc.NativeGraph, placement, op_priority,
              transfer_priority, op_scale=None, transfer_scale=None,
              record_times: bool = False) -> wc_model.SimResult:
  if isinstance(sim, native_wc.NativeGraph):
    makespan, peak = native_wc.simulate_batch(sim, placement, op_priority, transfer_priority,
                                              op_scale, transfer_scale)
    none = jnp.zeros(makespan.shape + (0,), makespan.dtype)
    return wc_model.SimResult(makespan, peak, none, none, none[..., None], none[..., None])
  if problem.model == "sync":
    return sync_model.simulate_batch(sim, placement, op_priority, transfer_priority,
                                     chunk=WC_CHUNK, record_times=record_times)
  return wc_model.simulate_batch(sim, placement, op_priority, transfer_priority, op_scale,
                                 transfer_scale, chunk=WC_CHUNK, record_times=record_times)


def simulate_chromosomes(problem: Problem, sim: SimGraph | native_wc.NativeGraph,
                         chromosomes: jnp.ndarray, key: jax.Array | None = None,
                         record_times: bool = False,
                         decoded: chromosome_lib.Decoded | None = None) -> wc_model.SimResult:
  """Batched simulation of chromosomes [P, layout.size] (jit-compatible) on `sim`, a
  `SimGraph` (JAX models) or a `NativeGraph` (the native WC model; `scoring_graph`).

  Op and transfer times are recorded only with `record_times` (fitness needs only makespan
  and peak memory; the native model records none). In stochastic mode (noise_sigma > 0)
  each chromosome is simulated `noise_samples` times with independent lognormal duration noise drawn from `key`; results gain a leading sample
  axis [S, P, ...].
  """
  if problem.model in ("doppler", "delay"):
    raise errors.ConfigError(f"the {problem.model} model has no event simulation here; "
                             f"make_fitness_fn scores it")
  if problem.model == "sync" and isinstance(sim, native_wc.NativeGraph):
    raise errors.ConfigError("the native sync model scores through make_fitness_fn")
  if record_times and isinstance(sim, native_wc.NativeGraph):
    raise errors.ConfigError("the native engine records no times; score with engine='jax'")
  placement, op_priority, transfer_priority = padded_inputs(problem, sim, chromosomes, decoded)
  if problem.noise_sigma == 0:
    return _simulate(problem, sim, placement, op_priority, transfer_priority,
                     record_times=record_times)
  if key is None:
    raise errors.ConfigError("stochastic scoring needs an explicit PRNG key")
  samples, population = problem.noise_samples, chromosomes.shape[0]
  op_key, transfer_key = jax.random.split(key)
  dtype = (jnp.float32 if isinstance(sim, native_wc.NativeGraph)
           else sim.compute_cost.dtype)
  op_scale = jnp.exp(problem.noise_sigma * jax.random.normal(
      op_key, (samples, population) + placement.shape[1:], dtype))
  transfer_scale = jnp.exp(problem.noise_sigma * jax.random.normal(
      transfer_key, (samples, population) + transfer_priority.shape[1:], dtype))
  repeat = lambda x: jnp.broadcast_to(x, (samples,) + x.shape).reshape((-1,) + x.shape[1:])
  result = _simulate(
      problem, sim, repeat(placement), repeat(op_priority), repeat(transfer_priority),
      op_scale.reshape((-1,) + op_scale.shape[2:]),
      transfer_scale.reshape((-1,) + transfer_scale.shape[2:]), record_times=record_times)
  return jax.tree_util.tree_map(lambda x: x.reshape((samples, population) + x.shape[1:]),
                                result)


def make_fitness_fn(problem: Problem, decoder: str = "direct", bias: float = 0.0
                    ) -> Callable[..., jnp.ndarray]:
  """A jitted function chromosomes [P, n] (, key) -> objective values [P] (smaller is better),
  the chromosomes read by the direct or the list-scheduling decoder (`DECODERS`)."""
  if decoder not in DECODERS:
    raise errors.ConfigError(f"unknown decoder {decoder!r}; known: {', '.join(DECODERS)}")
  if problem.model in ("delay", "doppler") or (problem.model == "sync"
                                               and scoring_engine(problem) == "native"):
    return _host_scored_fitness_fn(problem, decoder, bias)
  sim = scoring_graph(problem)
  native = isinstance(sim, native_wc.NativeGraph)
  shared = None if native else sim  # The native graph is host data, closed over.

  def local_fitness(shared, chromosomes: jnp.ndarray, key: jax.Array | None = None):
    decoded = None if decoder == "direct" else _list_decoded(problem, chromosomes, bias)
    result = simulate_chromosomes(problem, sim if native else shared, chromosomes, key,
                                  decoded=decoded)
    value = objective_value(problem, result.makespan, result.peak_memory)
    return value.mean(axis=0) if problem.noise_sigma > 0 else value

  @jax.jit
  def fitness(chromosomes: jnp.ndarray, key: jax.Array | None = None) -> jnp.ndarray:
    # Stochastic scoring runs unsharded: one key, one noise draw. The native engine spreads
    # the population over the cores itself (a host callback under shard_map deadlocked).
    if key is not None or native or decoder != "direct":  # A host decoder: no sharding.
      return local_fitness(shared, chromosomes, key)
    return parallel.over_local_devices(local_fitness, chromosomes.shape[0])(shared, chromosomes)

  return fitness


def assignment_chromosomes(placement: np.ndarray, rank: np.ndarray, num_devices: int,
                           num_tensors: int) -> np.ndarray:
  """[B, n] chromosomes of placements [B, o] and priority ranks [B, o] (0 runs first)."""
  batch, num_ops = placement.shape
  affinity = np.zeros((batch, num_ops, num_devices), np.float32)
  np.put_along_axis(affinity, placement[..., None], 1.0, axis=-1)
  transfer = np.full((batch, num_tensors * num_devices), 0.5, np.float32)
  return np.concatenate([affinity.reshape(batch, -1), rank_priorities(rank), transfer], axis=1)


def rank_priorities(rank: np.ndarray) -> np.ndarray:
  """Priority keys [B, o] of ranks (0 runs first): falling evenly from 1."""
  return (1.0 - rank / max(rank.shape[-1], 1)).astype(np.float32)


class AssignmentScorer:
  """The problem's batched model on placements and priority ranks [B, o] (0 runs first),
  counting evaluations: the native engines' host scorer directly (no compile), else the
  jitted fitness on fixed-size batches (one compile). Local search and the hill climb score
  their moves with it."""

  def __init__(self, problem: Problem, batch_size: int):
    self.host = (host_scorer(problem)
                 if scoring_engine(problem) == "native" and problem.noise_sigma == 0
                 and problem.pinned is None else None)
    self.fitness = None if self.host else make_fitness_fn(problem)
    self.batch_size = batch_size
    self.num_devices = problem.devices.num_devices
    self.num_tensors = problem.graph.num_tensors
    self.evaluations = 0

  def __call__(self, placements: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    self.evaluations += len(placements)
    if self.host is not None:  # What `assignment_chromosomes` decode to, without the genes.
      priority = rank_priorities(ranks)
      transfer = np.full((len(placements), self.num_tensors, self.num_devices), 0.5, np.float32)
      return np.asarray(self.host(placements, priority, transfer), np.float64)
    values = []
    for begin in range(0, len(placements), self.batch_size):
      chunk_placements = placements[begin:begin + self.batch_size]
      chunk_ranks = ranks[begin:begin + self.batch_size]
      rows = len(chunk_placements)
      pad = self.batch_size - rows
      chunk_placements = np.concatenate([chunk_placements,
                                         np.repeat(chunk_placements[:1], pad, 0)])
      chunk_ranks = np.concatenate([chunk_ranks, np.repeat(chunk_ranks[:1], pad, 0)])
      scored = self.fitness(jnp.asarray(assignment_chromosomes(
          chunk_placements, chunk_ranks, self.num_devices, self.num_tensors)))
      values.append(np.asarray(scored, np.float64)[:rows])
    return np.concatenate(values)
