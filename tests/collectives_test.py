"""regal.parallelism.collectives: NCCL's costs against a step-by-step ring and hand values."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regal.parallelism import collectives
from regal_datasets import errors


def ring_by_steps(kind, size, ranks, bandwidth, latency):
  """A ring run step by step: in each step every rank passes one chunk (a rank's share,
  size / ranks) to its neighbour, all at once; reduce-scatter and all-gather take ranks - 1
  steps, an all-reduce is one then the other."""
  phases = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}[kind]
  elapsed = 0.0
  for _ in range(phases):
    for _ in range(ranks - 1):
      elapsed += latency + (size / ranks) / bandwidth
  return elapsed


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]),
       size=st.floats(1.0, 1e11), ranks=st.integers(2, 64),
       bandwidth=st.floats(1e9, 1e12), latency=st.floats(0.0, 1e-4))
def test_the_ring_formula_is_the_ring_run_step_by_step(kind, size, ranks, bandwidth, latency):
  formula = collectives.seconds(kind, size, ranks, bandwidth, latency, algorithm="ring")
  assert formula == pytest.approx(ring_by_steps(kind, size, ranks, bandwidth, latency))


def test_a_gigabyte_all_reduce_on_a_dgx_h100_by_hand():
  fabric = collectives.FABRICS["h100"]
  # 8 GPUs in one node: NVLink at 450 GB/s x 0.8; ring: 14 steps of 3 us.
  expected = 2 * 7 / 8 * 1e9 / 360e9 + 14 * 3e-6
  assert collectives.on_fabric("all_reduce", 1e9, fabric, 8) == pytest.approx(expected)
  # 16 GPUs over two nodes: the NIC's 50 GB/s per GPU binds; 10 us steps.
  across = 2 * 15 / 16 * 1e9 / 40e9 + 30 * 10e-6
  assert collectives.on_fabric("all_reduce", 1e9, fabric, 16) == pytest.approx(across)
  # Two ranks 8 apart (the same local rank of two nodes) also cross the network.
  assert collectives.on_fabric("all_reduce", 1e9, fabric, 2, stride=8) == pytest.approx(
      1e9 / 40e9 + 2 * 10e-6)


def test_small_all_reduces_take_the_tree_large_ones_the_ring():
  bandwidth, latency = 360e9, 10e-6
  small = collectives.seconds("all_reduce", 1e3, 64, bandwidth, latency)
  assert small == collectives.seconds("all_reduce", 1e3, 64, bandwidth, latency, "tree")
  assert small < collectives.seconds("all_reduce", 1e3, 64, bandwidth, latency, "ring")
  large = collectives.seconds("all_reduce", 1e10, 64, bandwidth, latency)
  assert large == collectives.seconds("all_reduce", 1e10, 64, bandwidth, latency, "ring")


def test_reduce_scatter_then_all_gather_is_an_all_reduce():
  parts = sum(collectives.seconds(kind, 5e8, 8, 1e11, 5e-6)
              for kind in ("reduce_scatter", "all_gather"))
  assert parts == pytest.approx(collectives.seconds("all_reduce", 5e8, 8, 1e11, 5e-6, "ring"))


def test_one_rank_moves_nothing_and_bad_names_are_refused():
  assert collectives.seconds("all_reduce", 1e9, 1, 1e11, 1e-6) == 0.0
  with pytest.raises(errors.ConfigError, match="unknown collective 'allreduce'"):
    collectives.seconds("allreduce", 1e9, 8, 1e11, 1e-6)
  with pytest.raises(errors.ConfigError, match="unknown algorithm"):
    collectives.seconds("all_reduce", 1e9, 8, 1e11, 1e-6, "butterfly")
