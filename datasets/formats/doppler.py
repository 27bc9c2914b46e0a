"""The Doppler repository's `compute_graph` text format (xinyuyao/Doppler).

Line 1: the count N. Line 2: comma-separated "input" ids, which the Doppler reader only counts:
it simulates N minus that many nodes, ids 0..N-len(inputs)-1. Lines 3 and 4: edge sources and
targets (edge k is source[k] -> target[k]; repeated pairs are separate edges). Then one line
per simulated node, `compute_cost,communication_cost`, optionally followed by an op-type word.
Doppler charges an edge between devices its producer's communication cost, so each node becomes
an op with one output tensor whose size is that cost, read by one data edge per file edge.

Ids stay as in the file (op i is node i, named "i"), the input-id list is kept in metadata, and
`write` reproduces the same graph, so placements can be written back in the file's order.
"""
from __future__ import annotations

import re

import numpy as np

from regal_datasets import errors
from regal_datasets.graph import Graph

_NODE_LINE = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*(?:[,\s]\s*([A-Za-z_]+))?\s*,?\s*$")
FORMAT_NAME = "doppler"


def _id_list(line: str, line_number: int, source: str) -> list[int]:
  ids = []
  for token in line.split(","):
    token = token.strip()
    if not token:
      continue
    if not token.isdigit():
      raise errors.FormatError(f"{source}:{line_number}: expected comma-separated node ids, "
                               f"found {token!r}")
    ids.append(int(token))
  return ids


def parse(text: str, source: str = "<doppler>", name: str | None = None) -> Graph:
  lines = text.splitlines()
  if len(lines) < 4:
    raise errors.FormatError(f"{source}: a Doppler compute_graph file needs at least 4 lines "
                             f"(count, inputs, edge sources, edge targets), found {len(lines)}")
  if not lines[0].strip().isdigit():
    raise errors.FormatError(f"{source}:1: expected the node count, found {lines[0].strip()!r}")
  total = int(lines[0])
  input_ids = _id_list(lines[1], 2, source)
  sources = _id_list(lines[2], 3, source)
  targets = _id_list(lines[3], 4, source)
  num_nodes = total - len(input_ids)
  if num_nodes < 1:
    raise errors.EmptyGraphError(f"{source}: count {total} minus {len(input_ids)} input ids "
                                 f"leaves no node to simulate")
  if len(sources) != len(targets):
    raise errors.FormatError(f"{source}: {len(sources)} edge sources but {len(targets)} "
                             f"edge targets")
  node_lines = lines[4:4 + num_nodes]
  if len(node_lines) < num_nodes:
    raise errors.FormatError(f"{source}: expects {num_nodes} node lines after line 4, found "
                             f"{len(node_lines)}")
  extra = [line for line in lines[4 + num_nodes:] if line.strip()]
  if extra:
    raise errors.FormatError(f"{source}:{5 + num_nodes}: unexpected text after the "
                             f"{num_nodes} node lines: {extra[0].strip()[:40]!r}")
  compute, communication, op_types = [], [], []
  for i, line in enumerate(node_lines):
    match = _NODE_LINE.match(line)
    if not match:
      raise errors.FormatError(f"{source}:{5 + i}: expected 'compute_cost,communication_cost"
                               f"[ op_type]' with non-negative integers, found {line.strip()!r}")
    compute.append(int(match.group(1)))
    communication.append(int(match.group(2)))
    op_types.append(match.group(3) or "")
  for k, (u, v) in enumerate(zip(sources, targets)):
    if u >= num_nodes or v >= num_nodes:
      raise errors.UnknownNodeError(f"{source}: edge {k} ({u} -> {v}) names node "
                                    f"{max(u, v)}, but the file defines nodes 0..{num_nodes - 1}")
  graph_name = name or re.sub(r"\.txt$", "", source.rsplit("/", 1)[-1])
  try:
    return Graph(op_names=[str(i) for i in range(num_nodes)], op_types=op_types,
                 compute_cost=compute, extra_memory=np.zeros(num_nodes),
                 tensor_producer=np.arange(num_nodes), tensor_size=communication,
                 data_edge_tensor=sources, data_edge_consumer=targets, control_edge_src=[],
                 control_edge_dst=[], name=graph_name,
                 metadata={"source_format": FORMAT_NAME, "doppler_input_ids": input_ids})
  except errors.GraphError as error:
    raise type(error)(f"{source}: {error}") from None


def _integers(values: np.ndarray, what: str, graph: Graph) -> list[int]:
  if not np.array_equal(values, np.round(values)):
    raise errors.FormatError(f"cannot write {graph.name!r} as Doppler text: {what} must be "
                             f"integers (the format's reader takes digits only)")
  return [int(v) for v in values]


def write_text(graph: Graph) -> str:
  """The graph in Doppler's format; needs exactly one output tensor per op, no control edges."""
  if graph.num_control_edges:
    raise errors.FormatError(f"cannot write {graph.name!r} as Doppler text: it has "
                             f"{graph.num_control_edges} control edges, which that format "
                             f"cannot express")
  if not np.array_equal(graph.tensor_producer, np.arange(graph.num_ops)):
    raise errors.FormatError(f"cannot write {graph.name!r} as Doppler text: the format needs "
                             f"exactly one output tensor per op, listed in op order")
  if graph.extra_memory.any():
    raise errors.FormatError(f"cannot write {graph.name!r} as Doppler text: the format has no "
                             f"field for extra memory")
  bad_type = next((t for t in graph.op_types if t and not re.fullmatch(r"[A-Za-z_]+", t)), None)
  if bad_type is not None:
    raise errors.FormatError(f"cannot write {graph.name!r} as Doppler text: op type "
                             f"{bad_type!r} is not a single word of letters and '_'")
  compute = _integers(graph.compute_cost, "compute costs", graph)
  communication = _integers(graph.tensor_size, "tensor sizes", graph)
  input_ids = [int(i) for i in graph.metadata.get("doppler_input_ids", [])]
  sources = graph.tensor_producer[graph.data_edge_tensor]

  def id_line(ids) -> str:
    return "".join(f"{int(i)}, " for i in ids)

  lines = [str(graph.num_ops + len(input_ids)), id_line(input_ids), id_line(sources),
           id_line(graph.data_edge_consumer)]
  lines += [f"{c},{m}" + (f" {t}" if t else "")
            for c, m, t in zip(compute, communication, graph.op_types)]
  return "\n".join(lines) + "\n"
