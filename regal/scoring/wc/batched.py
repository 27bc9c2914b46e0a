"""The work-conserving (WC) performance model in JAX, batched over a population.

Semantics: exactly those of `regal.scoring.wc.reference.simulate_wc` (read its docstring first).

Formulation (why it is fast): a direct list scheduler scans every op at every step to find the
best ready one, O(ops) work per event. Here each step does O(devices^2 + K) work:
* ops are ranked once by priority, and each device keeps its ready ops as a bitset over ranks
  (`regal.scoring.ranked_sets`): the best ready op is the first set bit;
* each channel (ordered device pair) keeps its waiting transfers the same way, ranked by the
  receiving device's transfer priorities;
* running work is at most one op per device and one transfer per channel, so the next event
  is a minimum over D + D(D-1) end times;
* the edges an event affects are a contiguous range of a flat work list (`regal.scoring.sim_graph`),
  walked K entries per step, so a hub op costs a few extra steps instead of padding every
  step to the largest degree;
* everything a step looks up about an op or tensor sits in one row of a packed table, and
  durations are computed once before the loop, so a step does few gathers (on a CPU, batched
  gathers and scatters cost far more per element than arithmetic);
* bits enter the ready sets and queues by a masked scatter-add of the few new members: a
  one-hot sum over every word of every set cost ~25% more per step at 200 ops and grows
  with the graph; transfers leave their queues in the same scatter that queues new ones;
* what a dispatch needs about its pick (op or tensor at that rank, and its duration) is one
  row of a per-chromosome table indexed by rank.
A population runs in lockstep under one `lax.while_loop` whose condition is "any chromosome
has ops left": a transfer is only ever sent to a consumer, so once every op has finished every
transfer has too, and a counter replaces a scan of all ready sets and queues per step. A
finished chromosome's step changes no result (it may still walk its last op's releases).

How the JAX models stay fast (read before changing them):
- Keep per-step work independent of graph size: ranked bitsets for "best ready op", a flat
  work list walked K entries per step, packed per-op tables read once per step.
- Large per-chromosome state (`pending`, `uses_left`) is flat `[P * width]` and updated with
  `set_flat` from values computed off a read of the same entries; a `vmap`-batched scatter, a
  reshape inside the loop, or a scatter independent of the read made XLA copy the whole array
  every step (check the compiled HLO's while body for `copy(`).
- The loop condition is over the batch ("any chromosome busy"; for WC "any chromosome has
  ops left", a counter, since every transfer serves a consumer); the step must change no
  result for a finished chromosome (never rely on `vmap` of `while_loop`, which selects the
  whole carry).
- Profile before and after: `python -m regal_experiments.bench.profile_wc` prints ns per chromosome
  and step and the loop body's fusions by time with their source lines. Timings on the 2-core
  machines vary by up to ±30% between runs: compare versions with
  `python -m regal_experiments.bench.compare_wc --baseline REV`, which times both in turns in one
  process and checks they agree.
- What XLA's CPU backend did with the WC step (JAX 0.10, 200 ops, P = 512 per core, ~410
  steps per makespan-only evaluation at ~450 ns per chromosome and step, ~4,800 evaluations/s
  per core): gathers and scatters take 40% of the time at ~3 ns per element whatever the
  table, and a step reads ~80 elements per chromosome, so they alone bound the model near
  2x its speed. Steps are one per event (op or transfer): fewer would need several events per
  step. Things that made it slower:
  unrolling reductions over short axes into selects, a population-minor (`[X, P]`) layout, and
  one-hot updates feeding several consumers, deferring the ready-set removals to the next
  step's scatter (-20%), packing an op's device and rank into one int, gathering instead of
  reducing over the finishing device; XLA flags (thunk runtime off, fusion emitters, vector
  width) changed nothing measurable. XLA fuses a cheap elementwise producer into every
  consumer, so a scan that feeds a broadcast is recomputed per output element;
  `optimization_barrier` does not stop this on the CPU (it is removed before fusion). Reduces,
  gathers and scatters are never duplicated, which is why the step keeps them.
- Any change must keep `tests/jax_models_test.py` bit-exact against `wc/reference.py`.
- On a CPU the WC model's scorer is `wc.native` (numba), not the lockstep loop: XLA's per-kernel
  and per-gathered-element costs bound the loop near ~230 µs per 200-op chromosome per core,
  the compiled event loop takes ~45-55 µs. Its call path has three traps, each met once: a
  `pure_callback` under `shard_map` on several host devices deadlocked (the callback's inputs
  are `device_put` to CPU device 0 while that device's thread waits), so the native fitness runs
  unsharded and splits the population over its own threads (the kernel is `nogil`); JAX
  hands callbacks read-only arrays, for which numba compiles a second kernel, so inputs are
  made writeable first; and the kernel is compiled (or loaded from numba's cache) at trace
  time, never inside the callback. Keep `tests/native_wc_test.py` bit-exact against the
  reference too (same float32 operations in the same order; no `fastmath`).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from regal_datasets import analysis
from regal.scoring.ranked_sets import WORD_BITS, bit, first_set, gather_rows, ranks, scatter_rows
from regal.scoring.sim_graph import SimGraph
from regal.scoring.sim_shared import memory_plan, read_chunk, release_uses, satisfy


class SimResult(NamedTuple):
  makespan: jnp.ndarray  # []
  peak_memory: jnp.ndarray  # [D]
  op_start: jnp.ndarray  # [O] (empty unless times are recorded)
  op_end: jnp.ndarray  # [O]
  transfer_start: jnp.ndarray  # [T, D] (NaN: not sent)
  transfer_end: jnp.ndarray  # [T, D]


class _Context(NamedTuple):
  """Per-chromosome tables fixed for the whole simulation (computed once, before the loop)."""
  op_ints: jnp.ndarray  # [O, 2] (device, rank)
  op_release: jnp.ndarray  # [O] bytes released when the op ends
  op_by_rank: jnp.ndarray  # [O, 2] (op at rank r, its duration as bits): one row per dispatch
  output_queue_rank: jnp.ndarray  # [O, M * D] for op i's m-th output and device j, the rank
  #                                 of that transfer in j's queues (-1: none), one row per op
  transfer_by_rank: jnp.ndarray  # [D * T, 2] at [j * T + r]: (tensor at rank r among the
  #                                transfers to j, duration of sending it to j, as bits)


class _State(NamedTuple):
  now: jnp.ndarray
  ops_left: jnp.ndarray  # [] int32 ops not finished yet (the simulation ends at 0)
  pending: jnp.ndarray  # [O] requirements still missing ([P * O] flat in the batched loop)
  ready_words: jnp.ndarray  # [D, W] uint32 ready ops by rank
  queue_words: jnp.ndarray  # [C, WT] uint32 waiting transfers by rank, C = D (D - 1)
  device_op: jnp.ndarray  # [D] running op or -1
  device_end: jnp.ndarray  # [D] (inf when idle)
  channel_tensor: jnp.ndarray  # [C] running transfer or -1
  channel_end: jnp.ndarray  # [C]
  uses_left: jnp.ndarray  # [T * D] remaining uses of t on device j ([P * T * D] in the loop)
  resident: jnp.ndarray  # [D] bytes now
  peak: jnp.ndarray  # [D]
  makespan: jnp.ndarray  # [] latest op end so far
  work_pos: jnp.ndarray  # [] next work entry of the event being propagated
  work_end: jnp.ndarray  # []
  work_device: jnp.ndarray  # [] device that event happened on (or delivered to)
  work_src: jnp.ndarray  # [] sending device of the transfer being propagated
  op_start: jnp.ndarray  # [O] or [0] when times are not recorded
  op_end: jnp.ndarray
  transfer_start: jnp.ndarray  # [T * D] or [0]
  transfer_end: jnp.ndarray


def channel_index(src: jnp.ndarray, dst: jnp.ndarray, num_devices: int) -> jnp.ndarray:
  """Index of the channel src -> dst (src != dst) among the D (D - 1) channels, grouped by
  receiving device (so per-receiver sums are a reshape and a sum over D - 1 channels)."""
  return dst * (num_devices - 1) + src - (src > dst)


def channel_ends(num_devices: int) -> tuple[jnp.ndarray, jnp.ndarray]:
  """(src, dst) of every channel, in `channel_index` order."""
  pairs = [(a, b) for b in range(num_devices) for a in range(num_devices) if a != b]
  src = jnp.array([a for a, _ in pairs], jnp.int32).reshape(-1)
  dst = jnp.array([b for _, b in pairs], jnp.int32).reshape(-1)
  return src, dst


def _pack(ints: jnp.ndarray, floats: jnp.ndarray) -> jnp.ndarray:
  """[N] ints and [N] floats as one [N, 2] integer table (floats as their bits), so one row
  gather reads both."""
  bits = jax.lax.bitcast_convert_type(floats, jnp.int32 if floats.dtype.itemsize == 4
                                      else jnp.int64)
  return jnp.stack([ints.astype(bits.dtype), bits], axis=1)


def _unpack(rows: jnp.ndarray, dtype) -> tuple[jnp.ndarray, jnp.ndarray]:
  return (rows[..., 0].astype(jnp.int32),
          jax.lax.bitcast_convert_type(rows[..., 1], jnp.dtype(dtype)))


def _prepare(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
             transfer_priority: jnp.ndarray, record_times: bool) -> tuple[_Context, _State]:
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  channels = num_devices * (num_devices - 1)
  dtype = graph.compute_cost.dtype
  inf = jnp.array(jnp.inf, dtype)
  placement = jnp.where(graph.op_mask, placement, 0).astype(jnp.int32)
  # Padding ops rank last, so real ops keep their order among themselves.
  op_rank, op_at_rank = ranks(jnp.where(graph.op_mask, op_priority, -jnp.inf))
  tensor_rank, tensor_at_rank = jax.vmap(ranks, in_axes=1)(transfer_priority)  # [D, T]

  plan = memory_plan(graph, placement)
  home, needs_transfer, uses_left, end_release = plan
  # Same operations, in the same order, as the reference.
  duration = graph.compute_cost / graph.speed[placement]
  transfer_duration = analysis.link_time(graph.latency, graph.bandwidth, graph.tensor_size[:, None],
                                         home[:, None], jnp.arange(num_devices)[None], xp=jnp)

  words = -(-num_ops // WORD_BITS)
  tensor_words = -(-num_tensors // WORD_BITS)
  ready_words = jnp.zeros(num_devices * words, jnp.uint32).at[
      placement * words + op_rank // WORD_BITS].add(
          jnp.where(graph.in_edges == 0, bit(op_rank), jnp.uint32(0)))
  recorded_ops = num_ops if record_times else 0
  recorded_transfers = num_tensors * num_devices if record_times else 0
  state = _State(
      now=jnp.zeros((), dtype), ops_left=jnp.sum(graph.op_mask, dtype=jnp.int32),
      pending=graph.in_edges.astype(jnp.int32),
      ready_words=ready_words.reshape(num_devices, words),
      queue_words=jnp.zeros((channels, tensor_words), jnp.uint32),
      device_op=jnp.full(num_devices, -1, jnp.int32), device_end=jnp.full(num_devices, inf),
      channel_tensor=jnp.full(channels, -1, jnp.int32), channel_end=jnp.full(channels, inf),
      uses_left=uses_left.reshape(-1), resident=jnp.zeros(num_devices, dtype),
      peak=jnp.full(num_devices, 0.0 if graph.tracks_memory else jnp.nan, dtype),
      makespan=jnp.full((), -jnp.inf, dtype),
      work_pos=jnp.zeros((), jnp.int32), work_end=jnp.zeros((), jnp.int32),
      work_device=jnp.zeros((), jnp.int32), work_src=jnp.zeros((), jnp.int32),
      op_start=jnp.full(recorded_ops, jnp.nan, dtype),
      op_end=jnp.full(recorded_ops, jnp.nan, dtype),
      transfer_start=jnp.full(recorded_transfers, jnp.nan, dtype),
      transfer_end=jnp.full(recorded_transfers, jnp.nan, dtype))
  context = _Context(
      op_ints=jnp.stack([placement, op_rank], axis=1),
      op_release=end_release, op_by_rank=_pack(op_at_rank, duration[op_at_rank]),
      output_queue_rank=jnp.where(
          (graph.op_outputs >= 0)[..., None],
          jnp.where(needs_transfer, tensor_rank.T, -1)[jnp.maximum(graph.op_outputs, 0)],
          -1).reshape(num_ops, -1),
      transfer_by_rank=_pack(tensor_at_rank.reshape(-1), jnp.take_along_axis(
          transfer_duration.T, tensor_at_rank, axis=1).reshape(-1)))
  return context, state


def event_step(graph: SimGraph, ctx: _Context, s: _State, chunk: int, record_times: bool
               ) -> _State:
  """One loop step for a whole population (every array has a leading population axis).

  Propagate up to `chunk` work entries; then, with nothing left to propagate, dispatch if no
  event ends now, and complete the next event. A no-op for a chromosome with nothing left to
  do. Large per-chromosome arrays are read and written through `gather_rows` /
  `scatter_rows` (flat indices), which XLA's CPU backend runs several times faster than the
  batched gathers and scatters `vmap` would produce.
  """
  population = s.now.shape[0]
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  channels = num_devices * (num_devices - 1)
  words = s.ready_words.shape[-1]
  tensor_words = s.queue_words.shape[-1]
  inf = jnp.array(jnp.inf, s.now.dtype)
  device_ids = jnp.arange(num_devices, dtype=jnp.int32)
  channel_ids = jnp.arange(channels, dtype=jnp.int32)
  channel_src, channel_dst = channel_ends(num_devices)
  col = lambda x: x[:, None]  # noqa: E731  [P] -> [P, 1] for broadcasting.

  # ----- propagate: walk up to `chunk` entries of the last event's work list -----
  c = read_chunk(graph, s.work_pos, s.work_end, chunk)
  op_ints = gather_rows(ctx.op_ints, c.op)  # [P, K, 2]
  device, rank = op_ints[..., 0], op_ints[..., 1]
  memory = graph.tracks_memory  # Static: without it, no memory work at all (makespan only).
  uses_left, resident = s.uses_left, s.resident
  if memory:
    uses_left, resident = release_uses(graph, c, uses_left, resident, s.work_device,
                                       s.work_src)
  pending, _, now_ready = satisfy(graph, c, s.pending, device, s.work_device)
  ready_words = scatter_rows(s.ready_words.reshape(population, -1),
                             device * words + rank // WORD_BITS, bit(rank), add=True,
                             keep=now_ready)
  ready_words = ready_words.reshape(population, num_devices, words)
  active = s.work_pos < s.work_end
  work_pos = jnp.where(active, s.work_pos + chunk, s.work_pos)
  idle = work_pos >= s.work_end

  # ----- dispatch: idle devices and channels start their best candidates -----
  # Only when nothing is left to propagate and no event ends now (those complete first).
  next_end = jnp.minimum(s.device_end.min(axis=1), s.channel_end.min(axis=1, initial=jnp.inf))
  allowed = col(idle & (next_end > s.now))
  has_ready, op_rank, word_index = first_set(ready_words)  # [P, D]
  start = allowed & has_ready & (s.device_op < 0)
  started, started_duration = _unpack(
      gather_rows(ctx.op_by_rank, jnp.minimum(op_rank, num_ops - 1)), s.now.dtype)  # [P, D]
  word_ids = jnp.arange(words, dtype=jnp.int32)
  ready_words = ready_words + jnp.where(
      start[..., None] & (word_ids == word_index[..., None]),
      jnp.uint32(0) - bit(op_rank)[..., None], jnp.uint32(0))
  device_op = jnp.where(start, started, s.device_op)
  device_end = jnp.where(start, col(s.now) + started_duration, s.device_end)
  if memory:
    resident = resident + jnp.where(start, graph.alloc_bytes[started], 0)

  queue_words = s.queue_words
  has_waiting, t_rank, t_word = first_set(queue_words)  # [P, C]
  send = allowed & has_waiting & (s.channel_tensor < 0)
  if graph.port_classes:  # Static: only device sets whose pairs share ports pay for this.
    send = _through_free_ports(graph, send, s.channel_tensor >= 0)
  sent, sent_duration = _unpack(gather_rows(
      ctx.transfer_by_rank, channel_dst * num_tensors + jnp.minimum(t_rank, num_tensors - 1)),
      s.now.dtype)  # [P, C]
  sent_slot = sent * num_devices + channel_dst
  # Sent transfers leave their queues in the scatter that queues new ones (below).
  unqueue_slot = jnp.arange(channels, dtype=jnp.int32) * tensor_words + t_word
  channel_tensor = jnp.where(send, sent, s.channel_tensor)
  channel_end = jnp.where(send, col(s.now) + sent_duration, s.channel_end)
  peak = s.peak
  if memory:
    received = jnp.where(send, graph.tensor_size[sent], 0)  # [P, C], grouped by receiver
    resident = resident + received.reshape(population, num_devices, num_devices - 1).sum(-1)
    peak = jnp.maximum(peak, resident)
  op_start, op_end = s.op_start, s.op_end
  transfer_start, transfer_end = s.transfer_start, s.transfer_end
  if record_times:
    op_start = scatter_rows(op_start, started, jnp.broadcast_to(col(s.now), start.shape),
                            add=False, keep=start)
    transfer_start = scatter_rows(transfer_start, sent_slot,
                                  jnp.broadcast_to(col(s.now), send.shape), add=False,
                                  keep=send)

  # ----- complete the earliest running op or transfer -----
  ends = jnp.concatenate([device_end, channel_end], axis=1)
  which = jnp.argmin(ends, axis=1).astype(jnp.int32)  # Devices first, then channels, by id.
  now_end = jnp.min(ends, axis=1)
  happens = idle & jnp.isfinite(now_end)
  now = jnp.where(happens, now_end, s.now)
  finishing_device = col(happens) & (device_ids == col(which))
  finishing_channel = col(happens) & (channel_ids == col(which - num_devices))
  is_op = finishing_device.any(axis=1)
  is_transfer = finishing_channel.any(axis=1)
  done_op = jnp.sum(jnp.where(finishing_device, device_op, 0), axis=1)
  done_device = jnp.sum(jnp.where(finishing_device, device_ids, 0), axis=1)
  done_tensor = jnp.sum(jnp.where(finishing_channel, channel_tensor, 0), axis=1)
  src = jnp.sum(jnp.where(finishing_channel, channel_src, 0), axis=1)
  dst = jnp.sum(jnp.where(finishing_channel, channel_dst, 0), axis=1)

  if memory:
    released = gather_rows(ctx.op_release, done_op[:, None])[:, 0]
    resident = resident - jnp.where(finishing_device, col(released), 0)
  # A finished op queues each output on the channel to every other device that reads it.
  queue_rank = gather_rows(ctx.output_queue_rank, done_op[:, None])[:, 0]  # [P, M * D]
  wanted = col(is_op) & (queue_rank >= 0)
  safe_rank = jnp.maximum(queue_rank, 0)
  to_device = jnp.tile(device_ids, queue_rank.shape[1] // num_devices)
  channel = channel_index(done_device[:, None], to_device, num_devices)  # [P, M * D]
  queue_words = scatter_rows(
      queue_words.reshape(population, -1),
      jnp.concatenate([unqueue_slot, channel * tensor_words + safe_rank // WORD_BITS], axis=1),
      jnp.concatenate([jnp.uint32(0) - bit(t_rank), bit(safe_rank)], axis=1), add=True,
      keep=jnp.concatenate([send, wanted], axis=1)).reshape(population, channels, tensor_words)
  op_range = graph.op_work[done_op]  # [P, 2]
  tensor_range = graph.tensor_work[done_tensor]
  work_range = jnp.where(col(is_op), op_range,
                         jnp.where(col(is_transfer), tensor_range,
                                   jnp.stack([work_pos, s.work_end], axis=1)))
  if record_times:
    op_end = scatter_rows(op_end, done_op[:, None], now[:, None], add=False, keep=col(is_op))
    transfer_end = scatter_rows(transfer_end, (done_tensor * num_devices + dst)[:, None],
                                now[:, None], add=False, keep=col(is_transfer))
  device_op = jnp.where(finishing_device, -1, device_op)
  device_end = jnp.where(finishing_device, inf, device_end)
  channel_tensor = jnp.where(finishing_channel, -1, channel_tensor)
  channel_end = jnp.where(finishing_channel, inf, channel_end)
  return _State(
      now=now, ops_left=s.ops_left - is_op.astype(jnp.int32), pending=pending,
      ready_words=ready_words, queue_words=queue_words, device_op=device_op,
      device_end=device_end, channel_tensor=channel_tensor, channel_end=channel_end,
      uses_left=uses_left, resident=resident, peak=peak,
      makespan=jnp.where(is_op, jnp.maximum(s.makespan, now), s.makespan),
      work_pos=work_range[:, 0], work_end=work_range[:, 1],
      work_device=jnp.where(is_op, done_device, jnp.where(is_transfer, dst, s.work_device)),
      work_src=jnp.where(is_transfer, src, s.work_src),
      op_start=op_start, op_end=op_end, transfer_start=transfer_start, transfer_end=transfer_end)


def _through_free_ports(graph: SimGraph, wanted: jnp.ndarray, busy: jnp.ndarray
                        ) -> jnp.ndarray:
  """Of the channels that would start a transfer (`wanted` [P, C]), those that may: taken in
  (src, dst) order as the reference takes them, a channel whose pair shares port k
  (`SimGraph.ports`) starts only if its sender's port k and its receiver's port k are free,
  that is held neither by a running transfer (`busy` [P, C]) nor by one started before it."""
  num_devices, classes = graph.num_devices, graph.port_classes
  population = wanted.shape[0]
  channel_src, channel_dst = channel_ends(num_devices)
  port = graph.ports[channel_src, channel_dst]  # [C]
  shared = port >= 0
  safe_port = jnp.maximum(port, 0)
  send_slot = channel_src * classes + safe_port  # [C]
  receive_slot = channel_dst * classes + safe_port
  slots = num_devices * classes
  held = lambda slot: jnp.zeros((population, slots), bool).at[:, slot].max(  # noqa: E731
      busy & shared)
  sending, receiving = held(send_slot), held(receive_slot)  # [P, D * K]
  # Channels of one sender, in receiver order: [D, D - 1] channel ids.
  others = jnp.array([[d for d in range(num_devices) if d != src]
                      for src in range(num_devices)], jnp.int32).reshape(num_devices, -1)
  by_sender = channel_index(jnp.arange(num_devices, dtype=jnp.int32)[:, None], others,
                            num_devices)
  earlier = jnp.arange(num_devices - 1)[:, None] > jnp.arange(num_devices - 1)[None, :]

  def one_sender(src, carry):
    started, receiving = carry
    ids = by_sender[src]  # [D - 1]
    ported = shared[ids]
    free = ~sending[:, send_slot[ids]] & ~receiving[:, receive_slot[ids]]
    eligible = wanted[:, ids] & (~ported | free)  # [P, D - 1]
    # The first eligible channel of each port class takes it; later ones of that class wait.
    same = earlier & (port[ids][:, None] == port[ids][None, :]) & ported[:, None]
    first = eligible & ~(eligible[:, None, :] & same[None]).any(-1)
    receiving = receiving.at[:, receive_slot[ids]].max(first & ported)
    return started.at[:, ids].set(first), receiving

  started, _ = jax.lax.fori_loop(0, num_devices, one_sender,
                                 (jnp.zeros_like(wanted), receiving))
  return started


def _result(graph: SimGraph, s: _State) -> SimResult:
  shape = (-1, graph.num_devices) if s.transfer_start.shape[0] else (0, graph.num_devices)
  return SimResult(makespan=s.makespan, peak_memory=s.peak, op_start=s.op_start,
                   op_end=s.op_end, transfer_start=s.transfer_start.reshape(shape),
                   transfer_end=s.transfer_end.reshape(shape))


def initial_state(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
                  transfer_priority: jnp.ndarray, record_times: bool
                  ) -> tuple[_Context, _State]:
  """The population's tables and the loop's starting state (large state flat, see `event_step`)."""
  ctx, state = jax.vmap(_prepare, in_axes=(None, 0, 0, 0, None))(
      graph, placement, op_priority, transfer_priority, record_times)
  return ctx, state._replace(pending=state.pending.reshape(-1),
                             uses_left=state.uses_left.reshape(-1))


@functools.partial(jax.jit, static_argnames=("chunk", "record_times"))
def simulate_batch(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
                   transfer_priority: jnp.ndarray, chunk: int = 4,
                   record_times: bool = True) -> SimResult:
  """The WC model for a population: placement [P, O], priorities [P, O] and [P, T, D].

  Without `record_times` only the makespan and peak memory are computed (faster: for fitness). A
  `graph` built without memory (`build_sim_graph(..., memory=False)`) gives the makespan alone
  (peak memory NaN), faster still.
  """
  ctx, state = initial_state(graph, placement, op_priority, transfer_priority, record_times)
  final = jax.lax.while_loop(lambda s: jnp.any(s.ops_left > 0),
                             lambda s: event_step(graph, ctx, s, chunk, record_times), state)
  population = placement.shape[0]
  final = final._replace(pending=final.pending.reshape(population, -1),
                         uses_left=final.uses_left.reshape(population, -1))
  return jax.vmap(_result, in_axes=(None, 0))(graph, final)
