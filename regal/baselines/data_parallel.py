"""Data parallelism, the baseline every ML engineer knows (issue 70): every op of an imported
graph split on its batch dimension, shard s on device s (`regal.parallelism.shard_imported`), and the
assignment that puts a sharded graph's blocks where their shard index says (the seed BRKGA
starts from on any sharded graph).

`aligned_assignment` places shard s of every op on device s mod D; an op left whole, and a
reduce op, on the device that already holds most of its input bytes (device 0 when it reads
nothing placed yet), a source with the first op that reads it. The order is a list
schedule's: ready ops by largest bottom level first (mean compute and transfer times), so it
is topological.
"""
from __future__ import annotations

import time

import numpy as np

from regal_datasets import analysis, errors
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.baselines.common import MethodResult, finish
from regal.scoring import performance
from regal.scoring.delay import reference as delay_reference


def is_sharded(graph: Graph) -> bool:
  return isinstance(graph.metadata.get("shard_of"), list)


def priority_order(graph: Graph, devices: DeviceSpec) -> np.ndarray:
  """A topological order taking, among ready ops, the largest bottom level first."""
  level = analysis.mean_bottom_levels(graph, devices)
  return np.asarray(delay_reference.priority_topological_order(graph, level), np.int64)


def aligned_assignment(graph: Graph, devices: DeviceSpec) -> tuple[np.ndarray, np.ndarray]:
  """(placement, order) of a sharded graph by shard index (the module doc)."""
  if not is_sharded(graph):
    raise errors.ConfigError(f"graph {graph.name!r} is not sharded: only a graph split by "
                             f"regal.parallelism.shard_imported (--shard) has shards to align")
  num = devices.num_devices
  shard_of = graph.metadata["shard_of"]
  placement = np.full(graph.num_ops, -1, np.int64)
  held = np.zeros((graph.num_ops, num))  # Input bytes of each op on each device so far.
  consumers: list[list[int]] = [[] for _ in range(graph.num_ops)]
  producer_of = graph.tensor_producer
  for tensor, consumer in zip(graph.data_edge_tensor.tolist(),
                              graph.data_edge_consumer.tolist()):
    consumers[int(producer_of[tensor])].append((consumer, float(graph.tensor_size[tensor])))
  order = graph.topological_order
  for op in order.tolist():
    _, shard, role, _ = shard_of[op]
    if shard >= 0:
      placement[op] = shard % num
    elif held[op].any():
      placement[op] = int(np.argmax(held[op]))
    elif role in ("input",):
      continue  # With its first reader (below).
    else:
      placement[op] = 0
    for consumer, size in consumers[op]:
      held[consumer, placement[op]] += size
  for op in order[::-1].tolist():  # Sources: with their first reader.
    if placement[op] < 0:
      readers = [placement[c] for c, _ in consumers[op] if placement[c] >= 0]
      placement[op] = readers[0] if readers else 0
  return placement, priority_order(graph, devices)


def data_parallel(problem: performance.Problem) -> MethodResult:
  """The aligned assignment of a batch-split graph (`regal.app.sharding` splits it)."""
  started = time.perf_counter()
  placement, order = aligned_assignment(problem.graph, problem.devices)
  return finish("data_parallel", problem, placement, order, started)
