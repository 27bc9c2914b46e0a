"""REGAL's synchronous-transfer performance model in JAX, batched over a population.

Semantics: exactly those of `regal.reference_models.simulate_synchronous` (see its module
docstring). The priority-driven topological sort and the simulation happen in one pass: the
next task in the total order is the best ready op or the best ready transfer (two ranked
bitsets, `regal.ranked_sets`), it runs as early as its devices and inputs allow, and its work
list (`regal.sim_graph`) then satisfies the tasks that wait for it, a few entries per step.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from regal.ranked_sets import (WORD_BITS, add_small, bit, first_occurrence, first_set,
                               ranks)
from regal.sim_graph import CONTROL, DATA, SEND, USE, SimGraph
from regal.wc_model import SimResult


class _Context(NamedTuple):
  placement: jnp.ndarray  # [O]
  op_rank: jnp.ndarray  # [O]
  op_at_rank: jnp.ndarray  # [O]
  op_priority: jnp.ndarray  # [O]
  transfer_rank: jnp.ndarray  # [T * D] rank of transfer (t, j) among all transfers
  transfer_at_rank: jnp.ndarray  # [T * D]
  transfer_priority: jnp.ndarray  # [T * D]
  needs_transfer: jnp.ndarray  # [T, D]
  end_release: jnp.ndarray  # [O]


class _State(NamedTuple):
  pending: jnp.ndarray  # [O]
  inputs_ready: jnp.ndarray  # [O] latest arrival among satisfied requirements
  ready_ops: jnp.ndarray  # [W] uint32
  ready_transfers: jnp.ndarray  # [WT] uint32
  device_free: jnp.ndarray  # [D]
  uses_left: jnp.ndarray  # [T * D]
  resident: jnp.ndarray  # [D]
  peak: jnp.ndarray  # [D]
  work_pos: jnp.ndarray
  work_end: jnp.ndarray
  work_device: jnp.ndarray
  work_time: jnp.ndarray  # when the task being propagated ended
  op_start: jnp.ndarray
  op_end: jnp.ndarray
  transfer_start: jnp.ndarray  # [T * D]
  transfer_end: jnp.ndarray


def _prepare(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
             transfer_priority: jnp.ndarray) -> tuple[_Context, _State]:
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  dtype = graph.compute_cost.dtype
  placement = jnp.where(graph.op_mask, placement, 0).astype(jnp.int32)
  op_priority = jnp.where(graph.op_mask, op_priority, -jnp.inf)
  op_rank, op_at_rank = ranks(op_priority)

  home = placement[graph.tensor_producer]
  consumer_device = placement[graph.data_edge_consumer]
  edge_uses = jnp.zeros(num_tensors * num_devices, jnp.int32).at[
      graph.data_edge_tensor * num_devices + consumer_device].add(
          graph.data_edge_mask.astype(jnp.int32)).reshape(num_tensors, num_devices)
  device_ids = jnp.arange(num_devices, dtype=jnp.int32)
  needs_transfer = (edge_uses > 0) & (device_ids[None, :] != home[:, None])
  uses_left = edge_uses + jnp.where(device_ids[None, :] == home[:, None],
                                    needs_transfer.sum(axis=1, keepdims=True), 0)
  unused_at_home = uses_left[jnp.arange(num_tensors), home] == 0
  end_release = graph.extra_memory + jnp.zeros(num_ops, dtype).at[graph.tensor_producer].add(
      jnp.where(unused_at_home, graph.tensor_size, 0))
  flat_priority = jnp.where(needs_transfer, transfer_priority, -jnp.inf).reshape(-1)
  transfer_rank, transfer_at_rank = ranks(flat_priority)

  words = -(-num_ops // WORD_BITS)
  transfer_words = -(-num_tensors * num_devices // WORD_BITS)
  ready_ops = jnp.zeros(words, jnp.uint32).at[op_rank // WORD_BITS].add(
      jnp.where(graph.in_edges == 0, bit(op_rank), jnp.uint32(0)))
  nan_ops = jnp.full(num_ops, jnp.nan, dtype)
  nan_transfers = jnp.full(num_tensors * num_devices, jnp.nan, dtype)
  zero = jnp.zeros((), jnp.int32)
  state = _State(
      pending=graph.in_edges.astype(jnp.int32), inputs_ready=jnp.zeros(num_ops, dtype),
      ready_ops=ready_ops, ready_transfers=jnp.zeros(transfer_words, jnp.uint32),
      device_free=jnp.zeros(num_devices, dtype), uses_left=uses_left.reshape(-1),
      resident=jnp.zeros(num_devices, dtype), peak=jnp.zeros(num_devices, dtype),
      work_pos=zero, work_end=zero, work_device=zero, work_time=jnp.zeros((), dtype),
      op_start=nan_ops, op_end=nan_ops, transfer_start=nan_transfers,
      transfer_end=nan_transfers)
  context = _Context(placement=placement, op_rank=op_rank, op_at_rank=op_at_rank,
                     op_priority=op_priority, transfer_rank=transfer_rank,
                     transfer_at_rank=transfer_at_rank, transfer_priority=flat_priority,
                     needs_transfer=needs_transfer, end_release=end_release)
  return context, state


def _step(graph: SimGraph, ctx: _Context, s: _State, chunk: int) -> _State:
  """Propagates up to `chunk` work entries, or runs the next task of the total order."""
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  device_ids = jnp.arange(num_devices, dtype=jnp.int32)
  lanes = jnp.arange(chunk, dtype=jnp.int32)
  placement = ctx.placement

  # ----- propagate the last task's effects -----
  index = s.work_pos + lanes
  valid = index < s.work_end
  entry = graph.work[jnp.minimum(index, graph.work.shape[0] - 1)]
  kind, tensor, op = entry[:, 0], entry[:, 1], entry[:, 2]
  here = s.work_device

  is_use = valid & (kind == USE)
  use_slot = tensor * num_devices + here
  uses_left = s.uses_left.at[use_slot].add(-is_use.astype(jnp.int32))
  freed = first_occurrence(tensor, is_use) & (uses_left[use_slot] == 0)
  resident = s.resident - jnp.where(
      device_ids == here, jnp.sum(jnp.where(freed, graph.tensor_size[tensor], 0)), 0)

  satisfies = valid & ((kind == CONTROL) | ((kind == DATA) & (placement[op] == here)))
  pending = s.pending.at[op].add(-satisfies.astype(jnp.int32))
  inputs_ready = s.inputs_ready.at[op].max(jnp.where(satisfies, s.work_time, -jnp.inf))
  now_ready = first_occurrence(op, satisfies) & (pending[op] == 0)
  ready_ops = add_small(s.ready_ops, ctx.op_rank[op] // WORD_BITS,
                        jnp.where(now_ready, bit(ctx.op_rank[op]), jnp.uint32(0)))

  is_send = valid & (kind == SEND)
  slot = tensor[:, None] * num_devices + device_ids[None, :]  # [K, D]
  wanted = is_send[:, None] & ctx.needs_transfer[tensor]
  rank = ctx.transfer_rank[slot]
  ready_transfers = add_small(s.ready_transfers, (rank // WORD_BITS).reshape(-1),
                              jnp.where(wanted, bit(rank), jnp.uint32(0)).reshape(-1))
  s = s._replace(uses_left=uses_left, resident=resident, pending=pending,
                 inputs_ready=inputs_ready, ready_ops=ready_ops,
                 ready_transfers=ready_transfers,
                 work_pos=jnp.where(s.work_pos < s.work_end, s.work_pos + chunk, s.work_pos))

  # ----- run the next task when nothing is left to propagate -----
  idle = s.work_pos >= s.work_end
  has_op, op_rank, op_word = first_set(s.ready_ops)
  has_transfer, t_rank, t_word = first_set(s.ready_transfers)
  op = ctx.op_at_rank[jnp.minimum(op_rank, num_ops - 1)]
  transfer = ctx.transfer_at_rank[jnp.minimum(t_rank, num_tensors * num_devices - 1)]
  # Ties go to ops: an op runs unless a transfer has a strictly larger priority.
  take_op = idle & has_op & ~(has_transfer & (ctx.transfer_priority[transfer]
                                               > ctx.op_priority[op]))
  take_transfer = idle & has_transfer & ~take_op

  device = placement[op]
  op_begin = jnp.maximum(s.device_free[device], s.inputs_ready[op])
  op_finish = op_begin + graph.compute_cost[op] / graph.speed[device]

  t = transfer // num_devices
  dst = transfer % num_devices
  src = placement[graph.tensor_producer[t]]
  t_begin = jnp.maximum(jnp.maximum(s.device_free[src], s.device_free[dst]),
                        s.op_end[graph.tensor_producer[t]])
  t_finish = t_begin + (graph.latency[src, dst] + graph.tensor_size[t] / graph.bandwidth[src, dst])

  device_free = jnp.where(take_op & (device_ids == device), op_finish, s.device_free)
  device_free = jnp.where(take_transfer & ((device_ids == src) | (device_ids == dst)), t_finish,
                          device_free)
  # Memory: allocate, note the peak, then release what the task frees when it ends.
  allocated = s.resident + jnp.where(take_op & (device_ids == device), graph.alloc_bytes[op], 0)
  allocated = allocated + jnp.where(take_transfer & (device_ids == dst), graph.tensor_size[t], 0)
  peak = jnp.maximum(s.peak, allocated)
  sender_slot = t * num_devices + src
  uses_left = s.uses_left.at[sender_slot].add(-take_transfer.astype(jnp.int32))
  sender_freed = take_transfer & (uses_left[sender_slot] == 0)
  resident = allocated - jnp.where(take_op & (device_ids == device), ctx.end_release[op], 0)
  resident = resident - jnp.where(sender_freed & (device_ids == src), graph.tensor_size[t], 0)

  op_slot = jnp.where(take_op, op, num_ops)
  transfer_slot = jnp.where(take_transfer, transfer, num_tensors * num_devices)
  word_ids = jnp.arange(s.ready_ops.shape[0], dtype=jnp.int32)
  transfer_word_ids = jnp.arange(s.ready_transfers.shape[0], dtype=jnp.int32)
  return s._replace(
      ready_ops=s.ready_ops + jnp.where(take_op & (word_ids == op_word),
                                        jnp.uint32(0) - bit(op_rank), jnp.uint32(0)),
      ready_transfers=s.ready_transfers + jnp.where(
          take_transfer & (transfer_word_ids == t_word), jnp.uint32(0) - bit(t_rank),
          jnp.uint32(0)),
      device_free=device_free, uses_left=uses_left, resident=resident, peak=peak,
      op_start=s.op_start.at[op_slot].set(op_begin, mode="drop"),
      op_end=s.op_end.at[op_slot].set(op_finish, mode="drop"),
      transfer_start=s.transfer_start.at[transfer_slot].set(t_begin, mode="drop"),
      transfer_end=s.transfer_end.at[transfer_slot].set(t_finish, mode="drop"),
      work_pos=jnp.where(take_op, graph.op_work[op, 0],
                         jnp.where(take_transfer, graph.tensor_work[t, 0], s.work_pos)),
      work_end=jnp.where(take_op, graph.op_work[op, 1],
                         jnp.where(take_transfer, graph.tensor_work[t, 1], s.work_end)),
      work_device=jnp.where(take_op, device, jnp.where(take_transfer, dst, s.work_device)),
      work_time=jnp.where(take_op, op_finish, jnp.where(take_transfer, t_finish, s.work_time)))


def _keep_going(s: _State) -> jnp.ndarray:
  return ((s.work_pos < s.work_end) | (s.ready_ops != 0).any()
          | (s.ready_transfers != 0).any())


def _result(graph: SimGraph, s: _State) -> SimResult:
  num_tensors, num_devices = graph.tensor_size.shape[0], graph.num_devices
  makespan = jnp.max(jnp.where(graph.op_mask, s.op_end, -jnp.inf))
  return SimResult(makespan=makespan, peak_memory=s.peak, op_start=s.op_start, op_end=s.op_end,
                   transfer_start=s.transfer_start.reshape(num_tensors, num_devices),
                   transfer_end=s.transfer_end.reshape(num_tensors, num_devices))


@functools.partial(jax.jit, static_argnames=("chunk",))
def simulate_batch(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
                   transfer_priority: jnp.ndarray, chunk: int = 4) -> SimResult:
  """The synchronous model for a population: placement [P, O], priorities [P, O], [P, T, D]."""
  ctx, state = jax.vmap(_prepare, in_axes=(None, 0, 0, 0))(
      graph, placement, op_priority, transfer_priority)
  step = jax.vmap(lambda c, s: _step(graph, c, s, chunk))
  final = jax.lax.while_loop(lambda s: jnp.any(jax.vmap(_keep_going)(s)),
                             lambda s: step(ctx, s), state)
  return jax.vmap(_result, in_axes=(None, 0))(graph, final)
