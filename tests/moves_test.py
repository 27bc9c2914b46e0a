"""The moves on a chromosome's genes (`regal.scoring.moves`), with numpy and with jnp, against
readable references on placements and priority ranks."""
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regal.scoring import chromosome as chromosome_lib
from regal.scoring import moves

LAYOUT = chromosome_lib.Layout(num_ops=5, num_tensors=2, num_devices=3)
ARRAYS = {"numpy": np.asarray, "jnp": jnp.asarray}


def _reference_device_move(chromosome, layout, op, device):
  placement = chromosome_lib.decode(chromosome, layout).placement.copy()
  placement[op] = device
  return placement


@pytest.mark.parametrize("kind", ARRAYS)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), op=st.integers(0, LAYOUT.num_ops - 1),
       device=st.integers(0, LAYOUT.num_devices - 1))
def test_device_move_moves_one_op_and_nothing_else(kind, seed, op, device):
  array = ARRAYS[kind]
  chromosome = np.random.default_rng(seed).random(LAYOUT.size).astype(np.float32)
  writes = moves.device_move_genes(array(chromosome), LAYOUT, array([op]), array([device]))
  moved = np.asarray(moves.apply_moves(array(chromosome), writes))[0]
  decoded = chromosome_lib.decode(moved, LAYOUT)
  np.testing.assert_array_equal(decoded.placement,
                                _reference_device_move(chromosome, LAYOUT, op, device))
  before = chromosome_lib.decode(chromosome, LAYOUT)
  np.testing.assert_array_equal(decoded.op_priority, before.op_priority)
  np.testing.assert_array_equal(decoded.transfer_priority, before.transfer_priority)
  assert sorted(moved) == sorted(chromosome)  # Keys trade places: still in [0, 1].


@pytest.mark.parametrize("kind", ARRAYS)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), position=st.integers(0, LAYOUT.num_ops - 2))
def test_priority_swap_exchanges_two_neighbours_in_the_order(kind, seed, position):
  array = ARRAYS[kind]
  chromosome = np.random.default_rng(seed).random(LAYOUT.size).astype(np.float32)
  order = chromosome_lib.priority_order(chromosome[LAYOUT.priority_slice])
  writes = moves.priority_swap_genes(array(chromosome), LAYOUT, array(order), array([position]))
  swapped = np.asarray(moves.apply_moves(array(chromosome), writes))[0]
  expected = order.copy()
  expected[[position, position + 1]] = expected[[position + 1, position]]
  np.testing.assert_array_equal(chromosome_lib.priority_order(
      swapped[LAYOUT.priority_slice]), expected)
  np.testing.assert_array_equal(chromosome_lib.decode(swapped, LAYOUT).placement,
                                chromosome_lib.decode(chromosome, LAYOUT).placement)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, LAYOUT.num_ops))
def test_priority_order_puts_padded_ops_last_with_numpy_and_jnp(seed, real):
  priority = np.random.default_rng(seed).random(LAYOUT.num_ops).astype(np.float32)
  priority[1] = priority[3]  # A tie: the lower id first.
  expected = [v for v in sorted(range(real), key=lambda v: (-priority[v], v))]
  expected += list(range(real, LAYOUT.num_ops))
  for array in ARRAYS.values():
    assert np.asarray(chromosome_lib.priority_order(array(priority), real)).tolist() == expected


def _reference_neighbours(placement, rank, move, num_devices):
  """What single-op move number `move` does to (placement, priority ranks): an op's device
  (the next ones cyclically), or two ops adjacent in the order trade ranks."""
  placement, rank = placement.copy(), rank.copy()
  num_ops = len(placement)
  if move < num_ops * (num_devices - 1):
    op, shift = divmod(move, num_devices - 1)
    placement[op] = (placement[op] + 1 + shift) % num_devices
  else:
    position = move - num_ops * (num_devices - 1)
    first = int(np.flatnonzero(rank == position)[0])
    second = int(np.flatnonzero(rank == position + 1)[0])
    rank[first], rank[second] = rank[second], rank[first]
  return placement, rank


@pytest.mark.parametrize("num_ops,num_devices", [(5, 3), (1, 2), (4, 1), (2, 2)])
def test_numbered_moves_are_every_single_op_move_once(num_ops, num_devices):
  layout = chromosome_lib.Layout(num_ops=num_ops, num_tensors=1, num_devices=num_devices)
  rng = np.random.default_rng(num_ops * 10 + num_devices)
  placement = rng.integers(0, num_devices, num_ops)
  order = rng.permutation(num_ops)
  rank = np.argsort(order)
  chromosome = chromosome_lib.encode(placement, order, layout).astype(np.float32)
  count = moves.single_op_moves(layout)
  assert count == num_ops * (num_devices - 1) + max(num_ops - 1, 0)
  numbered = np.arange(count)
  results = {}
  for kind, array in ARRAYS.items():
    results[kind] = np.asarray(moves.apply_moves(
        array(chromosome), moves.enumerated_move_genes(array(chromosome), layout,
                                                       array(numbered))))
  np.testing.assert_array_equal(results["numpy"], results["jnp"])
  seen = set()
  for move, neighbour in zip(numbered, results["numpy"]):
    got_placement, got_order = chromosome_lib.assignment(neighbour, layout)
    want_placement, want_rank = _reference_neighbours(placement, rank, int(move), num_devices)
    np.testing.assert_array_equal(got_placement, want_placement)
    np.testing.assert_array_equal(np.argsort(got_order), want_rank)
    seen.add((tuple(got_placement), tuple(got_order)))
  assert len(seen) == count  # Distinct numbers, distinct neighbours.


def test_cluster_moves_are_the_same_with_numpy_and_jnp():
  """What `memetic_test` checks against the slow cluster walks with numpy, jnp writes too:
  every op of a random chromosome to another device, clusters of every size and kind."""
  from regal_datasets import synthetic
  from regal.search import local_moves
  graph = synthetic.sized_graph(10, seed=4)
  layout = chromosome_lib.Layout(graph.num_ops + 2, graph.num_tensors, 3)
  clusters = np.asarray(local_moves.move_table(graph, layout.num_ops).cluster)
  rng = np.random.default_rng(7)
  chromosome = rng.random(layout.size).astype(np.float32)
  ops = np.tile(np.arange(graph.num_ops), 2 * (local_moves.CLUSTER_SIZE - 1))
  placement = chromosome_lib.decode(chromosome, layout).placement
  devices = (placement[ops] + 1 + rng.integers(0, 2, len(ops))) % 3
  sizes = np.repeat(np.arange(2, local_moves.CLUSTER_SIZE + 1), 2 * graph.num_ops)
  kinds = np.tile(np.repeat([0, 1], graph.num_ops), local_moves.CLUSTER_SIZE - 1)
  results = {}
  for kind, array in ARRAYS.items():
    writes = moves.cluster_move_genes(array(chromosome), layout, array(clusters), array(ops),
                                      array(devices), array(sizes), kind=array(kinds))
    results[kind] = np.asarray(moves.apply_moves(array(chromosome), writes))
  np.testing.assert_array_equal(results["numpy"], results["jnp"])
  assert (results["numpy"] != chromosome).any(axis=1).all()  # Every row moved something.
