"""REGAL's synchronous-transfer performance model in JAX, batched over a population.

Semantics: exactly those of `regal.scoring.sync.reference.simulate_synchronous` (see its module
docstring). The priority-driven topological sort and the simulation happen in one pass: the next
task in the total order is the best ready op or the best ready transfer (two ranked bitsets,
`regal.scoring.ranked_sets`), it runs as early as its devices and inputs allow, and its work list
(`regal.scoring.sim_graph`) then satisfies the tasks that wait for it, a few entries per step.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from regal_datasets import analysis
from regal.scoring.ranked_sets import (WORD_BITS, add_small, bit, first_set, gather_flat,
                                       gather_rows, ranks, scatter_rows, set_flat)
from regal.scoring.sim_graph import SimGraph
from regal.scoring.sim_shared import memory_plan, read_chunk, release_uses, satisfy
from regal.scoring.wc.batched import SimResult


class _Context(NamedTuple):
  op_ints: jnp.ndarray  # [O, 2] (device, rank)
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
  work_src: jnp.ndarray  # sending device of the transfer being propagated
  busy: jnp.ndarray  # anything left to do
  makespan: jnp.ndarray
  op_end: jnp.ndarray  # [O] (needed: a transfer starts after its producer ends)
  op_start: jnp.ndarray  # [O] or [0] when times are not recorded
  transfer_start: jnp.ndarray  # [T * D] or [0]
  transfer_end: jnp.ndarray


def _prepare(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
             transfer_priority: jnp.ndarray, record_times: bool) -> tuple[_Context, _State]:
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  dtype = graph.compute_cost.dtype
  placement = jnp.where(graph.op_mask, placement, 0).astype(jnp.int32)
  op_priority = jnp.where(graph.op_mask, op_priority, -jnp.inf)
  op_rank, op_at_rank = ranks(op_priority)

  _, needs_transfer, uses_left, end_release = memory_plan(graph, placement)
  flat_priority = jnp.where(needs_transfer, transfer_priority, -jnp.inf).reshape(-1)
  transfer_rank, transfer_at_rank = ranks(flat_priority)

  words = -(-num_ops // WORD_BITS)
  transfer_words = -(-num_tensors * num_devices // WORD_BITS)
  ready_ops = jnp.zeros(words, jnp.uint32).at[op_rank // WORD_BITS].add(
      jnp.where(graph.in_edges == 0, bit(op_rank), jnp.uint32(0)))
  recorded_ops = num_ops if record_times else 0
  recorded_transfers = num_tensors * num_devices if record_times else 0
  zero = jnp.zeros((), jnp.int32)
  state = _State(
      pending=graph.in_edges.astype(jnp.int32), inputs_ready=jnp.zeros(num_ops, dtype),
      ready_ops=ready_ops, ready_transfers=jnp.zeros(transfer_words, jnp.uint32),
      device_free=jnp.zeros(num_devices, dtype), uses_left=uses_left.reshape(-1),
      resident=jnp.zeros(num_devices, dtype), peak=jnp.zeros(num_devices, dtype),
      work_pos=zero, work_end=zero, work_device=zero, work_time=jnp.zeros((), dtype),
      work_src=zero, busy=jnp.ones((), bool), makespan=jnp.full((), -jnp.inf, dtype),
      op_end=jnp.full(num_ops, jnp.nan, dtype), op_start=jnp.full(recorded_ops, jnp.nan, dtype),
      transfer_start=jnp.full(recorded_transfers, jnp.nan, dtype),
      transfer_end=jnp.full(recorded_transfers, jnp.nan, dtype))
  context = _Context(op_ints=jnp.stack([placement, op_rank], axis=1), op_at_rank=op_at_rank,
                     op_priority=op_priority, transfer_rank=transfer_rank,
                     transfer_at_rank=transfer_at_rank, transfer_priority=flat_priority,
                     needs_transfer=needs_transfer, end_release=end_release)
  return context, state


def _step(graph: SimGraph, ctx: _Context, s: _State, chunk: int, record_times: bool) -> _State:
  """One loop step for a whole population (leading population axis everywhere; `pending`,
  `inputs_ready`, `uses_left` and `op_end` flat, see `regal.scoring.ranked_sets.set_flat`).

  Propagates up to `chunk` work entries of the last task; with nothing left to propagate,
  runs the next task of the total order. A no-op for a chromosome with nothing left to do.
  """
  population = s.work_pos.shape[0]
  num_ops = graph.op_mask.shape[0]
  num_tensors = graph.tensor_size.shape[0]
  num_devices = graph.num_devices
  device_ids = jnp.arange(num_devices, dtype=jnp.int32)
  col = lambda x: x[:, None]  # noqa: E731

  # ----- propagate the last task's effects -----
  c = read_chunk(graph, s.work_pos, s.work_end, chunk)
  op_ints = gather_rows(ctx.op_ints, c.op)
  device, rank = op_ints[..., 0], op_ints[..., 1]
  uses_left, resident = release_uses(graph, c, s.uses_left, s.resident, s.work_device,
                                     s.work_src)
  pending, satisfies, now_ready = satisfy(graph, c, s.pending, device, s.work_device)
  # An op can start no earlier than its latest satisfied requirement arrived.
  ready_after = jnp.maximum(gather_flat(s.inputs_ready, num_ops, c.op), col(s.work_time))
  inputs_ready = set_flat(s.inputs_ready, num_ops, c.op, ready_after, satisfies)
  ready_ops = add_small(s.ready_ops, rank // WORD_BITS,
                        jnp.where(now_ready, bit(rank), jnp.uint32(0)))
  work_pos = jnp.where(s.work_pos < s.work_end, s.work_pos + chunk, s.work_pos)

  # ----- run the next task when nothing is left to propagate -----
  idle = work_pos >= s.work_end
  has_op, op_rank, op_word = first_set(ready_ops)
  ready_transfers = s.ready_transfers
  has_transfer, t_rank, t_word = first_set(ready_transfers)
  op = gather_rows(ctx.op_at_rank, jnp.minimum(op_rank, num_ops - 1)[:, None])[:, 0]
  transfer = gather_rows(ctx.transfer_at_rank,
                         jnp.minimum(t_rank, num_tensors * num_devices - 1)[:, None])[:, 0]
  op_priority = gather_rows(ctx.op_priority, op[:, None])[:, 0]
  transfer_priority = gather_rows(ctx.transfer_priority, transfer[:, None])[:, 0]
  # Ties go to ops: an op runs unless a transfer has a strictly larger priority.
  take_op = idle & has_op & ~(has_transfer & (transfer_priority > op_priority))
  take_transfer = idle & has_transfer & ~take_op

  device = gather_rows(ctx.op_ints, op[:, None])[:, 0, 0]
  on_device = device_ids == col(device)
  device_free_here = jnp.sum(jnp.where(on_device, s.device_free, 0), axis=1)
  op_begin = jnp.maximum(device_free_here, gather_flat(inputs_ready, num_ops, op[:, None])[:, 0])
  op_finish = op_begin + graph.compute_cost[op] / graph.speed[device]

  t = transfer // num_devices
  dst = transfer % num_devices
  producer = graph.tensor_producer[t]
  src = gather_rows(ctx.op_ints, producer[:, None])[:, 0, 0]
  at_src, at_dst = device_ids == col(src), device_ids == col(dst)
  t_begin = jnp.maximum(jnp.maximum(jnp.sum(jnp.where(at_src, s.device_free, 0), axis=1),
                                    jnp.sum(jnp.where(at_dst, s.device_free, 0), axis=1)),
                        gather_flat(s.op_end, num_ops, producer[:, None])[:, 0])
  t_finish = t_begin + analysis.link_time(graph.latency, graph.bandwidth, graph.tensor_size[t], src,
                                          dst, xp=jnp)

  device_free = jnp.where(col(take_op) & on_device, col(op_finish), s.device_free)
  device_free = jnp.where(col(take_transfer) & (at_src | at_dst), col(t_finish), device_free)
  # Memory: allocate, note the peak, then release what the task frees when it ends.
  allocated = resident + jnp.where(col(take_op) & on_device, col(graph.alloc_bytes[op]), 0)
  allocated = allocated + jnp.where(col(take_transfer) & at_dst, col(graph.tensor_size[t]), 0)
  peak = jnp.maximum(s.peak, allocated)
  release = gather_rows(ctx.end_release, op[:, None])[:, 0]
  resident = allocated - jnp.where(col(take_op) & on_device, col(release), 0)

  # The value written depends on the reads of op_end above, so the write is in place.
  op_end = set_flat(s.op_end, num_ops, op[:, None], jnp.where(take_op, op_finish, t_begin)[:, None],
                    col(take_op))
  op_start, transfer_start, transfer_end = s.op_start, s.transfer_start, s.transfer_end
  if record_times:
    op_start = scatter_rows(op_start, op[:, None], op_begin[:, None], add=False,
                            keep=col(take_op))
    transfer_start = scatter_rows(transfer_start, transfer[:, None], t_begin[:, None],
                                  add=False, keep=col(take_transfer))
    transfer_end = scatter_rows(transfer_end, transfer[:, None], t_finish[:, None],
                                add=False, keep=col(take_transfer))
  word_ids = jnp.arange(ready_ops.shape[-1], dtype=jnp.int32)
  transfer_word_ids = jnp.arange(ready_transfers.shape[-1], dtype=jnp.int32)
  ready_ops = ready_ops + jnp.where(col(take_op) & (word_ids == col(op_word)),
                                    col(jnp.uint32(0) - bit(op_rank)), jnp.uint32(0))
  ready_transfers = ready_transfers + jnp.where(
      col(take_transfer) & (transfer_word_ids == col(t_word)), col(jnp.uint32(0) - bit(t_rank)),
      jnp.uint32(0))
  # A run op makes the transfers of its outputs ready (they depend on it alone).
  outputs = graph.op_outputs[op]  # [P, M]
  slot = jnp.maximum(outputs, 0)[..., None] * num_devices + device_ids  # [P, M, D]
  transfer_rank = gather_rows(ctx.transfer_rank, slot)
  wanted = (col(take_op) & (outputs >= 0))[..., None] & gather_rows(ctx.needs_transfer, slot)
  ready_transfers = add_small(
      ready_transfers, (transfer_rank // WORD_BITS).reshape(population, -1),
      jnp.where(wanted, bit(transfer_rank), jnp.uint32(0)).reshape(population, -1))
  op_range = graph.op_work[op]
  tensor_range = graph.tensor_work[t]
  work_range = jnp.where(col(take_op), op_range,
                         jnp.where(col(take_transfer), tensor_range,
                                   jnp.stack([work_pos, s.work_end], axis=1)))
  busy = ((work_range[:, 0] < work_range[:, 1]) | (ready_ops != 0).any(axis=1)
          | (ready_transfers != 0).any(axis=1))
  return s._replace(
      pending=pending, inputs_ready=inputs_ready, ready_ops=ready_ops,
      ready_transfers=ready_transfers, device_free=device_free, uses_left=uses_left,
      resident=resident, peak=peak, work_pos=work_range[:, 0], work_end=work_range[:, 1],
      work_device=jnp.where(take_op, device, jnp.where(take_transfer, dst, s.work_device)),
      work_time=jnp.where(take_op, op_finish, jnp.where(take_transfer, t_finish, s.work_time)),
      work_src=jnp.where(take_transfer, src, s.work_src), busy=busy,
      makespan=jnp.where(take_op, jnp.maximum(s.makespan, op_finish), s.makespan),
      op_end=op_end, op_start=op_start, transfer_start=transfer_start,
      transfer_end=transfer_end)


def _result(graph: SimGraph, s: _State) -> SimResult:
  shape = (-1, graph.num_devices) if s.transfer_start.shape[0] else (0, graph.num_devices)
  return SimResult(makespan=s.makespan, peak_memory=s.peak,
                   op_start=s.op_start, op_end=s.op_end if s.op_start.shape[0] else s.op_start,
                   transfer_start=s.transfer_start.reshape(shape),
                   transfer_end=s.transfer_end.reshape(shape))


@functools.partial(jax.jit, static_argnames=("chunk", "record_times"))
def simulate_batch(graph: SimGraph, placement: jnp.ndarray, op_priority: jnp.ndarray,
                   transfer_priority: jnp.ndarray, chunk: int = 8,
                   record_times: bool = True) -> SimResult:
  """The synchronous model for a population: placement [P, O], priorities [P, O], [P, T, D].

  Without `record_times` only the makespan and peak memory are returned (for fitness).
  """
  if not graph.tracks_memory:
    raise ValueError("the synchronous model needs a simulation graph built with memory")
  population = placement.shape[0]
  ctx, state = jax.vmap(_prepare, in_axes=(None, 0, 0, 0, None))(
      graph, placement, op_priority, transfer_priority, record_times)
  flat = ("pending", "inputs_ready", "uses_left", "op_end")
  state = state._replace(**{name: getattr(state, name).reshape(-1) for name in flat})
  ctx = ctx._replace(needs_transfer=ctx.needs_transfer.reshape(population, -1))
  final = jax.lax.while_loop(lambda s: jnp.any(s.busy),
                             lambda s: _step(graph, ctx, s, chunk, record_times), state)
  final = final._replace(**{name: getattr(final, name).reshape(population, -1) for name in flat})
  return jax.vmap(_result, in_axes=(None, 0))(graph, final)
