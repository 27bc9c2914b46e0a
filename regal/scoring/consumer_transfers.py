"""The consumer decoder: transfer priorities read off the op priorities.

The direct decoder (`regal.scoring.chromosome.decode`) gives every (tensor, destination) pair a
transfer key of its own: t x d genes, about half of a WC chromosome, whose only effect is the
order in which the transfers waiting on one channel are sent. The consumer decoder reads the
placement and the op priorities as the direct decoder does, and gives the transfer of tensor t
to device j the largest priority among t's readers placed on j: a channel first sends what the
earliest-running op at its destination needs, so a chromosome's schedule follows from its op
order alone, and the search and its local moves spend no evaluation on transfer keys (a move
of an op's priority reorders the sends that feed it too). Where nothing on j reads t the value
is 0; a model never reads it (no transfer goes there).

`transfer_priorities_reference` is the readable version; `transfer_priorities` (numba, the same
float32 values) is what searches call. The chromosome layout is the direct decoder's, so seeds,
policies and local moves work on it unchanged; the bucketed search evolves it without its
transfer genes (`performance.bucket_layout`: a WC chromosome about half the size, the same
search in distribution, since no move or draw reads one gene for another), and its answer is
re-encoded with these transfer priorities (`brkga_search`), so the direct decoder reads it back
to the same schedule.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from regal_datasets.graph import Graph
from regal.scoring import chromosome as chromosome_lib


class Readers(NamedTuple):
  """The graph's data edges: tensor [E] read by op reader [E] (int32)."""
  tensor: np.ndarray
  reader: np.ndarray
  num_tensors: int


def readers(graph: Graph) -> Readers:
  return Readers(np.asarray(graph.data_edge_tensor, np.int32),
                 np.asarray(graph.data_edge_consumer, np.int32), int(graph.num_tensors))


def transfer_priorities_reference(graph: Graph, placement: np.ndarray, op_priority: np.ndarray,
                                  num_devices: int) -> np.ndarray:
  """[t, d] float32 for one chromosome: the largest priority of t's readers on device d (0
  where none)."""
  result = np.zeros((graph.num_tensors, num_devices), np.float32)
  for tensor, reader in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()):
    device = int(placement[reader])
    result[tensor, device] = max(result[tensor, device], np.float32(op_priority[reader]))
  return result


@numba.njit(nogil=True, cache=True)
def _transfer_priorities(tensor, reader, placement, op_priority, out):
  for p in range(placement.shape[0]):
    out[p] = np.float32(0.0)
    for e in range(tensor.shape[0]):
      t, op = tensor[e], reader[e]
      d = placement[p, op]
      if op_priority[p, op] > out[p, t, d]:
        out[p, t, d] = op_priority[p, op]


def transfer_priorities(edges: Readers, placement: np.ndarray, op_priority: np.ndarray,
                        num_devices: int) -> np.ndarray:
  """[P, t, d] float32 for a population: placement [P, o], op priorities [P, o]."""
  placement = np.ascontiguousarray(placement, np.int32)
  op_priority = np.ascontiguousarray(op_priority, np.float32)
  out = np.empty((placement.shape[0], edges.num_tensors, num_devices), np.float32)
  _transfer_priorities(edges.tensor, edges.reader, placement, op_priority, out)
  return out


def decoder(graph: Graph, layout: chromosome_lib.Layout):
  """A host function: chromosomes [P, layout.size] -> `chromosome.Decoded` (numpy), the direct
  decoder's placement and op priorities with transfer priorities read off them."""
  edges = readers(graph)

  def decode(chromosomes: np.ndarray) -> chromosome_lib.Decoded:
    direct = chromosome_lib.decode(np.asarray(chromosomes, np.float32), layout)
    placement = np.asarray(direct.placement)
    op_priority = np.asarray(direct.op_priority)
    return chromosome_lib.Decoded(placement, op_priority, transfer_priorities(
        edges, placement, op_priority, layout.num_devices))

  return decode


@numba.njit(nogil=True, cache=True)
def _decode_bucket(chromosomes, num_ops, bucket_ops, num_devices, tensor, reader, placement,
                   op_priority, transfer):
  affinity_end = bucket_ops * num_devices
  for p in range(chromosomes.shape[0]):
    row = chromosomes[p]
    for op in range(num_ops):
      base = op * num_devices
      best, best_value = 0, row[base]
      for d in range(1, num_devices):
        if row[base + d] > best_value:  # The first maximum, as argmax.
          best, best_value = d, row[base + d]
      placement[p, op] = best
      op_priority[p, op] = row[affinity_end + op]
  _transfer_priorities(tensor, reader, placement, op_priority, transfer)


def bucket_decoder(graph: Graph, layout: chromosome_lib.Layout,
                   bucket: chromosome_lib.Layout):
  """`decoder` of chromosomes [P, bucket.size] in a padded layout (`chromosome.to_bucket`) in
  one compiled pass: what a bucketed search's host scorer calls, so no batch is copied back to
  the graph's layout first. The same arrays as `decoder(graph, layout)` of
  `chromosome.from_bucket_batch`."""
  edges = readers(graph)
  num_ops, num_devices = layout.num_ops, layout.num_devices

  def decode(chromosomes: np.ndarray) -> chromosome_lib.Decoded:
    chromosomes = np.ascontiguousarray(chromosomes, np.float32)
    if chromosomes.ndim != 2 or chromosomes.shape[1] != bucket.size:
      raise ValueError(f"chromosomes must be [P, {bucket.size}], got {chromosomes.shape}")
    population = chromosomes.shape[0]
    placement = np.empty((population, num_ops), np.int32)
    op_priority = np.empty((population, num_ops), np.float32)
    transfer = np.empty((population, edges.num_tensors, num_devices), np.float32)
    _decode_bucket(chromosomes, num_ops, bucket.num_ops, num_devices, edges.tensor,
                   edges.reader, placement, op_priority, transfer)
    return chromosome_lib.Decoded(placement, op_priority, transfer)

  return decode
