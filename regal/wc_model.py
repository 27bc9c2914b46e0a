"""The work-conserving (WC) performance model in JAX, batched over a population.

Semantics: exactly those of `regal.reference_models.simulate_wc` (read its docstring first).

Formulation (why it is fast): a direct list scheduler scans every op at every step to find the
best ready one, O(ops) work per event. Here each step does O(devices^2 + K) work:
* ops are ranked once by priority, and each device keeps its ready ops as a bitmap over ranks
  in uint32 words: the best ready op is the first set bit (`clz` of the first non-zero word);
* each channel keeps its waiting transfers the same way, ranked by the receiving device's
  transfer priorities;
* running work is at most one op per device and one transfer per channel, so the next event
  is a minimum over D + D^2 end times;
* the edges an event affects are a contiguous range of a flat work list (`regal.sim_graph`),
  walked K entries per step, so a hub op costs a few extra steps instead of padding every
  step to the largest degree.
The loop is one `lax.while_loop` per chromosome; `vmap` runs a population in lockstep.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from regal.ranked_sets import (WORD_BITS, add_small, bit, first_occurrence, first_set,
                               ranks)
from regal.sim_graph import CONTROL, DATA, SEND, USE, SimGraph

class SimResult(NamedTuple):
  makespan: jnp.ndarray  # []
  peak_memory: jnp.ndarray  # [D]
  op_start: jnp.ndarray  # [O]
  op_end: jnp.ndarray  # [O]
  transfer_start: jnp.ndarray  # [T, D] (NaN: not sent)
  transfer_end: jnp.ndarray  # [T, D]


class _State(NamedTuple):
  now: jnp.ndarray
  pending: jnp.ndarray  # [O] requirements still missing
  ready_words: jnp.ndarray  # [D, W] uint32 ready ops by rank
  queue_words: jnp.ndarray  # [D * D, WT] uint32 waiting transfers by rank
  device_op: jnp.ndarray  # [D] running op or -1
  device_end: jnp.ndarray  # [D] (inf when idle)
  channel_tensor: jnp.ndarray  # [D * D] running transfer or -1
  channel_end: jnp.ndarray  # [D * D]
  uses_left: jnp.ndarray  # [T * D] remaining uses of tensor t on device j
  resident: jnp.ndarray  # [D] bytes now
  peak: jnp.ndarray  # [D]
  work_pos: jnp.ndarray  # [] next work entry of the event being propagated
  work_end: jnp.ndarray  # []
  work_device: jnp.ndarray  # [] device that event happened on (or delivered to)
  op_start: jnp.ndarray
  op_end: jnp.ndarray
  transfer_start: jnp.ndarray  # [T * D]
  transfer_end: jnp.ndarray  # [T * D]


class _Context(NamedTuple):
  """Per-chromosome facts fixed for the whole simulation (computed once, before the loop)."""
  placement: jnp.ndarray  # [O]
  op_rank: jnp.ndarray  # [O]
  op_at_rank: jnp.ndarray  # [O]
  tensor_rank: jnp.ndarray  # [D, T] rank of tensor t among transfers to device j
  tensor_at_rank: jnp.ndarray  # [D, T]
  needs_transfer: jnp.ndarray  # [T, D]
  end_release: jnp.ndarray  # [O] bytes an op frees on its device when it ends
  op_time_scale: jnp.ndarray  # [O] duration multipliers (stochastic mode; 1 otherwise)
  transfer_time_scale: jnp.ndarray  # [T * D]


def _prepare(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
             transfer_priority: jnp.ndarray, op_time_scale: jnp.ndarray,
             transfer_time_scale: jnp.ndarray) -> tuple[_Context, _State]:
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  channels = num_devices * num_devices
  dtype = graph.compute_cost.dtype
  inf = jnp.array(jnp.inf, dtype)
  placement = jnp.where(graph.op_mask, placement, 0).astype(jnp.int32)
  # Padding ops rank last, so real ops keep their order among themselves.
  op_rank, op_at_rank = ranks(jnp.where(graph.op_mask, op_priority, -jnp.inf))
  tensor_rank, tensor_at_rank = jax.vmap(ranks, in_axes=1)(transfer_priority)  # [D, T]

  home = placement[graph.tensor_producer]  # [T]
  consumer_device = placement[graph.data_edge_consumer]
  edge_uses = jnp.zeros(num_tensors * num_devices, jnp.int32).at[
      graph.data_edge_tensor * num_devices + consumer_device].add(
          graph.data_edge_mask.astype(jnp.int32))
  edge_uses = edge_uses.reshape(num_tensors, num_devices)
  device_ids = jnp.arange(num_devices, dtype=jnp.int32)
  needs_transfer = (edge_uses > 0) & (device_ids[None, :] != home[:, None])
  uses_left = edge_uses + jnp.where(device_ids[None, :] == home[:, None],
                                    needs_transfer.sum(axis=1, keepdims=True), 0)
  # Released when an op ends: its extra memory and outputs nobody on its device uses.
  unused_at_home = uses_left[jnp.arange(num_tensors), home] == 0
  end_release = graph.extra_memory + jnp.zeros(num_ops, dtype).at[graph.tensor_producer].add(
      jnp.where(unused_at_home, graph.tensor_size, 0))

  words = -(-num_ops // WORD_BITS)
  tensor_words = -(-num_tensors // WORD_BITS)
  initially_ready = graph.in_edges == 0
  ready_words = jnp.zeros(num_devices * words, jnp.uint32).at[
      placement * words + op_rank // WORD_BITS].add(
          jnp.where(initially_ready, bit(op_rank), jnp.uint32(0)))

  nan_ops = jnp.full(num_ops, jnp.nan, dtype)
  nan_transfers = jnp.full(num_tensors * num_devices, jnp.nan, dtype)
  state = _State(
      now=jnp.zeros((), dtype), pending=graph.in_edges.astype(jnp.int32),
      ready_words=ready_words.reshape(num_devices, words),
      queue_words=jnp.zeros((channels, tensor_words), jnp.uint32),
      device_op=jnp.full(num_devices, -1, jnp.int32), device_end=jnp.full(num_devices, inf),
      channel_tensor=jnp.full(channels, -1, jnp.int32), channel_end=jnp.full(channels, inf),
      uses_left=uses_left.reshape(-1).astype(jnp.int32), resident=jnp.zeros(num_devices, dtype),
      peak=jnp.zeros(num_devices, dtype), work_pos=jnp.zeros((), jnp.int32),
      work_end=jnp.zeros((), jnp.int32), work_device=jnp.zeros((), jnp.int32),
      op_start=nan_ops, op_end=nan_ops, transfer_start=nan_transfers,
      transfer_end=nan_transfers)

  context = _Context(placement=placement, op_rank=op_rank, op_at_rank=op_at_rank,
                     tensor_rank=tensor_rank, tensor_at_rank=tensor_at_rank,
                     needs_transfer=needs_transfer, end_release=end_release,
                     op_time_scale=op_time_scale.astype(dtype),
                     transfer_time_scale=transfer_time_scale.reshape(-1).astype(dtype))
  return context, state


def _step(graph: SimGraph, ctx: _Context, s: _State, chunk: int) -> _State:
  """One loop step: propagate up to `chunk` work entries, then maybe dispatch, then maybe
  complete the next event. A no-op once `_keep_going` is False, so a batch can run in lockstep
  under an unbatched loop condition (any over the batch); a batched `while_loop` predicate
  would instead select the whole carried state every iteration."""
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  channels = num_devices * num_devices
  words = s.ready_words.shape[-1]
  tensor_words = s.queue_words.shape[-1]
  inf = jnp.array(jnp.inf, s.now.dtype)
  placement, op_rank, op_at_rank = ctx.placement, ctx.op_rank, ctx.op_at_rank
  tensor_rank, tensor_at_rank = ctx.tensor_rank, ctx.tensor_at_rank
  needs_transfer, end_release = ctx.needs_transfer, ctx.end_release
  device_ids = jnp.arange(num_devices, dtype=jnp.int32)
  channel_src = jnp.repeat(device_ids, num_devices)
  channel_dst = jnp.tile(device_ids, num_devices)
  link_latency = graph.latency.reshape(-1)
  link_bandwidth = graph.bandwidth.reshape(-1)
  lanes = jnp.arange(chunk, dtype=jnp.int32)

  def propagate(s: _State) -> _State:
    """Walks up to `chunk` work entries of the event being propagated (none if idle)."""
    index = s.work_pos + lanes
    valid = index < s.work_end
    index = jnp.minimum(index, graph.work_kind.shape[0] - 1)
    kind = graph.work_kind[index]
    tensor = graph.work_tensor[index]
    op = graph.work_op[index]
    here = s.work_device
    device_onehot = device_ids == here

    # USE: one fewer use of an input on this device; the last use frees it.
    is_use = valid & (kind == USE)
    use_slot = tensor * num_devices + here
    uses_left = s.uses_left.at[use_slot].add(-is_use.astype(jnp.int32))
    freed = first_occurrence(tensor, is_use) & (uses_left[use_slot] == 0)
    resident = s.resident - jnp.where(
        device_onehot, jnp.sum(jnp.where(freed, graph.tensor_size[tensor], 0)), 0)

    # CONTROL and local DATA entries satisfy one requirement of their op.
    satisfies = valid & ((kind == CONTROL) | ((kind == DATA) & (placement[op] == here)))
    pending = s.pending.at[op].add(-satisfies.astype(jnp.int32))
    now_ready = first_occurrence(op, satisfies) & (pending[op] == 0)
    device = placement[op]
    ranks = op_rank[op]
    ready_words = add_small(s.ready_words.reshape(-1), device * words + ranks // WORD_BITS,
                             jnp.where(now_ready, bit(ranks), jnp.uint32(0))
                             ).reshape(num_devices, words)

    # SEND: queue the tensor on every channel to a device that reads it.
    is_send = valid & (kind == SEND)
    wanted = is_send[:, None] & needs_transfer[tensor]  # [K, D]
    rank = tensor_rank[device_ids[None, :], tensor[:, None]]  # [K, D]
    slot = ((here * num_devices + device_ids[None, :]) * tensor_words + rank // WORD_BITS)
    queue_words = add_small(s.queue_words.reshape(-1), slot,
                             jnp.where(wanted, bit(rank), jnp.uint32(0))
                             ).reshape(channels, tensor_words)
    return s._replace(uses_left=uses_left, resident=resident, pending=pending,
                      ready_words=ready_words, queue_words=queue_words,
                      work_pos=jnp.where(s.work_pos < s.work_end, s.work_pos + chunk,
                                         s.work_pos))

  def dispatch(s: _State, allowed: jnp.ndarray) -> _State:
    """Every idle device starts its best ready op; every idle channel its best transfer."""
    has_ready, rank, word_index = first_set(s.ready_words)
    start = allowed & has_ready & (s.device_op < 0)
    op = op_at_rank[jnp.minimum(rank, num_ops - 1)]
    word_ids = jnp.arange(words, dtype=jnp.int32)
    cleared = s.ready_words + jnp.where(
        start[:, None] & (word_ids[None, :] == word_index[:, None]),
        jnp.uint32(0) - bit(rank)[:, None], jnp.uint32(0))
    end = s.now + graph.compute_cost[op] / graph.speed * ctx.op_time_scale[op]
    op_slot = jnp.where(start, op, num_ops)
    resident = s.resident + jnp.where(start, graph.output_bytes[op] + graph.extra_memory[op], 0)

    has_waiting, t_rank, t_word = first_set(s.queue_words)
    send = allowed & has_waiting & (s.channel_tensor < 0)
    tensor = tensor_at_rank[channel_dst, jnp.minimum(t_rank, num_tensors - 1)]
    tensor_word_ids = jnp.arange(tensor_words, dtype=jnp.int32)
    queue_words = s.queue_words + jnp.where(
        send[:, None] & (tensor_word_ids[None, :] == t_word[:, None]),
        jnp.uint32(0) - bit(t_rank)[:, None], jnp.uint32(0))
    transfer_end = s.now + (link_latency + graph.tensor_size[tensor] / link_bandwidth) * (
        ctx.transfer_time_scale[tensor * num_devices + channel_dst])
    transfer_slot = jnp.where(send, tensor * num_devices + channel_dst, num_tensors * num_devices)
    resident = add_small(resident, channel_dst, jnp.where(send, graph.tensor_size[tensor], 0))
    return s._replace(
        ready_words=cleared, device_op=jnp.where(start, op, s.device_op),
        device_end=jnp.where(start, end, s.device_end),
        op_start=s.op_start.at[op_slot].set(s.now, mode="drop"),
        queue_words=queue_words, channel_tensor=jnp.where(send, tensor, s.channel_tensor),
        channel_end=jnp.where(send, transfer_end, s.channel_end),
        transfer_start=s.transfer_start.at[transfer_slot].set(s.now, mode="drop"),
        resident=resident, peak=jnp.maximum(s.peak, resident))

  def complete_next(s: _State, allowed: jnp.ndarray) -> _State:
    """Finishes the earliest running op or transfer and starts propagating its effects."""
    ends = jnp.concatenate([s.device_end, s.channel_end])
    which = jnp.argmin(ends).astype(jnp.int32)  # Devices first, then channels, by id.
    happens = allowed & jnp.isfinite(ends[which])
    now = jnp.where(happens, ends[which], s.now)
    is_op = happens & (which < num_devices)
    is_transfer = happens & (which >= num_devices)
    device = jnp.minimum(which, num_devices - 1)
    channel = jnp.maximum(which - num_devices, 0)
    op = jnp.maximum(s.device_op[device], 0)
    tensor = jnp.maximum(s.channel_tensor[channel], 0)
    src, dst = channel_src[channel], channel_dst[channel]

    op_end = s.op_end.at[jnp.where(is_op, op, num_ops)].set(now, mode="drop")
    transfer_end = s.transfer_end.at[
        jnp.where(is_transfer, tensor * num_devices + dst, num_tensors * num_devices)].set(
            now, mode="drop")
    # A finished transfer is one use fewer of the tensor on its sending device.
    sender_slot = tensor * num_devices + src
    uses_left = s.uses_left.at[sender_slot].add(-is_transfer.astype(jnp.int32))
    sender_freed = is_transfer & (uses_left[sender_slot] == 0)
    resident = s.resident.at[device].add(jnp.where(is_op, -end_release[op], 0))
    resident = resident.at[src].add(jnp.where(sender_freed, -graph.tensor_size[tensor], 0))
    return s._replace(
        now=now, op_end=op_end, transfer_end=transfer_end, uses_left=uses_left,
        resident=resident,
        device_op=s.device_op.at[device].set(jnp.where(is_op, -1, s.device_op[device])),
        device_end=s.device_end.at[device].set(jnp.where(is_op, inf, s.device_end[device])),
        channel_tensor=s.channel_tensor.at[channel].set(
            jnp.where(is_transfer, -1, s.channel_tensor[channel])),
        channel_end=s.channel_end.at[channel].set(
            jnp.where(is_transfer, inf, s.channel_end[channel])),
        work_pos=jnp.where(is_op, graph.op_work_begin[op],
                           jnp.where(is_transfer, graph.tensor_work_begin[tensor], s.work_pos)),
        work_end=jnp.where(is_op, graph.op_work_end[op],
                           jnp.where(is_transfer, graph.tensor_work_end[tensor], s.work_end)),
        work_device=jnp.where(is_op, device, jnp.where(is_transfer, dst, s.work_device)))

  s = propagate(s)
  idle = s.work_pos >= s.work_end
  s = dispatch(s, idle & (_next_end(s) > s.now))
  return complete_next(s, idle)


def _can_dispatch(s: _State) -> jnp.ndarray:
  idle_ready = (s.device_op < 0) & (s.ready_words != 0).any(axis=1)
  idle_waiting = (s.channel_tensor < 0) & (s.queue_words != 0).any(axis=1)
  return idle_ready.any() | idle_waiting.any()


def _next_end(s: _State) -> jnp.ndarray:
  return jnp.minimum(s.device_end.min(), s.channel_end.min())


def _keep_going(s: _State) -> jnp.ndarray:
  return (s.work_pos < s.work_end) | jnp.isfinite(_next_end(s)) | _can_dispatch(s)


def _result(graph: SimGraph, s: _State) -> SimResult:
  num_tensors, num_devices = graph.tensor_size.shape[0], graph.num_devices
  makespan = jnp.max(jnp.where(graph.op_mask, s.op_end, -jnp.inf))
  return SimResult(makespan=makespan, peak_memory=s.peak, op_start=s.op_start, op_end=s.op_end,
                   transfer_start=s.transfer_start.reshape(num_tensors, num_devices),
                   transfer_end=s.transfer_end.reshape(num_tensors, num_devices))


def simulate_one(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
                 transfer_priority: jnp.ndarray, op_time_scale: jnp.ndarray | None = None,
                 transfer_time_scale: jnp.ndarray | None = None, chunk: int = 4) -> SimResult:
  """The WC model for one chromosome's placement and priorities (padded to the graph)."""
  op_time_scale, transfer_time_scale = _default_scales(graph, op_time_scale,
                                                       transfer_time_scale)
  ctx, state = _prepare(graph, placement, op_priority, transfer_priority, op_time_scale,
                        transfer_time_scale)
  final = jax.lax.while_loop(_keep_going, lambda s: _step(graph, ctx, s, chunk), state)
  return _result(graph, final)


def _default_scales(graph: SimGraph, op_time_scale, transfer_time_scale, batch=()):
  dtype = graph.compute_cost.dtype
  if op_time_scale is None:
    op_time_scale = jnp.ones(batch + graph.op_mask.shape, dtype)
  if transfer_time_scale is None:
    transfer_time_scale = jnp.ones(batch + graph.tensor_size.shape + (graph.num_devices,), dtype)
  return op_time_scale, transfer_time_scale


@functools.partial(jax.jit, static_argnames=("chunk",))
def simulate_batch(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
                   transfer_priority: jnp.ndarray, op_time_scale: jnp.ndarray | None = None,
                   transfer_time_scale: jnp.ndarray | None = None,
                   chunk: int = 4) -> SimResult:
  """The WC model for a population: placement [P, O], priorities [P, O] and [P, T, D].

  `op_time_scale` [P, O] and `transfer_time_scale` [P, T, D] multiply every duration (the
  stochastic mode draws them); by default all durations are as modelled.
  """
  op_time_scale, transfer_time_scale = _default_scales(
      graph, op_time_scale, transfer_time_scale, batch=placement.shape[:1])
  ctx, state = jax.vmap(_prepare, in_axes=(None, 0, 0, 0, 0, 0))(
      graph, placement, op_priority, transfer_priority, op_time_scale, transfer_time_scale)
  step = jax.vmap(lambda c, s: _step(graph, c, s, chunk))
  final = jax.lax.while_loop(lambda s: jnp.any(jax.vmap(_keep_going)(s)),
                             lambda s: step(ctx, s), state)
  return jax.vmap(_result, in_axes=(None, 0))(graph, final)
