"""Chromosome layout, decoding and its inverse."""
import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from regal_datasets import errors
from regal.scoring import chromosome as ch


def test_layout_slices():
  layout = ch.Layout(num_ops=3, num_tensors=2, num_devices=4)
  assert layout.size == 3 * 4 + 3 + 2 * 4
  assert layout.priority_slice == slice(12, 15) and layout.transfer_slice == slice(15, 23)


def test_decode_argmax_and_ties():
  layout = ch.Layout(num_ops=3, num_tensors=1, num_devices=2)
  genes = np.array([0.2, 0.9,   # op 0 -> device 1
                    0.5, 0.5,   # op 1: tie -> device 0
                    0.1, 0.7,   # op 2 -> device 1
                    0.3, 0.8, 0.1,  # priorities
                    0.25, 0.75], np.float32)
  decoded = ch.decode(genes, layout)
  assert decoded.placement.tolist() == [1, 0, 1]
  assert np.allclose(decoded.op_priority, [0.3, 0.8, 0.1])
  assert np.allclose(decoded.transfer_priority, [[0.25, 0.75]])
  assert ch.priority_order(np.asarray(decoded.op_priority)).tolist() == [1, 0, 2]
  assert ch.priority_order(np.array([0.5, 0.7, 0.5])).tolist() == [1, 0, 2]


@given(st.integers(1, 20), st.integers(0, 10), st.integers(1, 5), st.data())
def test_encode_then_decode_gives_back_placement_and_order(ops, tensors, devices, data):
  placement = np.array(data.draw(st.lists(st.integers(0, devices - 1), min_size=ops,
                                          max_size=ops)))
  order = np.array(data.draw(st.permutations(range(ops))))
  layout = ch.Layout(ops, tensors, devices)
  genes = ch.encode(placement, order, layout)
  assert genes.shape == (layout.size,) and genes.min() >= 0 and genes.max() <= 1
  decoded = ch.decode(genes.astype(np.float32), layout)
  assert np.asarray(decoded.placement).tolist() == placement.tolist()
  assert ch.priority_order(np.asarray(decoded.op_priority)).tolist() == order.tolist()


def test_decode_vmaps_over_a_population():
  layout = ch.Layout(5, 3, 2)
  population = np.random.default_rng(0).random((7, layout.size)).astype(np.float32)
  decoded = jax.vmap(lambda c: ch.decode(c, layout))(population)
  assert decoded.placement.shape == (7, 5) and decoded.transfer_priority.shape == (7, 3, 2)
  assert np.asarray(decoded.placement[3]).tolist() == np.asarray(
      ch.decode(population[3], layout).placement).tolist()


def test_encode_rejects_bad_input():
  layout = ch.Layout(3, 0, 2)
  with pytest.raises(errors.ConfigError, match="outside 0..1"):
    ch.encode([0, 2, 1], [0, 1, 2], layout)
  with pytest.raises(errors.ConfigError, match="every op exactly once"):
    ch.encode([0, 1, 1], [0, 0, 2], layout)
  with pytest.raises(errors.ConfigError, match="need 3 entries"):
    ch.encode([0, 1], [0, 1], layout)


@pytest.mark.parametrize("bucket_tensors", [7, 0])
def test_a_bucket_round_trip_keeps_every_gene_it_carries(bucket_tensors):
  """Padded genes take the fill and are dropped on the way back; a bucket without transfer
  genes (a model that reads none) gives them back as UNSET_TRANSFER."""
  own, bucket = ch.Layout(3, 4, 2), ch.Layout(5, bucket_tensors, 2)
  genes = np.random.default_rng(0).random(own.size).astype(np.float32)
  padded = ch.to_bucket(own, bucket, genes, fill=0.25)
  assert padded.shape == (bucket.size,)
  assert np.all(padded[bucket.affinity_slice].reshape(5, 2)[3:] == 0.25)
  back = ch.from_bucket(own, bucket, padded)
  assert back.shape == (own.size,)
  assert np.array_equal(back[:own.transfer_slice.start], genes[:own.transfer_slice.start])
  expected = genes[own.transfer_slice] if bucket_tensors else np.full(8, ch.UNSET_TRANSFER)
  assert np.array_equal(back[own.transfer_slice], expected)
