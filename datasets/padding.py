"""Fixed-shape arrays of a graph for JAX: sizes rounded up to buckets, padding masked out.

JAX compiles a function once per input shape. Padding every graph's arrays up to a bucket size
(four buckets per doubling: 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ...) means graphs of similar
size share one compilation while wasting at most 25% of the work.

Padding entries are masked (`*_mask` False), have zero cost and size, and point at op 0 and
tensor 0; consumers must ignore them through the masks. The topological order lists real ops
first, then padding ops in index order.
"""
from __future__ import annotations

import math
from typing import Sequence

import jax
import numpy as np
from flax import struct

from datasets.graph import Graph

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


@struct.dataclass
class PaddedGraph:
  """A graph's arrays padded to bucket sizes (a pytree; leading batch axis when stacked)."""
  op_mask: np.ndarray  # [N] bool
  compute_cost: np.ndarray  # [N]
  extra_memory: np.ndarray  # [N]
  topological_order: np.ndarray  # [N] int32
  tensor_mask: np.ndarray  # [T] bool
  tensor_producer: np.ndarray  # [T] int32
  tensor_size: np.ndarray  # [T]
  data_edge_mask: np.ndarray  # [E] bool
  data_edge_tensor: np.ndarray  # [E] int32
  data_edge_consumer: np.ndarray  # [E] int32
  edge_mask: np.ndarray  # [M] bool, op-level edges: data then control
  edge_src: np.ndarray  # [M] int32
  edge_dst: np.ndarray  # [M] int32
  edge_bytes: np.ndarray  # [M]
  edge_is_control: np.ndarray  # [M] bool
  num_ops: np.ndarray  # [] int32, the real counts
  num_tensors: np.ndarray
  num_data_edges: np.ndarray
  num_edges: np.ndarray

  @property
  def shape(self) -> tuple[int, int, int, int]:
    """(ops, tensors, data edges, edges) of the padded arrays."""
    return (self.op_mask.shape[-1], self.tensor_mask.shape[-1], self.data_edge_mask.shape[-1],
            self.edge_mask.shape[-1])


def bucket_shape(graphs: Sequence[Graph]) -> tuple[int, int, int, int]:
  """One padded shape that fits every graph in `graphs`."""
  return (bucket_size(max(g.num_ops for g in graphs)),
          bucket_size(max(max(g.num_tensors for g in graphs), 1)),
          bucket_size(max(max(g.num_data_edges for g in graphs), 1)),
          bucket_size(max(max(g.num_edges for g in graphs), 1)))


def _pad(values: np.ndarray, size: int, dtype) -> np.ndarray:
  if len(values) > size:
    raise ValueError(f"cannot pad {len(values)} entries into {size}")
  out = np.zeros(size, dtype)
  out[:len(values)] = values
  return out


def _mask(count: int, size: int) -> np.ndarray:
  return np.arange(size) < count


def pad_graph(graph: Graph, shape: tuple[int, int, int, int] | None = None,
              dtype=np.float32) -> PaddedGraph:
  """`graph`'s arrays padded to `shape` (its own bucket shape by default)."""
  num_ops, num_tensors, num_data, num_edges = shape or bucket_shape([graph])
  order = np.concatenate([graph.topological_order, np.arange(graph.num_ops, num_ops)])
  return PaddedGraph(
      op_mask=_mask(graph.num_ops, num_ops),
      compute_cost=_pad(graph.compute_cost, num_ops, dtype),
      extra_memory=_pad(graph.extra_memory, num_ops, dtype),
      topological_order=_pad(order, num_ops, np.int32),
      tensor_mask=_mask(graph.num_tensors, num_tensors),
      tensor_producer=_pad(graph.tensor_producer, num_tensors, np.int32),
      tensor_size=_pad(graph.tensor_size, num_tensors, dtype),
      data_edge_mask=_mask(graph.num_data_edges, num_data),
      data_edge_tensor=_pad(graph.data_edge_tensor, num_data, np.int32),
      data_edge_consumer=_pad(graph.data_edge_consumer, num_data, np.int32),
      edge_mask=_mask(graph.num_edges, num_edges),
      edge_src=_pad(graph.edge_src, num_edges, np.int32),
      edge_dst=_pad(graph.edge_dst, num_edges, np.int32),
      edge_bytes=_pad(graph.edge_bytes, num_edges, dtype),
      edge_is_control=_pad(graph.edge_is_control, num_edges, bool),
      num_ops=np.int32(graph.num_ops), num_tensors=np.int32(graph.num_tensors),
      num_data_edges=np.int32(graph.num_data_edges), num_edges=np.int32(graph.num_edges))


def pad_batch(graphs: Sequence[Graph], dtype=np.float32) -> PaddedGraph:
  """Graphs padded to one common bucket shape and stacked along a leading axis."""
  shape = bucket_shape(graphs)
  padded = [pad_graph(g, shape, dtype) for g in graphs]
  return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *padded)
