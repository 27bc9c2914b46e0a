"""Local improvement for BRKGA over a graph: batched moves on random-key chromosomes.

The memetic half of the search (`regal.search`): after a generation, the best chromosomes of
each population climb a few steps on the problem's own batched fitness (the exact scorer), and
the engine (`brkga.run`'s `improve` hook) counts every evaluation. The moves are
`regal.scoring.moves`' gene writes (the ones the hill climb and local search make); this module
chooses them:

* a device move of op v goes, with probability `neighbour_device`, to the device of one of v's
  predecessors or successors (moves that save a transfer), else to any other device;
* a cluster move (a fraction `cluster_fraction` of the device moves) takes v to d together
  with the first 2..`CLUSTER_SIZE` ops of v's cluster that share v's device. A cluster is
  either v's breadth-first neighbourhood, heaviest edges first, or the ops a maximum spanning
  tree grown from v takes first (`MoveTable.cluster`; a move picks one at random): an op that
  produces a large tensor and its consumer must change device together, or the move pays the
  transfer it was meant to save, and one-op moves cannot cross that ridge (on the Doppler
  transformer graphs one-op hill climbing stalls 15-25% above what cluster moves reach at
  equal budget; on a sharded FFNN only best-first clusters move a shard's whole chain);
* an exchange (a fraction `exchange_fraction` of the device moves, single-op or cluster): v
  goes to d and an op u drawn from those on d takes v's place, so the devices' loads stay as
  balanced as they were (a sharded graph's shards are equal: one move unbalances two devices,
  an exchange realigns shards without that). A cluster move's exchange brings u's cluster
  back (same kind and size, its ops that share u's device): on a sharded 2d-grid ChainMM (8
  devices) the default run stalls at 4 shard times where trading two shards, each with the
  add that consumes it, between the two NVLink groups reaches 3.4 (the best known), where
  none of its single device moves or exchanges of two ops does;
* an adjacent priority swap (a fraction `swap_fraction` of the moves);
* the op a move takes is drawn uniformly, or, for a fraction `cost_bias` of the moves, in
  proportion to its compute cost (`drawn_op`; off by default);
* a relabelling (a fraction `relabel_fraction` of the moves, in place of the move drawn): two
  devices trade every op of a stretch of the topological order (`relabelled`), so each
  device keeps its load and only the transfers across the stretch's ends change; a sharded
  graph's phases can line up their shards with their inputs' devices without the unbalanced
  steps between.

A climb step scores `batch` moves of each climber, drawn at random, at once and keeps the best
when it worsens the climber by at most a fraction `accept_worse` of its value (0: never worse,
so climbers still walk plateaus; above 0, threshold accepting: a climber can step out of a
shallow basin, and the engine keeps the best it ever scored apart). Padded ops (a size bucket's)
never move: the real sizes are traced values of `MoveTable`, so one compiled search serves
every graph of a bucket.
"""
from __future__ import annotations

import dataclasses
import heapq
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from regal_brkga import programs
from regal_datasets.graph import Graph
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import moves


@struct.dataclass
class MoveTable:
  """What moves need of a graph, padded to a bucket's ops: each op's distinct neighbours
  (predecessors and successors) as CSR."""
  num_ops: jnp.ndarray  # [] int32 real ops; the ops beyond never move
  neighbour_ptr: jnp.ndarray  # [O + 1] int32
  neighbours: jnp.ndarray  # [K] int32 (K >= 1; padding repeats op 0)
  cluster: jnp.ndarray  # [O, CLUSTER_KINDS, CLUSTER_SIZE] int32 op's clusters, itself first
  topo_rank: jnp.ndarray  # [O] int32 each op's position in a topological order (padding: O)
  # [O] float32 the real ops' compute costs, cumulated and normalized (the last real op's
  # 1; every op alike where no op computes); padding 2, beyond any draw (`cost_drawn_op`).
  cost_cdf: jnp.ndarray


# Larger clusters did not pay (experiments/results/search_settings.md#cluster_size).
CLUSTER_SIZE = 8
# Two shapes of an op's heavy-edge cluster (`MoveTable.cluster`): breadth first keeps the op's
# immediate heavy neighbourhood (a fan of shards around a reduce); best first follows a chain
# of heavy tensors before any light edge (a shard's multiply -> add -> multiply). Each helps
# graphs where the other stalls, so a cluster move picks one at random.
CLUSTER_KINDS = 2


def _heaviest_dependency(graph: Graph) -> list[dict[int, float]]:
  """Per op: {neighbour: bytes of the heaviest edge between them, either direction}."""
  weight: list[dict[int, float]] = [{} for _ in range(graph.num_ops)]
  for src, dst, size_bytes in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(),
                                  graph.edge_bytes.tolist()):
    if src != dst:
      for a, b in ((src, dst), (dst, src)):
        weight[a][b] = max(weight[a].get(b, 0.0), size_bytes)
  return weight


def breadth_first_cluster(ranked: list[list[int]], op: int, size: int) -> list[int]:
  """The op's first `size` ops in breadth-first order over its dependencies, an op's
  neighbours taken in `ranked` order (heaviest edge first, ties to the lower id)."""
  members, queue, seen = [op], [op], {op}
  while queue and len(members) < size:
    for other in ranked[queue.pop(0)]:
      if other not in seen:
        seen.add(other)
        members.append(other)
        queue.append(other)
        if len(members) == size:
          break
  return members


def best_first_cluster(weight: list[dict[int, float]], op: int, size: int) -> list[int]:
  """The op, then, one at a time, the op joined to the cluster by the heaviest dependency
  (ties to the lower id), as Prim's algorithm grows a maximum spanning tree; `size` ops."""
  members, joined = [op], {op}
  frontier = [(-w, other) for other, w in weight[op].items()]
  heapq.heapify(frontier)
  while frontier and len(members) < size:
    _, other = heapq.heappop(frontier)
    if other in joined:
      continue  # A stale entry: the op joined through a heavier edge.
    joined.add(other)
    members.append(other)
    for nxt, w in weight[other].items():
      if nxt not in joined:
        heapq.heappush(frontier, (-w, nxt))
  return members


def _clusters(weight: list[dict[int, float]], num_ops: int, size: int) -> np.ndarray:
  ranked = [sorted(w, key=lambda v, w=w: (-w[v], v)) for w in weight]
  clusters = np.full((num_ops, CLUSTER_KINDS, size), -1, np.int32)
  for op in range(len(weight)):
    for kind, members in enumerate((breadth_first_cluster(ranked, op, size),
                                    best_first_cluster(weight, op, size))):
      clusters[op, kind, :len(members)] = members
  return clusters


def neighbour_capacity(graph: Graph) -> int:
  """Entries the neighbour CSR needs: twice the distinct dependencies (rounded up to a power
  of two, so graphs of a bucket share a compiled search)."""
  pairs = len(set(zip(graph.edge_src.tolist(), graph.edge_dst.tolist())))
  return max(1, 1 << int(np.ceil(np.log2(max(2 * pairs, 1)))))


def move_table(graph: Graph, num_ops: int | None = None, capacity: int | None = None
               ) -> MoveTable:
  """The graph's moves, padded to `num_ops` ops and `capacity` neighbour entries."""
  num_ops = graph.num_ops if num_ops is None else num_ops
  capacity = neighbour_capacity(graph) if capacity is None else capacity
  weight = _heaviest_dependency(graph)  # Its keys are each op's distinct neighbours.
  adjacent = [set(w) for w in weight]
  counts = np.zeros(num_ops, np.int64)
  counts[:graph.num_ops] = [len(a) for a in adjacent]
  ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
  flat = np.zeros(capacity, np.int32)
  listed = [v for a in adjacent for v in sorted(a)]
  if len(listed) > capacity:
    raise ValueError(f"{len(listed)} neighbour entries exceed the capacity {capacity}")
  flat[:len(listed)] = listed
  rank = np.full(num_ops, num_ops, np.int32)
  rank[np.asarray(graph.topological_order)] = np.arange(graph.num_ops)
  # Put on the device as they are (`jnp.asarray` compiles a copy per shape).
  return MoveTable(num_ops=jax.device_put(np.int32(graph.num_ops)),
                   neighbour_ptr=jax.device_put(ptr), neighbours=jax.device_put(flat),
                   cluster=jax.device_put(_clusters(weight, num_ops, CLUSTER_SIZE)),
                   topo_rank=jax.device_put(rank), cost_cdf=jax.device_put(cost_cdf(graph,
                                                                                   num_ops)))


def cost_cdf(graph: Graph, num_ops: int) -> np.ndarray:
  """`MoveTable.cost_cdf`: [num_ops] float32."""
  cost = np.asarray(graph.compute_cost, np.float64)
  total = cost.sum()
  real = (np.cumsum(cost) / total if total > 0
          else np.arange(1, graph.num_ops + 1) / max(graph.num_ops, 1))
  cdf = np.full(num_ops, 2.0, np.float32)
  cdf[:graph.num_ops] = real
  if graph.num_ops:
    cdf[graph.num_ops - 1] = 1.0  # No rounding may leave a draw past the last real op.
  return cdf


def cost_drawn_op(u: jnp.ndarray, table: MoveTable) -> jnp.ndarray:
  """The op whose share of the cumulated compute cost holds `u` in [0, 1): op v with
  probability cost[v] / total cost (ops alike where none computes); never a padded op."""
  drawn = jnp.searchsorted(table.cost_cdf, u, side="right").astype(jnp.int32)
  return jnp.minimum(drawn, jnp.maximum(table.num_ops - 1, 0))


def drawn_op(u: jnp.ndarray, table: MoveTable, cost_bias: float) -> jnp.ndarray:
  """The op a move takes, read off one uniform `u` [batch]: with probability `cost_bias` in
  proportion to compute cost (`cost_drawn_op`), else uniformly. `u` below `cost_bias` picks the
  first and, rescaled, is uniform again, so one draw serves both choices; at 0 this is the
  uniform draw itself."""
  if cost_bias <= 0:
    return _drawn_index(u, table.num_ops)
  weighted = u < cost_bias
  rest = (u - cost_bias) / (1 - cost_bias) if cost_bias < 1 else jnp.zeros_like(u)
  return jnp.where(weighted, cost_drawn_op(u / cost_bias, table),
                   _drawn_index(rest, table.num_ops))


def _widened(writes, width: int, size: int):
  """Writes (indices [batch, w], values [batch, w]) padded to `width` with dropped writes
  (indices past the chromosome's `size`), so moves of different widths can be chosen between."""
  return tuple(jnp.pad(part, ((0, 0), (0, width - part.shape[1])), constant_values=fill)
               for part, fill in zip(writes, (size, 0.0)))


def _drawn_index(u: jnp.ndarray, count) -> jnp.ndarray:
  """An index in 0..count - 1 read off a uniform number in [0, 1) (0 when count is 0)."""
  return jnp.minimum(jnp.floor(u * count).astype(jnp.int32), jnp.maximum(count - 1, 0))


def propose(uniform: jnp.ndarray, chromosome: jnp.ndarray, table: MoveTable, how: "Climb",
            exchange_uniform: jnp.ndarray | None = None,
            relabel_uniform: jnp.ndarray | None = None) -> jnp.ndarray:
  """`batch` neighbours [batch, n] of one chromosome, chosen by `uniform` [PROPOSAL_DRAWS,
  batch] numbers in [0, 1): each a device move (a cluster move with probability
  `cluster_fraction`; either one an exchange with probability `exchange_fraction`, drawn by
  `exchange_uniform` [EXCHANGE_DRAWS, batch]) or, with probability `swap_fraction` (and at
  least two real ops), an adjacent priority swap; with probability `relabel_fraction` (drawn
  by `relabel_uniform` [RELABEL_DRAWS, batch]) a relabelling instead (`relabelled`). A device
  move's op is drawn in proportion to compute cost with probability `cost_bias` (`drawn_op`).
  The shares are `how`'s (`Climb`)."""
  layout, swap_fraction, neighbour_device = how.layout, how.swap_fraction, how.neighbour_device
  cluster_fraction, exchange_fraction = how.cluster_fraction, how.exchange_fraction
  relabel_fraction, cost_bias = how.relabel_fraction, how.cost_bias
  num_devices = layout.num_devices
  kind, op_u, pick_u, other_u, use_u, swap_u, cluster_u, size_u = uniform
  swap = (kind < swap_fraction) & (table.num_ops > 1)
  ops = drawn_op(op_u, table, cost_bias)
  placement = chromosome_lib.decode(chromosome, layout).placement
  start, stop = table.neighbour_ptr[ops], table.neighbour_ptr[ops + 1]
  degree = stop - start
  picked = table.neighbours[start + _drawn_index(pick_u, degree)]
  other = (placement[ops] + 1 + _drawn_index(other_u, num_devices - 1)) % num_devices
  neighbour = placement[picked]
  use_neighbour = (use_u < neighbour_device) & (degree > 0) & (neighbour != placement[ops])
  devices = jnp.where(use_neighbour, neighbour, other)
  moved = moves.device_move_genes(chromosome, layout, ops, devices)
  width = 2 * table.cluster.shape[-1] if cluster_fraction > 0 else 2
  if exchange_fraction > 0:
    width *= 2  # Each write of the move, and its partner's coming back.
    partner, alone = _exchange_partner(table, placement, devices, exchange_uniform,
                                       exchange_fraction)
    back = moves.device_move_genes(chromosome, layout, partner, placement[ops])
    moved = _joined(moved, back, alone, chromosome.shape[0])
  moved = _widened(moved, width, chromosome.shape[0])
  if cluster_fraction > 0:
    # One draw picks the cluster's kind (its integer part) and size (its fraction).
    kinds = _drawn_index(size_u, CLUSTER_KINDS)
    sizes = 2 + _drawn_index(size_u * CLUSTER_KINDS - kinds, table.cluster.shape[-1] - 1)
    clustered = moves.cluster_move_genes(chromosome, layout, table.cluster, ops, devices, sizes,
                                         placement, kinds)
    if exchange_fraction > 0:  # The partner's cluster, of the same kind and size, comes back.
      back = moves.cluster_move_genes(chromosome, layout, table.cluster, partner,
                                      placement[ops], sizes, placement, kinds)
      clustered = _joined(clustered, back, alone, chromosome.shape[0])
    clustered = _widened(clustered, width, chromosome.shape[0])
    in_cluster = (cluster_u < cluster_fraction)[:, None]
    moved = jax.tree_util.tree_map(lambda a, b: jnp.where(in_cluster, b, a), moved, clustered)
  if swap_fraction > 0:
    order = chromosome_lib.priority_order(chromosome[layout.priority_slice], table.num_ops)
    positions = _drawn_index(swap_u, table.num_ops - 1)
    swapped = moves.priority_swap_genes(chromosome, layout, order, positions)
    swapped = _widened(swapped, width, chromosome.shape[0])
    moved = jax.tree_util.tree_map(lambda a, b: jnp.where(swap[:, None], b, a), moved, swapped)
  neighbours = moves.apply_moves(chromosome, moved)
  if relabel_fraction > 0:
    use = relabel_uniform[0] < relabel_fraction
    neighbours = jnp.where(use[:, None], relabelled(chromosome, table, layout,
                                                    relabel_uniform[1:]), neighbours)
  return neighbours


RELABEL_DRAWS = 5  # Uniform numbers a relabelling reads (the first: whether the move is one).


def relabelled(chromosome: jnp.ndarray, table: MoveTable, layout: chromosome_lib.Layout,
               uniform: jnp.ndarray) -> jnp.ndarray:
  """[batch, n]: two devices trade every op of a stretch of the topological order, one
  batch row per column of `uniform` [4, batch] (the stretch's two ends, the two devices).

  Why: a sharded graph is a chain of phases, and a good placement lines each phase's shards
  up with the devices holding their inputs. Trading two devices' ops over a stretch keeps
  every device's load as it was and changes only which devices talk across the stretch's
  ends; moves of single ops or clusters must unbalance the devices to get there."""
  first_u, last_u, device_u, other_u = uniform
  num_devices = layout.num_devices
  ends = jnp.stack([_drawn_index(first_u, table.num_ops), _drawn_index(last_u, table.num_ops)])
  low, high = ends.min(axis=0), ends.max(axis=0)
  one = _drawn_index(device_u, num_devices)
  two = (one + 1 + _drawn_index(other_u, num_devices - 1)) % num_devices
  devices = jnp.arange(num_devices)
  permutation = jnp.where(devices[None] == one[:, None], two[:, None],
                          jnp.where(devices[None] == two[:, None], one[:, None], devices[None]))
  affinity = chromosome[layout.affinity_slice].reshape(layout.num_ops, num_devices)
  traded = jnp.take(affinity, permutation, axis=1).transpose(1, 0, 2)  # [batch, O, D]
  inside = (table.topo_rank[None] >= low[:, None]) & (table.topo_rank[None] <= high[:, None])
  affinity = jnp.where(inside[..., None], traded, affinity[None]).reshape(one.shape[0], -1)
  rest = jnp.broadcast_to(chromosome[layout.affinity_slice.stop:],
                          (one.shape[0], chromosome.shape[0] - layout.affinity_slice.stop))
  return jnp.concatenate([affinity, rest], axis=1)


PROPOSAL_DRAWS = 8  # Uniform numbers one proposal reads.
EXCHANGE_DRAWS = 2  # And an exchange (drawn apart, so searches without exchanges keep theirs).


def _exchange_partner(table: MoveTable, placement, devices, uniform, fraction):
  """(partner [batch], alone [batch]): for each move to `devices`, an op drawn uniformly among
  the real ops on that device, and whether the move brings nothing back (a move outside the
  exchanging `fraction`, or an empty device)."""
  use_u, pick_u = uniform
  real = jnp.arange(placement.shape[0]) < table.num_ops
  on_target = (placement[None, :] == devices[:, None]) & real[None, :]  # [batch, O]
  count = on_target.sum(axis=1)
  wanted = _drawn_index(pick_u, count)
  rank = jnp.cumsum(on_target, axis=1) - 1
  partner = jnp.argmax(on_target & (rank == wanted[:, None]), axis=1)
  return partner, (use_u >= fraction) | (count == 0)


def _joined(writes, back, alone, size: int):
  """A move's writes followed by those bringing its partner back, dropped (indices past the
  chromosome's `size`) where the move is `alone`."""
  index, value = back
  index = jnp.where(alone[:, None], size, index)
  return tuple(jnp.concatenate([a, b], axis=1) for a, b in zip(writes, (index, value)))


def hashed_uniform(key: jax.Array, shape: tuple[int, ...]) -> jnp.ndarray:
  """Uniform numbers in [0, 1) from the key's raw bits and a counter through an integer hash
  (lowbias32): what move choices need, and far cheaper to compile than threefry, which would
  add about a second to every search's compile."""
  seed = jax.random.key_data(key).reshape(-1).astype(jnp.uint32)
  x = jnp.arange(int(np.prod(shape)), dtype=jnp.uint32).reshape(shape)
  x = (x * jnp.uint32(0x9E3779B9)) ^ seed[0]
  for _ in range(2):  # Two rounds, the second salted with the key's other word.
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    x = x ^ (x >> 16)
    x = x ^ seed[-1]
  return (x >> 8).astype(jnp.float32) * jnp.float32(2.0 ** -24)


_CASTS = {"int": int, "float": float}


def _setting(default, key: str, low, high=None, upper_open: bool = False):
  """A `Memetic` field: its default, its key in a preset, its range [low, high] (or
  [low, high) when `upper_open`; no upper end when `high` is None)."""
  return dataclasses.field(default=default, metadata={"key": key,
                                                      "range": (low, high, upper_open)})


@dataclasses.dataclass(frozen=True)
class Memetic:
  """Local improvement inside BRKGA (`regal.search.local_moves`): after every `interval`-th
  generation the best `climbers` chromosomes of each population (or the best and others drawn
  from the best `climber_pool`) climb `steps` steps of `batch` moves each; `swap_fraction` of
  the moves are adjacent priority swaps (none when
  the model ignores priorities under the direct decoder), the rest device moves, which go to
  a neighbour's device with probability `neighbour_device`; `cluster_fraction` of the
  device moves take the op's heavy-edge cluster along, and `exchange_fraction` of them (single
  or cluster) bring an op of the target device (with its cluster) back; `relabel_fraction` of
  all moves are relabellings instead (two devices trade a stretch of the topological order);
  `cost_bias` of the moved ops are drawn in proportion to compute cost, the rest uniformly.
  A step takes its best move when that is at most `accept_worse` (a fraction of the climber's
  value) worse.
  `climbers = 0`: plain BRKGA. Each field names its key in a preset (`brkga_presets`) and its
  range (`validate`): presets, validation and the climb all read this one declaration."""
  climbers: int = _setting(0, "climbers", 0)
  # The WC default's climb: 2 climbers x 10 steps x 32 moves (other shapes did not pay:
  # search_settings.md#steps).
  steps: int = _setting(10, "climb_steps", 1)
  batch: int = _setting(32, "climb_batch", 1)
  # Most adjacent swaps leave a WC schedule as it was (each device orders its own ops), so a
  # small share (search_settings.md#swap_fraction).
  swap_fraction: float = _setting(0.1, "swap_fraction", 0.0, 1.0)
  # 0.75 did not pay (search_settings.md#neighbour_device).
  neighbour_device: float = _setting(0.5, "neighbour_device", 0.0, 1.0)
  interval: int = _setting(1, "improve_interval", 1)
  cluster_fraction: float = _setting(0.5, "cluster_fraction", 0.0, 1.0)
  # Cluster moves, and exchanges, paid; more exchanges did not
  # (search_settings.md#exchange_fraction).
  exchange_fraction: float = _setting(0.5, "exchange_fraction", 0.0, 1.0)
  # Threshold accepting: a climber may take a move up to this fraction worse than itself, to
  # leave a shallow basin. Off: not shown to pay (search_settings.md#accept_worse).
  accept_worse: float = _setting(0.0, "accept_worse", 0.0, 1.0, upper_open=True)
  # Relabellings (`local_moves.relabelled`: two devices trade every op of a stretch of the
  # topological order) in place of this share of moves. Off: not shown to pay
  # (search_settings.md#relabel_fraction).
  relabel_fraction: float = _setting(0.0, "relabel_fraction", 0.0, 1.0)
  # The climbers: the best and `climbers` - 1 drawn each generation from the best
  # `climber_pool` (0: the best `climbers`). Off: not shown to pay
  # (search_settings.md#climber_pool).
  climber_pool: int = _setting(0, "climber_pool", 0)
  # The share of moves whose op is drawn in proportion to its compute cost (the rest alike).
  # Off: not shown to pay (search_settings.md#cost_bias).
  cost_bias: float = _setting(0.0, "cost_bias", 0.0, 1.0)

  def validate(self) -> "Memetic":
    for field in dataclasses.fields(self):
      low, high, open_high = field.metadata["range"]
      value = getattr(self, field.name)
      if not (value >= low and (high is None or (value < high if open_high
                                                  else value <= high))):
        raise ValueError(f"out of range: {field.metadata['key']} {value}")
    return self

  @staticmethod
  def keys() -> tuple[str, ...]:
    """Each field's key in a preset, in field order."""
    return tuple(field.metadata["key"] for field in dataclasses.fields(Memetic))

  def values(self) -> dict:
    """{preset key: value}."""
    return {field.metadata["key"]: getattr(self, field.name)
            for field in dataclasses.fields(self)}

  @staticmethod
  def from_values(values: dict) -> "Memetic":
    """From {preset key: value}, each cast to its field's type."""
    return Memetic(**{field.name: _CASTS[field.type](values[field.metadata["key"]])
                      for field in dataclasses.fields(Memetic)})


@struct.dataclass
class Climb:
  """How climbers move (`climb`'s settings; all static: they fix the compiled step)."""
  layout: chromosome_lib.Layout = struct.field(pytree_node=False)
  batch: int = struct.field(pytree_node=False)
  swap_fraction: float = struct.field(pytree_node=False)
  neighbour_device: float = struct.field(pytree_node=False)
  cluster_fraction: float = struct.field(pytree_node=False, default=0.0)
  exchange_fraction: float = struct.field(pytree_node=False, default=0.0)
  accept_worse: float = struct.field(pytree_node=False, default=0.0)
  relabel_fraction: float = struct.field(pytree_node=False, default=0.0)
  cost_bias: float = struct.field(pytree_node=False, default=0.0)

  @staticmethod
  def of(layout: chromosome_lib.Layout, memetic: "Memetic") -> "Climb":
    """The climb a `Memetic` setting makes on chromosomes of `layout`."""
    return Climb(layout, memetic.batch, memetic.swap_fraction, memetic.neighbour_device,
                 memetic.cluster_fraction, memetic.exchange_fraction, memetic.accept_worse,
                 memetic.relabel_fraction, memetic.cost_bias)


def _climb_draws(key: jax.Array, max_steps: int, count: int, how: Climb):
  """Every step's uniforms for `count` climbers: moves [S, C, PROPOSAL_DRAWS, batch], then
  exchanges and relabellings (empty when off)."""
  batch = how.batch
  uniform = hashed_uniform(key, (max_steps, count, PROPOSAL_DRAWS, batch))
  # Drawn only for exchanges, from a key of their own, so climbs without them are unchanged.
  exchange = (hashed_uniform(jax.random.fold_in(key, 1),
                             (max_steps, count, EXCHANGE_DRAWS, batch))
              if how.exchange_fraction > 0 else jnp.zeros((max_steps, count, 0, batch)))
  relabel = (hashed_uniform(jax.random.fold_in(key, 2),
                            (max_steps, count, RELABEL_DRAWS, batch))
             if how.relabel_fraction > 0 else jnp.zeros((max_steps, count, 0, batch)))
  return uniform, exchange, relabel


def _candidates(draws, step, climbers: jnp.ndarray, table: MoveTable, how: Climb
                ) -> jnp.ndarray:
  """Step `step`'s moves of every climber [C, n]: [C, batch, n]."""
  uniform, exchange, relabel = (d[step] for d in draws)
  return jax.vmap(lambda u, e, r, c: propose(u, c, table, how, e, r))(uniform, exchange,
                                                                     relabel, climbers)


def _accepted(candidates: jnp.ndarray, scored: jnp.ndarray, climbers: jnp.ndarray,
              values: jnp.ndarray, how: Climb) -> tuple[jnp.ndarray, jnp.ndarray]:
  """Each climber after its best move (scored [C, batch]), when that move is accepted."""
  winner = jnp.argmin(scored, axis=1)
  best = jnp.take_along_axis(scored, winner[:, None], axis=1)[:, 0]
  accept_worse = how.accept_worse
  # Without a threshold, no arithmetic on the values: 0 * inf (an unscored climber) is NaN.
  take = best <= (values + accept_worse * jnp.abs(values) if accept_worse else values)
  chosen = jnp.take_along_axis(candidates, winner[:, None, None], axis=1)[:, 0]
  return jnp.where(take[:, None], chosen, climbers), jnp.where(take, best, values)


def climb(fitness_fn: Callable[[jnp.ndarray], jnp.ndarray], key: jax.Array,
          climbers: jnp.ndarray, values: jnp.ndarray, table: MoveTable, how: "Climb", steps,
          max_steps: int | None = None) -> tuple[jnp.ndarray, jnp.ndarray]:
  """`steps` (may be traced, at most the static `max_steps`) climb steps of every climber
  [C, n] with fitness [C], moving as `how` says (`Climb.of(layout, memetic)`): one fitness
  call of C * batch chromosomes per step. A step takes its best move when that move's fitness
  is at most the climber's plus `accept_worse` times its magnitude."""
  max_steps = steps if max_steps is None else max_steps
  count = climbers.shape[0]
  draws = _climb_draws(key, max_steps, count, how)

  def step(i, carry):
    climbers, values = carry
    candidates = _candidates(draws, i, climbers, table, how)
    scored = fitness_fn(candidates.reshape(count * how.batch, -1)).reshape(count, how.batch)
    return _accepted(candidates, scored, climbers, values, how)

  return jax.lax.fori_loop(0, steps, step, (climbers, values))


def climber_ranks(key: jax.Array, pops: int, count: int, pool: int) -> jnp.ndarray:
  """[pops, count] ranks of the chromosomes that climb in each population: the best (rank 0)
  and `count` - 1 distinct ranks drawn uniformly from 1..`pool` - 1 (`pool` <= `count`: the
  best `count`, in order)."""
  if pool <= count:
    return jnp.broadcast_to(jnp.arange(count, dtype=jnp.int32), (pops, count))
  # The first count - 1 of a random permutation of 1..pool - 1 (argsort of hashed numbers:
  # distinct ranks without threefry's compile cost).
  drawn = jnp.argsort(hashed_uniform(jax.random.fold_in(key, 3), (pops, pool - 1)),
                      axis=1)[:, :count - 1].astype(jnp.int32) + 1
  return jnp.concatenate([jnp.zeros((pops, 1), jnp.int32), drawn], axis=1)


def elite_improver(fitness_fn: Callable[[jnp.ndarray], jnp.ndarray], table: MoveTable,
                   layout: chromosome_lib.Layout, memetic: "Memetic"):
  """A `brkga.run` improve hook: `memetic.climbers` chromosomes of each population climb
  `memetic.steps` steps (fewer when the budget left does not cover them): the best ones, or,
  with a `climber_pool` larger than that, the best and the others drawn anew each time from
  the best `climber_pool` (`climber_ranks`)."""
  how = Climb.of(layout, memetic)
  climbers, steps, batch = memetic.climbers, memetic.steps, memetic.batch

  def improve(key, population, fitness, allowance):
    ranks, affordable, tops, values = _climbers(key, population, fitness, allowance, climbers,
                                                steps, batch, memetic.climber_pool)
    tops, values = climb(fitness_fn, key, tops, values, table, how, affordable, steps)
    return _climbed(population, fitness, ranks, affordable, tops, values, batch)

  return improve


def _climbers(key, population, fitness, allowance, climbers: int, steps: int, batch: int,
              climber_pool: int):
  """(ranks [Pi, C] of the climbers, the steps the allowance affords, the climbers [Pi * C, n]
  and their fitness)."""
  pops, size, genes = population.shape
  count = min(climbers, size)
  affordable = jnp.clip(allowance // (pops * count * batch), 0, steps).astype(jnp.int32)
  ranks = climber_ranks(key, pops, count, min(climber_pool, size))
  rows = jnp.arange(pops)[:, None]
  return (ranks, affordable, population[rows, ranks].reshape(pops * count, genes),
          fitness[rows, ranks].reshape(-1))


def _climbed(population, fitness, ranks, affordable, tops, values, batch: int):
  """(population, fitness, evaluations spent) with the climbers back in their places."""
  pops, count = ranks.shape
  rows = jnp.arange(pops)[:, None]
  population = population.at[rows, ranks].set(tops.reshape(pops, count, -1))
  fitness = fitness.at[rows, ranks].set(values.reshape(pops, count))
  return population, fitness, affordable * (pops * count * batch)


# The host climb's steps, each kept across processes (`regal_brkga.programs`).
_climbers_jit = programs.Program(_climbers, (4, 5, 6, 7), packages=("regal",))
_climb_draws_jit = programs.Program(_climb_draws, (1, 2, 3), packages=("regal",))
_candidates_jit = programs.Program(_candidates, (4,), packages=("regal",))
_accepted_jit = programs.Program(_accepted, (4,), packages=("regal",))
_climbed_jit = programs.Program(_climbed, (6,), packages=("regal",))


def elite_improver_on_host(score: Callable[[np.ndarray], np.ndarray], table: MoveTable,
                           layout: chromosome_lib.Layout, memetic: "Memetic"):
  """`elite_improver` as a `brkga.run_on_host` hook: the same climbs, move for move, with
  `score` a host function (numpy chromosomes [N, n] -> fitness [N]) called between jitted
  steps."""
  how = Climb.of(layout, memetic)
  climbers, steps, batch = memetic.climbers, memetic.steps, memetic.batch
  climber_pool = memetic.climber_pool

  def improve(key, population, fitness, allowance):
    ranks, affordable, tops, values = _climbers_jit(key, population, fitness,
                                                    jnp.asarray(allowance, jnp.int32),
                                                    climbers, steps, batch, climber_pool)
    affordable_steps = int(affordable)
    if affordable_steps:
      draws = _climb_draws_jit(key, steps, tops.shape[0], how)
      for step in range(affordable_steps):
        candidates = _candidates_jit(draws, step, tops, table, how)
        scored = np.asarray(score(np.asarray(candidates).reshape(-1, candidates.shape[-1])),
                            np.float32).reshape(candidates.shape[:2])
        tops, values = _accepted_jit(candidates, scored, tops, values, how)
    return _climbed_jit(population, fitness, ranks, affordable, tops, values, batch)

  return improve
