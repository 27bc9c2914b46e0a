"""Size buckets for JAX."""
from hypothesis import given
from hypothesis import strategies as st

from regal_datasets import padding


@given(st.integers(1, 100_000))
def test_bucket_is_the_smallest_fitting_size(count):
  size = padding.bucket_size(count)
  assert size >= count and size >= padding.MIN_BUCKET
  assert size <= max(padding.MIN_BUCKET, 1.25 * count + 1)
  # Four buckets per doubling: m * 2**k with m in 4..7.
  mantissa = size
  while mantissa >= 8:
    mantissa //= 2
  assert mantissa in (4, 5, 6, 7) or size == padding.MIN_BUCKET


def test_bucket_examples():
  assert [padding.bucket_size(n) for n in (1, 8, 9, 17, 100, 202, 1000)] == [
      8, 8, 10, 20, 112, 224, 1024]
