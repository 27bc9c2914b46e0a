"""The optimal contiguous split of a profiled workload for pipeline max-load, by dynamic
programming over ideals (Tarnawski et al., NeurIPS 2020), written from the paper's description.

Units are the co-location classes (a class's ops share a device; classes on a cycle of the
order below share a stage, so they form one unit). Unit a precedes unit b when a forward op of
a feeds an op of b: in a training graph a backward op goes where its class goes, so forward
edges order the units (the paper's contiguity of the forward graph). A class of backward ops
only (a gradient op without a forward partner) would be unordered, each such class doubling
the ideals: its backward edges order it, turned round (gradients flow back). An ideal is a
set of units closed under predecessors. A contiguous split on k accelerators is a chain of
ideals {} = I_0 < I_1 < ... < I_k = everything, accelerator j holding I_j minus I_{j-1}: the
pipeline's stages in order. Classes with an op only a CPU runs go to the CPU side.

    best[k][I] = min over ideals I' < I of max(best[k - 1][I'], load(I minus I'))

where load is `regal.scoring.throughput.reference`'s accelerator load of a block (it depends on the
block alone: what its ops compute, send out and receive), and a block over the memory cap is
infeasible. From each I' the blocks grow one unit at a time through the ideals above it (each ideal
once per I'); a block stops growing once its compute alone exceeds the best max-load found so far,
which starts at a greedy split's.

`optimal_contiguous_reference` is that recursion written for reading; `optimal_contiguous`,
the one every caller uses, is the same recursion compiled (below).
"""
from __future__ import annotations

import dataclasses
import functools
import time

import networkx
import numba
import numpy as np

from regal_datasets import errors
from regal_datasets.formats.profiled import CPU, Workload
from regal.scoring.throughput import reference as pipeline


@dataclasses.dataclass(frozen=True)
class ContiguousSplit:
  device: np.ndarray  # [o] accelerator of each op, or CPU
  max_load: float  # inf: no contiguous split fits the memory caps
  ideals: int  # ideals of the unit order (the DP's states per accelerator count)
  blocks: int  # blocks whose load was computed
  seconds: float


class _Units:
  """The co-location classes as units, their order, and a block's load and memory."""

  def __init__(self, workload: Workload):
    self.workload = workload
    classes = [m for m in workload.group_members() if workload.on_accelerator[m].all()]
    class_of = np.full(workload.num_ops, -1, np.int64)
    for c, m in enumerate(classes):
      class_of[m] = c
    graph = workload.graph
    src = graph.tensor_producer[graph.data_edge_tensor]
    dst = graph.data_edge_consumer
    a, b = class_of[src], class_of[dst]
    keep = (a >= 0) & (b >= 0) & (a != b)
    backward = workload.backward[src]
    order = networkx.DiGraph()
    order.add_nodes_from(range(len(classes)))
    order.add_edges_from(zip(a[keep & ~backward].tolist(), b[keep & ~backward].tolist()))
    # A class of backward ops only (a gradient op without a forward partner) is ordered by
    # its backward edges turned round: gradients flow back, so the reversed edge is the
    # forward order. Classes with a forward op are ordered by their forward edges alone.
    has_forward = np.zeros(len(classes), bool)
    has_forward[class_of[~workload.backward & (class_of >= 0)]] = True
    loose = keep & backward
    loose[loose] = ~has_forward[a[loose]] | ~has_forward[b[loose]]
    order.add_edges_from(zip(b[loose].tolist(), a[loose].tolist()))
    # Classes on a cycle of the order share a stage in every contiguous split: one unit.
    condensed = networkx.condensation(order)
    units = list(networkx.topological_sort(condensed))
    position = {scc: u for u, scc in enumerate(units)}
    self.members = [np.sort(np.concatenate([classes[c] for c in condensed.nodes[scc]["members"]]))
                    for scc in units]
    self.unit_of = np.full(workload.num_ops, -1, np.int64)
    for u, m in enumerate(self.members):
      self.unit_of[m] = u
    self.pred_mask = [sum(1 << position[p] for p in condensed.predecessors(scc))
                      for scc in units]
    self.compute = np.array([workload.accelerator_latency[m].sum() for m in self.members])
    self.memory = np.array([workload.memory[m].sum() for m in self.members])
    self.src, self.dst = src, dst

  def ops_of(self, mask: int) -> np.ndarray:
    units = [u for u in range(len(self.members)) if mask >> u & 1]
    return np.concatenate([self.members[u] for u in units]) if units else np.zeros(0, np.int64)

  def block_load(self, mask: int) -> float:
    """The accelerator load of a block (a unit bitmask): compute, outputs sent out once,
    outside outputs received once."""
    inside = np.zeros(self.workload.num_ops, bool)
    inside[self.ops_of(mask)] = True
    cost = self.workload.output_cost
    sent = np.zeros(self.workload.num_ops, bool)
    sent[self.src[inside[self.src] & ~inside[self.dst]]] = True
    received = np.zeros(self.workload.num_ops, bool)
    received[self.src[~inside[self.src] & inside[self.dst]]] = True
    return float(self.workload.accelerator_latency[inside].sum() + cost[sent].sum()
                 + cost[received].sum())


@functools.lru_cache(maxsize=4)  # Workloads hash by identity; the latency search asks often.
def units_of(workload: Workload) -> _Units:
  """The workload's co-location units in topological order (their ops: `.members`); read
  only."""
  return _Units(workload)


def _ideals(units: _Units, limit: int) -> list[int]:
  """Every ideal of the unit order as a bitmask, smallest first (each listed once)."""
  count = len(units.members)
  seen = {0}
  frontier = [0]
  ideals = [0]
  while frontier:
    grown = []
    for mask in frontier:
      for u in range(count):
        if not mask >> u & 1 and units.pred_mask[u] & ~mask == 0:
          bigger = mask | 1 << u
          if bigger not in seen:
            seen.add(bigger)
            grown.append(bigger)
    if len(seen) > limit:
      raise errors.ConfigError(f"the contiguous DP needs more than {limit} ideals on this "
                               f"graph: too wide for it")
    ideals += grown
    frontier = grown
  return ideals


def _greedy_bound(units: _Units, accelerators: int) -> float:
  """The max-load of a split of the units in topological order into runs of about equal
  compute that fit the memory cap (inf if it does not fit): the DP's first bound."""
  order = range(len(units.members))  # Units are numbered in topological order.
  target = units.compute.sum() / max(accelerators, 1)
  blocks, mask, compute, memory = [], 0, 0.0, 0.0
  cap = units.workload.accelerator_memory
  for u in order:
    if mask and (compute + units.compute[u] > target or memory + units.memory[u] > cap) and \
        len(blocks) < accelerators - 1:
      blocks.append(mask)
      mask, compute, memory = 0, 0.0, 0.0
    mask |= 1 << u
    compute += units.compute[u]
    memory += units.memory[u]
  blocks.append(mask)
  if any(units.memory[[u for u in range(len(units.members)) if b >> u & 1]].sum() > cap
         for b in blocks):
    return np.inf
  return max(units.block_load(b) for b in blocks)


def _grow(units: _Units, start: int, weight: np.ndarray, bound: list, cap: float):
  """Every ideal above `start` (each once) whose block (it minus `start`) weighs at most
  bound[0] (read at each step: the caller lowers it) and holds at most `cap` bytes: yields
  (ideal, block)."""
  seen = {start}
  stack = [(start, 0.0, 0.0)]
  while stack:
    mask, weighed, memory = stack.pop()
    for u in range(len(units.members)):
      if mask >> u & 1 or units.pred_mask[u] & ~mask:
        continue
      bigger = mask | 1 << u
      if bigger in seen:
        continue
      seen.add(bigger)
      grown = (bigger, weighed + weight[u], memory + units.memory[u])
      if grown[2] > cap or grown[1] > bound[0]:
        continue  # Every larger block weighs more and holds more.
      yield bigger, bigger & ~start
      stack.append(grown)


def optimal_contiguous_reference(workload: Workload, max_ideals: int = 200_000,
                                 time_limit: float = np.inf) -> ContiguousSplit:
  """The least max-load over contiguous splits on at most maxFPGAs accelerators and, when
  there is a CPU, at most one block on the CPU side (with the ops only a CPU runs). Past
  `time_limit` seconds it stops with a one-line error (it has no answer before it ends)."""
  started = time.perf_counter()
  deadline = started + time_limit
  units = _Units(workload)
  fixed_cpu = float(workload.cpu_latency[units.unit_of < 0].sum())
  cpu_weight = np.array([workload.cpu_latency[m].sum() for m in units.members])
  ideals = _ideals(units, max_ideals)
  everything = (1 << len(units.members)) - 1
  bound = [max(_greedy_bound(units, workload.max_accelerators), fixed_cpu)
           if units.members else fixed_cpu]
  # layer[(ideal, CPU block used)]: the least max-load of a chain ending there on at most k
  # accelerators (the CPU side's ops only a CPU runs counted once the CPU block is used).
  # parents[(k, state)] = (k, state before, block, on the CPU).
  layer = {(0, 0): 0.0}
  parents = {}
  blocks = [0]

  def relax(k, into, source, on_cpu):
    for (start, used), value in sorted(source.items(), key=lambda item: item[1]):
      if value > bound[0] or (on_cpu and used):
        continue
      weight = cpu_weight if on_cpu else units.compute
      limit = [bound[0] - fixed_cpu] if on_cpu else bound
      for ideal, block in _grow(units, start, weight, limit, np.inf if on_cpu else
                                workload.accelerator_memory):
        blocks[0] += 1
        if blocks[0] % 4096 == 0 and time.perf_counter() > deadline:
          raise errors.ConfigError(f"the contiguous DP ran past its {time_limit:g} s after "
                                   f"{blocks[0]} blocks over {len(ideals)} ideals")
        load = (fixed_cpu + cpu_weight[_bits(block)].sum() if on_cpu
                else units.block_load(block))
        state = (ideal, 1 if on_cpu else used)
        load = max(value, load)
        if load < into.get(state, np.inf):
          into[state] = load
          parents[(k, state)] = (k if on_cpu else k - 1, (start, used), block, on_cpu)
          if ideal == everything:
            bound[0] = min(bound[0], max(load, fixed_cpu))

  if workload.max_cpus and units.members:
    relax(0, layer, dict(layer), on_cpu=True)
  for k in range(1, workload.max_accelerators + 1):
    following = dict(layer)
    relax(k, following, layer, on_cpu=False)
    if workload.max_cpus:
      relax(k, following, {s: v for s, v in following.items() if not s[1]}, on_cpu=True)
    layer = following
  finals = {used: max(layer.get((everything, used), np.inf), fixed_cpu) for used in (0, 1)}
  device = np.full(workload.num_ops, CPU, np.int64)
  if not units.members:
    return ContiguousSplit(device, fixed_cpu, len(ideals), 0, time.perf_counter() - started)
  used = min(finals, key=finals.get)
  if not np.isfinite(finals[used]):
    return ContiguousSplit(device, np.inf, len(ideals), blocks[0],
                           time.perf_counter() - started)
  chain, k, state = [], workload.max_accelerators, (everything, used)
  while state != (0, 0):
    while (k, state) not in parents:
      k -= 1  # Fewer accelerators reached this state as well.
    k, state, block, on_cpu = parents[(k, state)]
    chain.append((block, on_cpu))
  return _split_of(units, chain, device, len(ideals), blocks[0], started)


def _split_of(units: _Units, chain: list, device: np.ndarray, ideals: int, blocks: int,
              started: float) -> ContiguousSplit:
  """The split of a chain of blocks (unit bitmasks, last first; each with its side):
  accelerators numbered in the pipeline's order."""
  accelerator = 0
  for block, on_cpu in reversed(chain):
    if not on_cpu:
      device[units.ops_of(block)] = accelerator
      accelerator += 1
  return ContiguousSplit(device=device, max_load=pipeline.max_load(units.workload, device),
                         ideals=ideals, blocks=int(blocks),
                         seconds=time.perf_counter() - started)


def _bits(mask: int) -> list[int]:
  return [u for u in range(mask.bit_length()) if mask >> u & 1]


# ----- the same DP, compiled ---------------------------------------------------------------------
# `optimal_contiguous` runs the recursion above with the ideals numbered and the lattice's
# edges (ideal, unit added, ideal reached) in flat arrays, and grows each block by a depth-first
# walk that updates its load as units join and leave: an op's part of a block's load depends on
# whether it is inside and how many of its readers are, so a unit joining changes the parts of
# its own ops and their feeders only. The readable version above is the test's reference.


@dataclasses.dataclass(frozen=True)
class _Lattice:
  masks: list  # each ideal as a unit bitmask, numbered in breadth-first order (0: empty)
  edge_ptr: np.ndarray  # [ideals + 1] CSR over the ideals
  edge_unit: np.ndarray  # the unit an edge adds
  edge_target: np.ndarray  # the ideal it reaches


def _lattice(units: _Units, limit: int) -> _Lattice:
  """The ideals and the lattice's edges; a unit can join an ideal once its predecessors are
  in, so each ideal's addable units follow from its parent's: the parent's, less the unit
  added, plus that unit's successors whose predecessors are now all in."""
  count = len(units.members)
  successors = [[] for _ in range(count)]
  for u in range(count):
    for p in _bits(units.pred_mask[u]):
      successors[p].append(u)
  index = {0: 0}
  masks = [0]
  addable = [[u for u in range(count) if units.pred_mask[u] == 0]]
  edges = []  # per ideal: [(unit, target)]
  at = 0
  while at < len(masks):
    mask, free = masks[at], addable[at]
    out = []
    for u in free:
      bigger = mask | 1 << u
      target = index.get(bigger)
      if target is None:
        target = index[bigger] = len(masks)
        if target >= limit:
          raise errors.ConfigError(f"the contiguous DP needs more than {limit} ideals on this "
                                   f"graph: too wide for it")
        masks.append(bigger)
        addable.append([w for w in free if w != u] +
                       [w for w in successors[u] if units.pred_mask[w] & ~bigger == 0])
      out.append((u, target))
    edges.append(out)
    addable[at] = None  # Read once: free the memory.
    at += 1
  edge_ptr = np.zeros(len(masks) + 1, np.int64)
  edge_ptr[1:] = np.cumsum([len(e) for e in edges])
  flat = [pair for e in edges for pair in e]
  edge_unit = np.array([u for u, _ in flat], np.int64)
  edge_target = np.array([t for _, t in flat], np.int64)
  return _Lattice(masks, edge_ptr, edge_unit, edge_target)


@numba.njit(cache=True)
def _part(op, in_block, readers_in, reader_count, cost):
  """An op's part of a block's load beyond compute: its output sent out (inside, with a reader
  outside) or received (outside, with a reader inside), once."""
  if in_block[op]:
    return cost[op] if readers_in[op] < reader_count[op] else 0.0
  return cost[op] if readers_in[op] > 0 else 0.0


@numba.njit(cache=True)
def _relax_from(starts, start_used, start_values, on_cpu, bound, blocks,
                edge_ptr, edge_unit, edge_target, unit_ptr, unit_ops, feeder_ptr, feeders,
                reader_count, accelerator_latency, cost, weight, unit_memory, cap, fixed_cpu,
                everything, into, parent_start, parent_used, parent_cpu, parent_set,
                visited, stamp, in_block, readers_in, stack_ideal, stack_edge, stack_unit,
                stack_weight, stack_memory, stack_load):
  """Grows every block above each start state (in the given order) and relaxes the states it
  reaches in `into` [ideals, 2]; bound[0] (the best max-load of a whole chain so far) prunes.
  Returns the stamp after the last walk."""
  for s in range(starts.shape[0]):
    value, used = start_values[s], start_used[s]
    if value > bound[0] or (on_cpu and used):
      continue
    stamp += 1
    start = starts[s]
    visited[start] = stamp
    depth = 0
    stack_ideal[0], stack_edge[0], stack_unit[0] = start, edge_ptr[start], -1
    stack_weight[0], stack_memory[0], stack_load[0] = 0.0, 0.0, 0.0
    while depth >= 0:
      here = stack_ideal[depth]
      e = stack_edge[depth]
      if e == edge_ptr[here + 1]:
        u = stack_unit[depth]
        if u >= 0 and not on_cpu:  # The unit leaves the block: undo its ops, last first.
          for k in range(unit_ptr[u + 1] - 1, unit_ptr[u] - 1, -1):
            op = unit_ops[k]
            for f in range(feeder_ptr[op], feeder_ptr[op + 1]):
              readers_in[feeders[f]] -= 1
            in_block[op] = False
        depth -= 1
        continue
      stack_edge[depth] = e + 1
      u, reached = edge_unit[e], edge_target[e]
      if visited[reached] == stamp:
        continue
      visited[reached] = stamp
      grown_weight = stack_weight[depth] + weight[u]
      grown_memory = stack_memory[depth] + unit_memory[u]
      limit = bound[0] - fixed_cpu if on_cpu else bound[0]
      if grown_memory > cap or grown_weight > limit:
        continue  # Every larger block weighs more and holds more.
      blocks[0] += 1
      if on_cpu:
        load = fixed_cpu + grown_weight
      else:
        load = stack_load[depth]
        for k in range(unit_ptr[u], unit_ptr[u + 1]):
          op = unit_ops[k]
          load += accelerator_latency[op] - _part(op, in_block, readers_in, reader_count, cost)
          in_block[op] = True
          load += _part(op, in_block, readers_in, reader_count, cost)
          for f in range(feeder_ptr[op], feeder_ptr[op + 1]):
            feeder = feeders[f]
            load -= _part(feeder, in_block, readers_in, reader_count, cost)
            readers_in[feeder] += 1
            load += _part(feeder, in_block, readers_in, reader_count, cost)
      state_used = 1 if on_cpu else used
      total = max(value, load)
      if total < into[reached, state_used]:
        into[reached, state_used] = total
        parent_start[reached, state_used] = start
        parent_used[reached, state_used] = used
        parent_cpu[reached, state_used] = on_cpu
        parent_set[reached, state_used] = True
        if reached == everything:
          bound[0] = min(bound[0], max(total, fixed_cpu))
      depth += 1
      stack_ideal[depth], stack_edge[depth], stack_unit[depth] = reached, edge_ptr[reached], u
      stack_weight[depth], stack_memory[depth], stack_load[depth] = (grown_weight,
                                                                      grown_memory, load)
  return stamp


def optimal_contiguous(workload: Workload, max_ideals: int = 200_000,
                       time_limit: float = np.inf) -> ContiguousSplit:
  """`optimal_contiguous_reference`'s answer (the same recursion and pruning), compiled: the
  least max-load over contiguous splits on at most maxFPGAs accelerators and, when there is a
  CPU, at most one block on the CPU side. Past `time_limit` seconds it stops with a one-line
  error (it has no answer before it ends)."""
  started = time.perf_counter()
  units = units_of(workload)
  fixed_cpu = float(workload.cpu_latency[units.unit_of < 0].sum())
  device = np.full(workload.num_ops, CPU, np.int64)
  if not units.members:
    return ContiguousSplit(device, fixed_cpu, 1, 0, time.perf_counter() - started)
  lattice = _lattice(units, max_ideals)
  count = len(lattice.masks)
  everything = count - 1  # Breadth-first: the whole set is numbered last.
  assert lattice.masks[everything] == (1 << len(units.members)) - 1
  num_ops = workload.num_ops
  src, dst = units.src, units.dst
  pairs = np.unique(np.stack([src, dst], axis=1), axis=0) if len(src) else np.zeros((0, 2),
                                                                                    np.int64)
  order = np.argsort(pairs[:, 1], kind="stable")
  feeder_ptr = np.zeros(num_ops + 1, np.int64)
  feeder_ptr[1:] = np.cumsum(np.bincount(pairs[:, 1], minlength=num_ops))
  feeders = pairs[order, 0].astype(np.int64)
  reader_count = np.bincount(pairs[:, 0], minlength=num_ops).astype(np.int64)
  unit_ptr = np.zeros(len(units.members) + 1, np.int64)
  unit_ptr[1:] = np.cumsum([len(m) for m in units.members])
  unit_ops = np.concatenate(units.members).astype(np.int64)
  cpu_weight = np.array([workload.cpu_latency[m].sum() for m in units.members])
  accelerators = workload.max_accelerators
  value = np.full((accelerators + 1, count, 2), np.inf)
  parent_start = np.full((accelerators + 1, count, 2), -1, np.int64)
  parent_used = np.zeros((accelerators + 1, count, 2), np.int64)
  parent_cpu = np.zeros((accelerators + 1, count, 2), np.bool_)
  parent_set = np.zeros((accelerators + 1, count, 2), np.bool_)
  value[0, 0, 0] = 0.0
  bound = np.array([max(_greedy_bound(units, accelerators), fixed_cpu)])
  blocks = np.zeros(1, np.int64)
  depth = len(units.members) + 1
  work = dict(visited=np.zeros(count, np.int64), in_block=np.zeros(num_ops, np.bool_),
              readers_in=np.zeros(num_ops, np.int64), stack_ideal=np.zeros(depth, np.int64),
              stack_edge=np.zeros(depth, np.int64), stack_unit=np.zeros(depth, np.int64),
              stack_weight=np.zeros(depth), stack_memory=np.zeros(depth),
              stack_load=np.zeros(depth))
  stamp = 0
  deadline = started + time_limit
  chunk = 64  # Start states per compiled call: the time limit is checked between calls.

  def relax(k, source, on_cpu):
    """Relaxes layer k from the states of `source` [ideals, 2] (a copy), cheapest first."""
    nonlocal stamp
    ideal, used = np.nonzero(np.isfinite(source))
    ranked = np.argsort(source[ideal, used], kind="stable")
    ideal, used = ideal[ranked].astype(np.int64), used[ranked].astype(np.int64)
    for at in range(0, len(ideal), chunk):
      if time.perf_counter() > deadline:
        raise errors.ConfigError(f"the contiguous DP ran past its {time_limit:g} s after "
                                 f"{int(blocks[0])} blocks over {count} ideals")
      part = slice(at, at + chunk)
      stamp = _relax_from(
          ideal[part], used[part], source[ideal[part], used[part]], on_cpu, bound, blocks,
          lattice.edge_ptr, lattice.edge_unit, lattice.edge_target, unit_ptr, unit_ops,
          feeder_ptr, feeders, reader_count, workload.accelerator_latency.astype(np.float64),
          workload.output_cost.astype(np.float64), cpu_weight if on_cpu else units.compute,
          units.memory, np.inf if on_cpu else float(workload.accelerator_memory), fixed_cpu,
          everything, value[k], parent_start[k], parent_used[k], parent_cpu[k], parent_set[k],
          work["visited"], stamp, work["in_block"], work["readers_in"], work["stack_ideal"],
          work["stack_edge"], work["stack_unit"], work["stack_weight"], work["stack_memory"],
          work["stack_load"])

  if workload.max_cpus:
    relax(0, value[0].copy(), on_cpu=True)
  for k in range(1, accelerators + 1):
    value[k] = value[k - 1]
    relax(k, value[k - 1].copy(), on_cpu=False)
    if workload.max_cpus:
      unused = np.full((count, 2), np.inf)
      unused[:, 0] = value[k, :, 0]
      relax(k, unused, on_cpu=True)
  finals = [max(value[accelerators, everything, used], fixed_cpu) for used in (0, 1)]
  used = int(np.argmin(finals))
  seconds = time.perf_counter() - started
  if not np.isfinite(finals[used]):
    return ContiguousSplit(device, np.inf, count, int(blocks[0]), seconds)
  chain, k, ideal = [], accelerators, everything
  while (ideal, used) != (0, 0):
    while not parent_set[k, ideal, used]:
      k -= 1  # Fewer accelerators reached this state as well.
    start, start_used = parent_start[k, ideal, used], parent_used[k, ideal, used]
    on_cpu = parent_cpu[k, ideal, used]
    chain.append((lattice.masks[ideal] & ~lattice.masks[start], on_cpu))
    k = k if on_cpu else k - 1
    ideal, used = int(start), int(start_used)
  return _split_of(units, chain, device, count, blocks[0], started)
