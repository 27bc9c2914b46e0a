"""Size buckets for JAX's static shapes.

JAX compiles a function once per input shape. Rounding every padded array's size up to a bucket
(four buckets per doubling: 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ...) means graphs of similar
size share one compilation while wasting at most 25% of the work. The scorers
(`regal.scoring.sim_graph`), the Doppler policy's graph data and training pad with it.
"""
from __future__ import annotations

import math

MIN_BUCKET = 8


def bucket_size(count: int, minimum: int = MIN_BUCKET) -> int:
  """The smallest bucket >= count: m * 2**k with m in {4, 5, 6, 7}, at least `minimum`."""
  if count <= minimum:
    return minimum
  exponent = max(0, math.floor(math.log2(count)) - 2)
  for step in range(4, 16):
    if step * 2**exponent >= count:
      return step * 2**exponent
  raise AssertionError("unreachable: 16 * 2**exponent exceeds count")
