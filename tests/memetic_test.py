"""The memetic search: the engine's improve hook, the local moves, the list-scheduling decoder
(each against a slow reference) and the search settings end to end."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from graph_strategies import dags, device_sets
from hypothesis import given, settings
from hypothesis import strategies as st

import regal_brkga as brkga
from regal_datasets import devices as devices_lib
from regal import search
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import list_decoder, moves, performance
from regal.scoring.delay import native as native_delay
from regal.scoring.delay import reference as delay_reference
from regal.search import brkga_search, local_moves


# ----- the engine's hook ----------------------------------------------------------------------
def _counting_search(budget: int, interval: int, climbers: int, batch: int):
  """A search whose fitness counts every chromosome it scores (on the host) and whose hook
  scores `climbers * batch` random neighbours per step, as many steps as the allowance pays."""
  scored = []

  def host_fitness(chromosomes):
    scored.append(len(chromosomes))
    return np.abs(np.asarray(chromosomes) - 0.3).sum(axis=1).astype(np.float32)

  def fitness(chromosomes):
    return jax.pure_callback(host_fitness, jax.ShapeDtypeStruct(chromosomes.shape[:1],
                                                                jnp.float32), chromosomes)

  def improve(key, population, values, allowance):
    per_step = population.shape[0] * climbers * batch
    steps = jnp.clip(allowance // per_step, 0, 3)

    def step(i, carry):
      population, values = carry
      tops = population[:, :climbers]
      noise = jax.random.uniform(jax.random.fold_in(key, i), tops.shape[:2] + (batch,)
                                 + tops.shape[2:], minval=-0.05, maxval=0.05)
      candidates = jnp.clip(tops[:, :, None] + noise, 0, 1)
      candidate_values = fitness(candidates.reshape(-1, tops.shape[-1])).reshape(
          candidates.shape[:3])
      best = jnp.argmin(candidate_values, axis=-1)
      best_values = jnp.take_along_axis(candidate_values, best[..., None], -1)[..., 0]
      chosen = jnp.take_along_axis(candidates, best[..., None, None], 2)[:, :, 0]
      take = best_values < values[:, :climbers]
      population = population.at[:, :climbers].set(jnp.where(take[..., None], chosen, tops))
      values = values.at[:, :climbers].set(jnp.where(take, best_values, values[:, :climbers]))
      return population, values

    population, values = jax.lax.fori_loop(0, steps, step, (population, values))
    return population, values, steps * per_step

  params = brkga.Params(population_size=20, num_elites=4, num_mutants=3, num_populations=2,
                        exchange_interval=2, exchange_count=1)
  result = brkga.run(fitness, jax.random.key(0), params, budget, 6, improve=improve,
                     improve_interval=interval)
  return result, scored


@settings(max_examples=3, deadline=None)  # Each example compiles a search.
@given(st.integers(40, 400), st.integers(1, 3), st.integers(1, 4), st.integers(1, 5))
def test_hook_evaluations_are_counted_exactly_and_stay_in_budget(budget, interval, climbers,
                                                                 batch):
  result, scored = _counting_search(budget, interval, climbers, batch)
  assert int(result.evaluations) == sum(scored) <= budget
  history = np.asarray(result.history)[:int(result.generations) + 1]
  assert np.all(np.diff(history) <= 0) and history[-1] == result.best_fitness


def test_hook_improves_and_without_it_the_engine_is_unchanged():
  params = brkga.Params(population_size=20, num_elites=4, num_mutants=3)
  fitness = lambda c: jnp.abs(c - 0.3).sum(axis=1)  # noqa: E731
  plain = brkga.run(fitness, jax.random.key(1), params, 300, 6)
  nothing = brkga.run(fitness, jax.random.key(1), params, 300, 6,
                      improve=lambda k, p, f, a: (p, f, jnp.int32(0)))
  np.testing.assert_array_equal(plain.best_chromosome, nothing.best_chromosome)
  result, _ = _counting_search(300, 1, 2, 4)
  unimproved, _ = _counting_search(300, 1, 0, 4)
  assert result.best_fitness < unimproved.best_fitness


# ----- moves against readable references (the moves themselves: moves_test.py) ------------
def _proposal_inputs(graph, num_devices, seed):
  """(ops with 3 padded, layout, move table, rng, a random chromosome, 16 proposals' draws)."""
  padded_ops = graph.num_ops + 3
  layout = chromosome_lib.Layout(padded_ops, graph.num_tensors, num_devices)
  rng = np.random.default_rng(seed)
  chromosome = rng.random(layout.size).astype(np.float32)
  uniform = jnp.asarray(rng.random((local_moves.PROPOSAL_DRAWS, 16)), jnp.float32)
  return padded_ops, layout, local_moves.move_table(graph, padded_ops), rng, chromosome, uniform


@settings(max_examples=15, deadline=None)
@given(dags(max_ops=8, max_outputs=2), st.integers(2, 4), st.integers(0, 2**31),
       st.floats(0, 1), st.floats(0, 1))
def test_proposals_are_single_moves_of_real_ops(graph, num_devices, seed, swaps, neighbour):
  """Every proposal differs from its chromosome by one device move or one adjacent swap of
  real ops (padded ops never move), and a device move goes to another device."""
  padded_ops, layout, table, rng, chromosome, uniform = _proposal_inputs(graph, num_devices,
                                                                         seed)
  proposals = np.asarray(local_moves.propose(uniform, jnp.asarray(chromosome), table,
                                             local_moves.Climb(layout, uniform.shape[1], swaps,
                                                               neighbour)))
  before = chromosome_lib.decode(chromosome, layout)
  real_order = [v for v in chromosome_lib.priority_order(before.op_priority)
                if v < graph.num_ops]
  for proposal in proposals:
    after = chromosome_lib.decode(proposal, layout)
    moved = np.flatnonzero(after.placement != before.placement)
    order = [v for v in chromosome_lib.priority_order(after.op_priority) if v < graph.num_ops]
    if len(moved):
      assert len(moved) == 1 and moved[0] < graph.num_ops
      np.testing.assert_array_equal(after.op_priority, before.op_priority)
    elif order != real_order:
      changed = [k for k in range(len(order)) if order[k] != real_order[k]]
      assert len(changed) == 2 and changed[1] == changed[0] + 1
    np.testing.assert_array_equal(proposal[layout.transfer_slice],
                                  chromosome[layout.transfer_slice])
    assert (proposal[graph.num_ops * num_devices:padded_ops * num_devices]
            == chromosome[graph.num_ops * num_devices:padded_ops * num_devices]).all()


def _exchanging_proposals(graph, num_devices, seed, neighbour_device, cluster_fraction):
  """(padded ops, layout, chromosome, uniform, exchange draws, proposals): 16 proposals of a
  random chromosome in which every device move exchanges."""
  padded_ops, layout, table, rng, chromosome, uniform = _proposal_inputs(graph, num_devices,
                                                                         seed)
  exchange = jnp.asarray(rng.random((local_moves.EXCHANGE_DRAWS, 16)) * [[0.0], [1.0]],
                         jnp.float32)  # Every move exchanges.
  proposals = np.asarray(local_moves.propose(
      uniform, jnp.asarray(chromosome), table,
      local_moves.Climb(layout, uniform.shape[1], 0.0, neighbour_device, cluster_fraction, 1.0),
      exchange))
  return padded_ops, layout, chromosome, uniform, exchange, proposals


@settings(max_examples=15, deadline=None)
@given(dags(max_ops=8, max_outputs=2), st.integers(2, 4), st.integers(0, 2**31))
def test_exchanges_trade_two_real_ops_devices(graph, num_devices, seed):
  """With every device move an exchange, a proposal moves op v from a to b and, when b holds a
  real op, exactly one of them from b to a (a slow reference: the placements compared op by
  op); every device keeps its op count. Padded ops never move."""
  padded_ops, layout, chromosome, _, _, proposals = _exchanging_proposals(graph, num_devices,
                                                                         seed, 0.5, 0.0)
  before = chromosome_lib.decode(chromosome, layout).placement
  for proposal in proposals:
    after = chromosome_lib.decode(proposal, layout).placement
    moved = [v for v in range(padded_ops) if after[v] != before[v]]
    assert all(v < graph.num_ops for v in moved)
    assert len(moved) in (1, 2)
    if len(moved) == 1:  # Only when the target device held no real op.
      (v,) = moved
      assert not any(before[u] == after[v] for u in range(graph.num_ops))
    else:
      u, v = moved
      assert after[u] == before[v] and after[v] == before[u]
    real_before = np.bincount(before[:graph.num_ops], minlength=num_devices)
    real_after = np.bincount(after[:graph.num_ops], minlength=num_devices)
    if len(moved) == 2:
      np.testing.assert_array_equal(real_after, real_before)


@settings(max_examples=30, deadline=None)
@given(dags(max_ops=10, max_outputs=3), st.integers(2, 4), st.integers(0, 2**31))
def test_relabellings_trade_two_devices_over_a_stretch_of_the_topological_order(
    graph, num_devices, seed):
  """With every move a relabelling: a slow reference reads the stretch's ends and the two
  devices off the drawn numbers, walks the graph's topological order and swaps the two
  devices of every op inside the stretch; the proposal's placement is the reference's, its
  priorities and transfer keys are the chromosome's, and padded ops never move."""
  padded_ops = graph.num_ops + 3
  layout = chromosome_lib.Layout(padded_ops, graph.num_tensors, num_devices)
  rng = np.random.default_rng(seed)
  chromosome = rng.random(layout.size).astype(np.float32)
  table = local_moves.move_table(graph, padded_ops)
  batch = 16
  relabel = rng.random((local_moves.RELABEL_DRAWS, batch)).astype(np.float32)
  relabel[0] = 0.0  # Every proposal is a relabelling.
  proposals = np.asarray(local_moves.propose(
      jnp.asarray(rng.random((local_moves.PROPOSAL_DRAWS, batch)), jnp.float32),
      jnp.asarray(chromosome), table,
      local_moves.Climb(layout, batch, 0.3, 0.5, relabel_fraction=1.0),
      relabel_uniform=jnp.asarray(relabel)))
  before = chromosome_lib.decode(chromosome, layout).placement
  for row, proposal in enumerate(proposals):
    first, last, device, other = relabel[1:, row]
    pick = lambda u, count: min(int(np.floor(u * count)), count - 1)  # noqa: E731
    low, high = sorted((pick(first, graph.num_ops), pick(last, graph.num_ops)))
    one = pick(device, num_devices)
    two = (one + 1 + pick(other, num_devices - 1)) % num_devices
    expected = before.copy()
    for position, op in enumerate(graph.topological_order):
      if low <= position <= high:
        expected[op] = {one: two, two: one}.get(before[op], before[op])
    np.testing.assert_array_equal(chromosome_lib.decode(proposal, layout).placement, expected)
    np.testing.assert_array_equal(proposal[layout.affinity_slice.stop:],
                                  chromosome[layout.affinity_slice.stop:])


@settings(max_examples=15, deadline=None)
@given(dags(max_ops=10, max_outputs=3), st.integers(2, 4), st.integers(0, 2**31))
def test_cluster_exchanges_match_a_slow_reference(graph, num_devices, seed):
  """With every device move a cluster exchange: op v's cluster (its first `size` ops of the
  drawn kind that share v's device a) goes to device b, and the cluster (same kind and size)
  of the op drawn among b's real ops comes back to a. The reference reads the same draws and
  the slow cluster walks, op by op."""
  _, layout, chromosome, uniform, exchange, proposals = _exchanging_proposals(
      graph, num_devices, seed, 0.0, 1.0)
  clusters = _reference_clusters(graph, local_moves.CLUSTER_SIZE)
  before = chromosome_lib.decode(chromosome, layout).placement
  draws, picks = np.asarray(uniform), np.asarray(exchange)[1]
  n, slots = graph.num_ops, local_moves.CLUSTER_SIZE

  for j, proposal in enumerate(proposals):
    _, op_u, _, other_u, _, _, _, size_u = draws[:, j]
    v = min(int(op_u * n), n - 1)
    a = before[v]
    b = (a + 1 + min(int(other_u * (num_devices - 1)), num_devices - 2)) % num_devices
    kind = min(int(size_u * local_moves.CLUSTER_KINDS), local_moves.CLUSTER_KINDS - 1)
    size = 2 + min(int((size_u * local_moves.CLUSTER_KINDS - kind) * (slots - 1)), slots - 2)
    expected = before.copy()
    expected[[w for w in clusters[kind][v][:size] if before[w] == a]] = b
    on_b = [w for w in range(n) if before[w] == b]
    if on_b:
      u = on_b[min(int(picks[j] * len(on_b)), len(on_b) - 1)]
      expected[[w for w in clusters[kind][u][:size] if before[w] == b]] = a
    np.testing.assert_array_equal(chromosome_lib.decode(proposal, layout).placement, expected)
    np.testing.assert_array_equal(proposal[layout.num_ops * num_devices:],
                                  chromosome[layout.num_ops * num_devices:])


def test_neighbour_device_moves_go_to_a_neighbours_device():
  """With neighbour_device = 1 and no swaps, an op moves to a device one of its neighbours
  is on (when one is elsewhere)."""
  from regal_datasets.graph import Graph
  graph = Graph(op_names=list("abc"), op_types=[""] * 3, compute_cost=[1.0] * 3,
                extra_memory=[0.0] * 3, tensor_producer=[0, 1], tensor_size=[1.0, 1.0],
                data_edge_tensor=[0, 1], data_edge_consumer=[1, 2], control_edge_src=[],
                control_edge_dst=[])
  layout = chromosome_lib.Layout(3, 2, 4)
  chromosome = chromosome_lib.encode(np.array([0, 3, 2]), np.arange(3), layout)
  uniform = jnp.asarray(np.random.default_rng(0).random((local_moves.PROPOSAL_DRAWS, 64)),
                        jnp.float32)
  proposals = np.asarray(local_moves.propose(uniform, jnp.asarray(chromosome, jnp.float32),
                                             local_moves.move_table(graph),
                                             local_moves.Climb(layout, uniform.shape[1], 0.0,
                                                               1.0)))
  placements = chromosome_lib.decode(proposals, layout).placement
  for placement in placements:
    op = int(np.flatnonzero(placement != [0, 3, 2])[0])
    neighbours = {0: [1], 1: [0, 2], 2: [1]}[op]
    assert placement[op] in {[0, 3, 2][v] for v in neighbours}


def _reference_clusters(graph, size):
  """Each op's two clusters (`local_moves.move_table(...).cluster`), slowly: a plain breadth-first walk
  taking neighbours by descending heaviest edge between the pair, then id; and a greedy growth
  that each time scans every op outside for its heaviest edge into the cluster and takes the
  heaviest (then the lower id)."""
  heaviest = {}
  for src, dst, size_bytes in zip(graph.edge_src, graph.edge_dst, graph.edge_bytes):
    if src != dst:
      for pair in ((src, dst), (dst, src)):
        heaviest[pair] = max(heaviest.get(pair, 0.0), float(size_bytes))
  breadth, best = [], []
  for op in range(graph.num_ops):
    members, frontier = [op], [op]
    while frontier and len(members) < size:
      current = frontier.pop(0)
      around = sorted((-w, v) for (u, v), w in heaviest.items() if u == current)
      for _, other in around:
        if other not in members and len(members) < size:
          members.append(other)
          frontier.append(other)
    breadth.append(members)
    members = [op]
    while len(members) < size:
      links = [(-w, v) for (u, v), w in heaviest.items() if u in members and v not in members]
      if not links:
        break
      members.append(min(links)[1])
    best.append(members)
  return breadth, best


@settings(max_examples=10, deadline=None)
@given(dags(max_ops=10, max_outputs=3), st.integers(2, 4), st.integers(0, 2**31),
       st.integers(2, local_moves.CLUSTER_SIZE), st.integers(0, local_moves.CLUSTER_KINDS - 1))
def test_cluster_moves_match_a_slow_reference(graph, num_devices, seed, size, kind):
  """A cluster move of op v to device d moves exactly the first `size` ops of v's cluster
  (of either kind; reference: the slow walks above) that share v's device, and nothing else."""
  padded_ops = graph.num_ops + 2
  layout = chromosome_lib.Layout(padded_ops, graph.num_tensors, num_devices)
  table = local_moves.move_table(graph, padded_ops)
  clusters = _reference_clusters(graph, local_moves.CLUSTER_SIZE)
  for shape, reference in enumerate(clusters):
    for op, members in enumerate(reference):
      np.testing.assert_array_equal(np.asarray(table.cluster[op, shape])[:len(members)],
                                    members)
      assert (np.asarray(table.cluster[op, shape])[len(members):] == -1).all()
  assert (np.asarray(table.cluster)[graph.num_ops:] == -1).all()
  clusters = clusters[kind]
  rng = np.random.default_rng(seed)
  chromosome = rng.random(layout.size).astype(np.float32)
  before = chromosome_lib.decode(chromosome, layout).placement
  ops = np.arange(graph.num_ops)
  devices = (before[ops] + 1 + rng.integers(0, num_devices - 1, len(ops))) % num_devices
  # With numpy (no compile per example); moves_test.py checks jnp gives the same writes.
  writes = moves.cluster_move_genes(chromosome, layout, np.asarray(table.cluster), ops, devices,
                                    np.full(len(ops), size), kind=np.full(len(ops), kind))
  moved = moves.apply_moves(chromosome, writes)
  for op, device, row in zip(ops, devices, moved):
    expected = before.copy()
    expected[[u for u in clusters[op][:size] if before[u] == before[op]]] = device
    np.testing.assert_array_equal(chromosome_lib.decode(row, layout).placement, expected)
    np.testing.assert_array_equal(row[layout.num_ops * num_devices:],
                                  chromosome[layout.num_ops * num_devices:])


def test_the_two_cluster_kinds_differ_where_a_heavy_chain_leaves_a_fan():
  """Op 0 feeds ops 1 and 2 (medium tensors) and op 1 feeds op 3 (a heavy one): breadth first
  takes 0's neighbours 1 and 2 first; best first follows 1's heavy tensor to 3 before 2."""
  from regal_datasets.graph import Graph
  graph = Graph(op_names=list("abcd"), op_types=[""] * 4, compute_cost=[1.0] * 4,
                extra_memory=[0.0] * 4, tensor_producer=[0, 1], tensor_size=[10.0, 100.0],
                data_edge_tensor=[0, 0, 1], data_edge_consumer=[1, 2, 3], control_edge_src=[],
                control_edge_dst=[])
  clusters = np.asarray(local_moves.move_table(graph).cluster)
  np.testing.assert_array_equal(clusters[0, :, :3], [[0, 1, 2], [0, 1, 3]])


def test_cluster_proposals_take_the_heavy_consumer_along():
  """With every move a cluster move, an op whose tensor is far heavier than its others moves
  with that tensor's consumer whenever they share a device and the cluster holds two."""
  from regal_datasets.graph import Graph
  graph = Graph(op_names=list("abc"), op_types=[""] * 3, compute_cost=[1.0] * 3,
                extra_memory=[0.0] * 3, tensor_producer=[0, 1], tensor_size=[100.0, 1.0],
                data_edge_tensor=[0, 1], data_edge_consumer=[1, 2], control_edge_src=[],
                control_edge_dst=[])
  layout = chromosome_lib.Layout(3, 2, 3)
  chromosome = chromosome_lib.encode(np.array([0, 0, 0]), np.arange(3), layout)
  uniform = np.random.default_rng(0).random((local_moves.PROPOSAL_DRAWS, 64))
  uniform[1] = 0.0  # Every proposal moves op a.
  uniform[7] = 0.0  # Breadth-first clusters of two: a and its heaviest neighbour, b.
  proposals = np.asarray(local_moves.propose(jnp.asarray(uniform, jnp.float32),
                                             jnp.asarray(chromosome, jnp.float32),
                                             local_moves.move_table(graph),
                                             local_moves.Climb(layout, uniform.shape[1], 0.0,
                                                               0.0, cluster_fraction=1.0)))
  for placement in chromosome_lib.decode(proposals, layout).placement:
    assert placement[0] == placement[1] != 0 and placement[2] == 0


def test_climb_never_worsens_and_reports_true_values():
  from regal_datasets import synthetic
  graph = synthetic.generate(np.random.default_rng(3),
                             synthetic.SyntheticSpec(min_nodes=20, max_nodes=20))
  problem = performance.Problem(graph, devices_lib.homogeneous(3), model="delay")
  fitness = performance.make_fitness_fn(problem)
  climbers = jax.random.uniform(jax.random.key(0), (3, problem.layout.size))
  values = fitness(climbers)
  table = local_moves.move_table(graph)
  out, out_values = local_moves.climb(fitness, jax.random.key(1), climbers, values, table,
                                      local_moves.Climb(problem.layout, 8, 0.3, 0.5), 5)
  assert np.all(np.asarray(out_values) <= np.asarray(values))
  np.testing.assert_array_equal(fitness(out), out_values)



@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(0, 12), st.integers(0, 2**31))
def test_climber_ranks_are_the_best_and_distinct_draws_from_the_pool(pops, count, pool, seed):
  ranks = np.asarray(local_moves.climber_ranks(jax.random.key(seed), pops, count, pool))
  assert ranks.shape == (pops, count)
  if pool <= count:
    np.testing.assert_array_equal(ranks, np.broadcast_to(np.arange(count), (pops, count)))
  else:
    assert np.all(ranks[:, 0] == 0) and np.all((ranks[:, 1:] >= 1) & (ranks[:, 1:] < pool))
    assert all(len(set(row)) == count for row in ranks.tolist())


def test_a_climber_pool_polishes_the_best_and_drawn_elites_only():
  # Moves trade keys within a chromosome, so none changes this fitness, and climbers walk the
  # plateau: exactly the climbers change. With a pool, they are the best and the drawn ranks;
  # without one, the best `climbers`. Over many draws, every rank of the pool (and none
  # beyond) climbs.
  from regal_datasets import synthetic
  graph = synthetic.generate(np.random.default_rng(3),
                             synthetic.SyntheticSpec(min_nodes=12, max_nodes=12))
  layout = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, 3)
  fitness = lambda c: jnp.abs(c - 0.3).sum(axis=-1)  # noqa: E731
  table = local_moves.move_table(graph)
  population = jax.random.uniform(jax.random.key(2), (2, 10, layout.size))
  values = fitness(population)
  order = jnp.argsort(values, axis=1)
  population = jnp.take_along_axis(population, order[..., None], axis=1)
  values = jnp.take_along_axis(values, order, axis=1)
  touched = np.zeros(10, bool)
  for pool, expected in ((0, {0, 1}), (2, {0, 1}), (6, None)):
    improve = local_moves.elite_improver(fitness, table, layout, local_moves.Memetic(
        climbers=2, steps=3, batch=4, swap_fraction=0.3, neighbour_device=0.5,
        cluster_fraction=0.0, exchange_fraction=0.0, climber_pool=pool))
    for draw in range(20 if pool == 6 else 1):
      key = jax.random.key(draw)
      out, out_values, spent = improve(key, population, values, jnp.int32(10_000))
      changed = np.any(np.asarray(out != population), axis=2)  # [pops, P]
      climbed = np.zeros_like(changed)
      climbed[np.arange(2)[:, None], np.asarray(local_moves.climber_ranks(key, 2, 2, pool))] = True
      np.testing.assert_array_equal(changed, climbed)
      np.testing.assert_array_equal(fitness(out), out_values)
      assert int(spent) == 3 * 2 * 2 * 4
      if expected is not None:
        assert set(np.nonzero(climbed[0])[0]) == expected
      else:
        touched |= changed.any(axis=0)
  assert touched[:6].all() and not touched[6:].any()


def test_climbers_leave_a_strict_minimum_only_within_accept_worse():
  # Every move from c0 is worse (by 0.1%, and more the farther it goes), by less than 1%: a
  # climb that never accepts worse stays at c0; one accepting 1% worse walks away, never above
  # the threshold of the value it stood on.
  from regal_datasets import synthetic
  graph = synthetic.generate(np.random.default_rng(3),
                             synthetic.SyntheticSpec(min_nodes=20, max_nodes=20))
  layout = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, 3)
  start = jax.random.uniform(jax.random.key(0), (2, layout.size))
  def fitness(chromosomes):
    distance = jnp.sum((chromosomes - start[:1]) ** 2, axis=-1)
    return 1.0 + 1e-3 * (distance > 0) + 1e-4 * distance
  values = fitness(start[:1].repeat(2, 0))
  table = local_moves.move_table(graph)
  for accept_worse, steps in ((0.0, 5), (0.01, 1), (0.01, 5)):
    out, out_values = local_moves.climb(fitness, jax.random.key(1), start[:1].repeat(2, 0),
                                        values, table, local_moves.Climb(
                                            layout, 8, 0.3, 0.5, accept_worse=accept_worse),
                                        steps)
    np.testing.assert_array_equal(fitness(out), out_values)
    moved = np.any(np.asarray(out) != np.asarray(start[:1]), axis=1)
    if accept_worse == 0:
      assert not moved.any() and np.all(np.asarray(out_values) == 1.0)
    else:
      assert moved.all() and np.all(np.asarray(out_values) > 1.0)
      if steps == 1:
        assert np.all(np.asarray(out_values) <= 1.0 + accept_worse)

# ----- the list-scheduling decoder --------------------------------------------------------
def _is_topological(graph, order) -> bool:
  position = np.empty(graph.num_ops, np.int64)
  position[np.asarray(order)] = np.arange(graph.num_ops)
  return bool(np.all(position[graph.edge_src] < position[graph.edge_dst]))


@settings(max_examples=40, deadline=None)
@given(dags(max_ops=12, max_outputs=2), device_sets, st.integers(0, 2**31),
       st.sampled_from([0.0, 0.5, 3.0]))
def test_list_decoder_matches_its_reference_and_yields_valid_schedules(graph, devices, seed,
                                                                       bias):
  layout = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, devices.num_devices)
  native = native_delay.build_native_delay_graph(graph, devices)
  rng = np.random.default_rng(seed)
  chromosomes = rng.random((5, layout.size)).astype(np.float32)
  chromosomes[:2, layout.priority_slice] = np.floor(
      chromosomes[:2, layout.priority_slice] * 3) / 3  # Ties: broken by op id.
  keys = chromosomes[2:4, layout.affinity_slice]
  chromosomes[2:4, layout.affinity_slice] = np.where(keys > 0.7, 1.0, keys)  # Placed outright.
  fast = list_decoder.decode(native, chromosomes, layout, bias)
  for k, chromosome in enumerate(chromosomes):
    slow = list_decoder.decode_reference(native, chromosome, layout, bias)
    np.testing.assert_array_equal(fast.placement[k], slow.placement)
    np.testing.assert_array_equal(fast.op_priority[k], slow.op_priority)
    np.testing.assert_array_equal(fast.transfer_priority[k], slow.transfer_priority)
    order = chromosome_lib.priority_order(slow.op_priority)
    assert _is_topological(graph, order)
    assert slow.placement.min() >= 0 and slow.placement.max() < devices.num_devices
    # The decoded priorities run the ops in the decoder's order, so the delay model
    # reproduces the schedule it planned: no op can finish later than planned.
    schedule = delay_reference.simulate_delay(graph, devices, slow.placement, slow.op_priority,
                                              dtype=np.float32)
    assert np.isfinite(schedule.makespan)


def test_list_decoder_bias_zero_is_earliest_finish_time():
  """Two independent unit ops on two devices: EFT puts them on different devices whatever
  the keys say; a large bias follows the device keys (both on device 0)."""
  from regal_datasets.graph import Graph
  graph = Graph(op_names=["a", "b"], op_types=["", ""], compute_cost=[1.0, 1.0],
                extra_memory=[0.0, 0.0], tensor_producer=[], tensor_size=[],
                data_edge_tensor=[], data_edge_consumer=[], control_edge_src=[],
                control_edge_dst=[])
  devices = devices_lib.homogeneous(2)
  layout = chromosome_lib.Layout(2, 0, 2)
  native = native_delay.build_native_delay_graph(graph, devices)
  chromosome = chromosome_lib.encode(np.array([0, 0]), np.array([0, 1]), layout)[None]
  chromosome[0, layout.affinity_slice] = [0.9, 0.1, 0.8, 0.2]  # Both prefer device 0.
  eft = list_decoder.decode(native, chromosome.astype(np.float32), layout, 0.0)
  assert sorted(eft.placement[0].tolist()) == [0, 1]
  keyed = list_decoder.decode(native, chromosome.astype(np.float32), layout, 10.0)
  assert keyed.placement[0].tolist() == [0, 0]


@settings(max_examples=20, deadline=None)
@given(dags(max_ops=10, max_outputs=2), device_sets, st.integers(0, 2**31))
def test_list_decoder_keeps_an_encoded_seeds_placement(graph, devices, seed):
  """Keys of exactly 1 (what `encode` writes for a seed's device) place an op outright, so a
  seed keeps its placement; the order is the decoder's list order, a topological order."""
  layout = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, devices.num_devices)
  rng = np.random.default_rng(seed)
  placement = rng.integers(0, devices.num_devices, graph.num_ops)
  chromosome = chromosome_lib.encode(placement, graph.topological_order, layout)
  native = native_delay.build_native_delay_graph(graph, devices)
  decoded = list_decoder.decode(native, chromosome[None].astype(np.float32), layout, 0.0)
  np.testing.assert_array_equal(decoded.placement[0], placement)
  np.testing.assert_array_equal(
      chromosome_lib.priority_order(decoded.op_priority[0]), graph.topological_order)


# ----- the search with its settings -------------------------------------------------------
def _doppler_like_problem(model="delay", devices=3, ops=24):
  from regal_datasets import synthetic
  graph = synthetic.generate(np.random.default_rng(7),
                             synthetic.SyntheticSpec(min_nodes=ops, max_nodes=ops))
  return performance.Problem(graph, devices_lib.homogeneous(devices), model=model)


@pytest.mark.parametrize("model, decoder", [("delay", "list"), ("wc", "direct"),
                                            ("wc", "consumer"), ("sync", "list")])
def test_memetic_search_is_reproducible_and_its_answer_rescores(model, decoder):
  problem = _doppler_like_problem(model, ops=12 if model == "sync" else 24)  # sync: JAX, slow.
  settings = search.SearchSettings(decoder=decoder, memetic=search.Memetic(
      climbers=2, steps=3, batch=8))
  evals = 600 if model == "sync" else 1500
  first = search.optimize(settings.evaluator(problem), evals, seed=4, settings=settings)
  assert first.evaluations <= evals
  if model != "sync":  # The JAX sync model compiles for ~12 s: one run checks its path.
    again = search.optimize(settings.evaluator(problem), evals, seed=4, settings=settings)
    assert first.objective == again.objective and first.evaluations == again.evaluations
    np.testing.assert_array_equal(first.best_chromosome, again.best_chromosome)
  # The answer is a direct-decoder chromosome of the same assignment, whatever the decoder.
  decoded = chromosome_lib.decode(np.asarray(first.best_chromosome, np.float32),
                                  problem.layout)
  np.testing.assert_array_equal(decoded.placement, first.placement)
  np.testing.assert_array_equal(chromosome_lib.priority_order(decoded.op_priority),
                                first.order)
  reference, _ = performance.score_reference(problem, first.best_chromosome)
  assert reference == pytest.approx(first.objective, rel=1e-5)


def test_list_decoder_fitness_equals_decode_then_score():
  problem = _doppler_like_problem("delay")
  chromosomes = np.random.default_rng(0).random((6, problem.layout.size)).astype(np.float32)
  fitness = performance.make_fitness_fn(problem, "list", 0.5)
  decoded = performance.host_decoder(problem, "list", 0.5)(chromosomes)
  expected = [delay_reference.simulate_delay(problem.graph, problem.devices, decoded.placement[k],
                                             decoded.op_priority[k], dtype=np.float32).makespan
              for k in range(6)]
  np.testing.assert_array_equal(np.asarray(fitness(jnp.asarray(chromosomes))), expected)


def test_time_limit_stops_at_a_generation_boundary():
  problem = _doppler_like_problem("wc")
  settings = search.SearchSettings()
  unlimited = search.optimize(settings.evaluator(problem), 30_000, seed=1, settings=settings)
  limited = search.optimize(settings.evaluator(problem), 30_000, seed=1, settings=settings,
                            control=search.Control(time_limit=1e-9))
  assert not unlimited.stopped_early and unlimited.evaluations > 29_000
  assert limited.stopped_early and limited.evaluations < unlimited.evaluations
  assert len(limited.history) == 1  # Stopped before the first generation.
  assert limited.objective <= min(limited.seed_objectives.values())


def test_default_budget_is_sized_from_the_graph():
  """What the default budget promises (not how it is computed): whole thousands within
  5,000..600,000; small graphs get a fixed number of evaluations per op and device (1,000 for
  the WC runtime search, which restarts from its seeds, else 500), so the budget grows with
  the graph; beyond that it stays within what ~8 s of native scoring buys on the project's
  CPU (an evaluation costs ~0.02 us per op-device and per 2.5 edges), so larger graphs get
  fewer; the JAX engines, ~40x slower on a CPU, get a 40th (never below the floor)."""
  from regal_datasets.synthetic import sized_graph
  seconds_per_unit = 0.02e-6

  def budget(size, devices, **kwargs):
    problem = performance.Problem(sized_graph(size), devices_lib.homogeneous(devices), **kwargs)
    graph = problem.graph
    units = graph.num_ops * devices + 0.4 * len(graph.edge_src)
    return search.default_evals(problem), units, graph.num_ops

  for model, per_op in (("wc", 1000), ("delay", 500)):
    for size, devices in [(3, 1), (12, 2), (24, 2), (48, 2), (100, 2), (200, 4), (400, 8),
                          (800, 8), (2000, 8), (400, 64)]:
      evals, units, ops = budget(size, devices, model=model)
      assert evals % 1000 == 0
      assert search.MIN_DEFAULT_EVALS <= evals <= brkga_search.MAX_DEFAULT_EVALS
      assert evals <= max(per_op * ops * devices + 999, search.MIN_DEFAULT_EVALS)
      if evals > search.MIN_DEFAULT_EVALS:  # The floor may take longer on huge graphs.
        assert evals * units * seconds_per_unit <= 8.5
      if evals < per_op * ops * devices - 999 and evals > search.MIN_DEFAULT_EVALS:
        assert evals * units * seconds_per_unit >= 7.0  # Time-bound: it uses its ~8 s.
    assert budget(3, 1, model=model)[0] == search.MIN_DEFAULT_EVALS
    ops24 = budget(24, 2)[2]
    assert budget(24, 2, model=model)[0] == 1000 * int(np.ceil(per_op * ops24 * 2 / 1000))
  assert budget(2000, 8)[0] < budget(400, 8)[0]
  native = budget(400, 8)[0]
  jax_engine = budget(400, 8, engine="jax")[0]
  assert (abs(jax_engine - native / brkga_search.JAX_SLOWDOWN) < 1000
          or jax_engine == search.MIN_DEFAULT_EVALS) and jax_engine < native


def test_only_a_default_budget_run_is_bounded_by_the_default_search_seconds(monkeypatch):
  """Without `evals` the run stops after `DEFAULT_SEARCH_SECONDS` of search (here ~0: it stops
  before its first generation); a budget the user gives, or a time limit, is theirs alone."""
  from regal_datasets.synthetic import sized_graph
  from regal.app import methods, optimize_lib
  monkeypatch.setattr(brkga_search, "DEFAULT_SEARCH_SECONDS", 1e-9)
  graph, devices = sized_graph(12, seed=2), devices_lib.homogeneous(2)
  run = lambda **config: optimize_lib.run(graph, devices, methods.RunConfig(
      model="wc", brkga=methods.BrkgaOptions(arms=("single_device",)), **config)).result
  default = run()
  budget = search.default_evals(performance.Problem(graph, devices, model="wc"))
  assert default.settings["brkga"]["time_limit"] == 1e-9
  assert default.settings["brkga"]["stopped_early"] and default.evaluations < budget
  for given in ({"evals": budget}, {"time_limit": 600.0}):
    d = run(**given)
    assert d.settings["brkga"]["time_limit"] == given.get("time_limit")
    assert not d.settings["brkga"]["stopped_early"]
    assert budget - 200 < d.evaluations <= budget  # Whole generations of at most 200.


# ----- cost-weighted op draws ----------------------------------------------------------------
def _cost_draw_reference(cost: list[float], u: float) -> int:
  """The op a draw `u` in [0, 1) takes in proportion to compute cost, slowly: the first op
  whose running share of the total cost exceeds u (ops alike where nothing computes)."""
  total = sum(cost)
  weights = cost if total > 0 else [1.0] * len(cost)
  running = 0.0
  for op, weight in enumerate(weights):
    running += weight / sum(weights)
    if u < running:
      return op
  return len(cost) - 1


@settings(max_examples=20, deadline=None)
@given(dags(max_ops=10), st.integers(0, 2**31))
def test_cost_draws_follow_the_cumulated_compute_cost(graph, seed):
  # Draws away from a share's boundary (float32 against float64 there) take the reference's
  # op; no draw takes a padded op, nor one that computes nothing while another computes.
  padded_ops = graph.num_ops + 3
  table = local_moves.move_table(graph, padded_ops)
  cost = np.asarray(graph.compute_cost, np.float64).tolist()
  u = np.random.default_rng(seed).random(512).astype(np.float32)
  drawn = np.asarray(local_moves.cost_drawn_op(jnp.asarray(u), table))
  assert drawn.max() < graph.num_ops
  if sum(cost) > 0:
    assert all(cost[v] > 0 for v in drawn)
  bounds = np.cumsum(cost) / sum(cost) if sum(cost) > 0 else (
      np.arange(1, graph.num_ops + 1) / graph.num_ops)
  clear = np.min(np.abs(u[:, None] - bounds[None]), axis=1) > 1e-5
  expected = [_cost_draw_reference(cost, float(x)) for x in u[clear]]
  np.testing.assert_array_equal(drawn[clear], expected)


def test_cost_bias_mixes_cost_and_uniform_draws_from_one_number():
  # 0: the uniform draw, bit for bit (the default search unchanged); 1: the cost draw; in
  # between, each op's share of a fine grid of draws is the mixture of the two.
  from regal_datasets import synthetic
  graph = synthetic.generate(np.random.default_rng(5),
                             synthetic.SyntheticSpec(min_nodes=15, max_nodes=15))
  table = local_moves.move_table(graph, graph.num_ops + 2)
  grid = jnp.asarray((np.arange(20_000) + 0.5) / 20_000, jnp.float32)
  uniform = np.asarray(local_moves._drawn_index(grid, table.num_ops))
  np.testing.assert_array_equal(local_moves.drawn_op(grid, table, 0.0), uniform)
  np.testing.assert_array_equal(local_moves.drawn_op(grid, table, 1.0),
                                local_moves.cost_drawn_op(grid, table))
  cost = np.asarray(graph.compute_cost, np.float64)
  for bias in (0.3, 0.7):
    share = np.bincount(np.asarray(local_moves.drawn_op(grid, table, bias)),
                        minlength=graph.num_ops) / grid.shape[0]
    expected = bias * cost / cost.sum() + (1 - bias) / graph.num_ops
    np.testing.assert_allclose(share, expected, atol=2e-3)


def test_a_cost_biased_climb_moves_only_ops_that_compute():
  # Device moves only (no clusters, exchanges or swaps): with cost_bias 1 every proposal
  # moves an op that computes; uniform draws also move the ones that do not.
  from regal_datasets import synthetic
  graph = synthetic.generate(np.random.default_rng(4),
                             synthetic.SyntheticSpec(min_nodes=20, max_nodes=20))
  cost = np.array(graph.compute_cost)
  cost[::2] = 0.0  # Half the ops compute nothing.
  graph = graph.replace(compute_cost=cost)
  layout = chromosome_lib.Layout(graph.num_ops, graph.num_tensors, 3)
  table = local_moves.move_table(graph)
  rng = np.random.default_rng(0)
  chromosome = jnp.asarray(rng.random(layout.size), jnp.float32)
  uniform = jnp.asarray(rng.random((local_moves.PROPOSAL_DRAWS, 256)), jnp.float32)
  before = chromosome_lib.decode(chromosome, layout).placement
  for bias, only_computing in ((1.0, True), (0.0, False)):
    proposals = local_moves.propose(uniform, chromosome, table, local_moves.Climb(
        layout, uniform.shape[1], 0.0, 0.5, cost_bias=bias))
    placements = np.asarray(jax.vmap(lambda c: chromosome_lib.decode(c, layout).placement)(
        proposals))
    moved = np.nonzero(placements != np.asarray(before)[None])[1]
    assert len(moved) == 256
    assert np.all(cost[moved] > 0) == only_computing
