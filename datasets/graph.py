"""The computation-graph model every part of regal consumes.

A graph has ops, tensors and two kinds of edges:

* an **op** has a name, an op type, a compute cost and optional extra working memory;
* a **tensor** has exactly one producer op and a size in bytes; an op may produce several
  tensors (its output ports, in the order they are listed) or none;
* a **data edge** (tensor -> consumer op) means the consumer reads the tensor; a tensor may have
  many consumers and the same (tensor, consumer) pair may repeat (multigraph);
* a **control edge** (op -> op) only orders two ops and carries no bytes.

Ops, tensors and edges are identified by their index. Names are kept for people and for
writing results back in an input file's order. `Graph` validates itself on construction, so a
`Graph` object that exists is always a valid DAG with finite, non-negative costs.
"""
from __future__ import annotations

import dataclasses
import functools
import heapq
from typing import Any, Mapping

import numpy as np

from regal_datasets import errors

_FLOAT_FIELDS = ("compute_cost", "extra_memory", "tensor_size")
_INDEX_FIELDS = ("tensor_producer", "data_edge_tensor", "data_edge_consumer",
                 "control_edge_src", "control_edge_dst")


def _frozen_array(values: Any, dtype: Any) -> np.ndarray:
  array = np.array(values, dtype=dtype).reshape(-1)
  array.flags.writeable = False
  return array


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
  """An immutable, validated computation graph (host-side, numpy arrays).

  Attributes:
    op_names: unique name of each op.
    op_types: op type of each op ("" when unknown).
    compute_cost: [num_ops] time of each op on a device of speed 1.
    extra_memory: [num_ops] working memory an op needs while it runs, in bytes.
    tensor_producer: [num_tensors] index of the op producing each tensor.
    tensor_size: [num_tensors] bytes of each tensor.
    data_edge_tensor, data_edge_consumer: [num_data_edges] tensor read by which op.
    control_edge_src, control_edge_dst: [num_control_edges] ordering-only dependencies.
    name: the graph's name.
    metadata: JSON-compatible facts about where the graph came from (file format details,
      generator settings, meta-op groups) that importers and exporters need.
  """
  op_names: tuple[str, ...]
  op_types: tuple[str, ...]
  compute_cost: np.ndarray
  extra_memory: np.ndarray
  tensor_producer: np.ndarray
  tensor_size: np.ndarray
  data_edge_tensor: np.ndarray
  data_edge_consumer: np.ndarray
  control_edge_src: np.ndarray
  control_edge_dst: np.ndarray
  name: str = "graph"
  metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    set_field = functools.partial(object.__setattr__, self)
    set_field("op_names", tuple(str(n) for n in self.op_names))
    set_field("op_types", tuple(str(t) for t in self.op_types))
    for field in _FLOAT_FIELDS:
      set_field(field, _frozen_array(getattr(self, field), np.float64))
    for field in _INDEX_FIELDS:
      set_field(field, _frozen_array(getattr(self, field), np.int64))
    set_field("metadata", dict(self.metadata))
    validate(self)

  # ----- sizes -----------------------------------------------------------------------------
  @property
  def num_ops(self) -> int:
    return len(self.op_names)

  @property
  def num_tensors(self) -> int:
    return len(self.tensor_size)

  @property
  def num_data_edges(self) -> int:
    return len(self.data_edge_tensor)

  @property
  def num_control_edges(self) -> int:
    return len(self.control_edge_src)

  @property
  def num_edges(self) -> int:
    return self.num_data_edges + self.num_control_edges

  # ----- derived views ---------------------------------------------------------------------
  @functools.cached_property
  def tensor_port(self) -> np.ndarray:
    """[num_tensors] index of each tensor among its producer's outputs."""
    ports = np.zeros(self.num_tensors, np.int64)
    seen = np.zeros(self.num_ops, np.int64)
    for tensor, producer in enumerate(self.tensor_producer):
      ports[tensor] = seen[producer]
      seen[producer] += 1
    ports.flags.writeable = False
    return ports

  @functools.cached_property
  def num_outputs(self) -> np.ndarray:
    """[num_ops] number of tensors each op produces."""
    return np.bincount(self.tensor_producer, minlength=self.num_ops)

  @functools.cached_property
  def edge_src(self) -> np.ndarray:
    """[num_edges] source op of every edge: data edges first, then control edges."""
    return np.concatenate([self.tensor_producer[self.data_edge_tensor],
                           self.control_edge_src])

  @functools.cached_property
  def edge_dst(self) -> np.ndarray:
    """[num_edges] destination op of every edge, aligned with `edge_src`."""
    return np.concatenate([self.data_edge_consumer, self.control_edge_dst])

  @functools.cached_property
  def edge_is_control(self) -> np.ndarray:
    return np.concatenate([np.zeros(self.num_data_edges, bool),
                           np.ones(self.num_control_edges, bool)])

  @functools.cached_property
  def edge_bytes(self) -> np.ndarray:
    """[num_edges] bytes an edge carries (0 for control edges)."""
    return np.concatenate([self.tensor_size[self.data_edge_tensor],
                           np.zeros(self.num_control_edges)])

  @functools.cached_property
  def _predecessor_csr(self) -> tuple[np.ndarray, np.ndarray]:
    return _unique_csr(self.edge_dst, self.edge_src, self.num_ops)

  @functools.cached_property
  def _successor_csr(self) -> tuple[np.ndarray, np.ndarray]:
    return _unique_csr(self.edge_src, self.edge_dst, self.num_ops)

  def predecessors(self, op: int) -> np.ndarray:
    """Distinct ops `op` depends on (data or control), ascending."""
    indptr, indices = self._predecessor_csr
    return indices[indptr[op]:indptr[op + 1]]

  def successors(self, op: int) -> np.ndarray:
    """Distinct ops depending on `op`, ascending."""
    indptr, indices = self._successor_csr
    return indices[indptr[op]:indptr[op + 1]]

  @property
  def predecessor_csr(self) -> tuple[np.ndarray, np.ndarray]:
    """(indptr [num_ops + 1], indices): distinct predecessors of every op."""
    return self._predecessor_csr

  @property
  def successor_csr(self) -> tuple[np.ndarray, np.ndarray]:
    """(indptr [num_ops + 1], indices): distinct successors of every op."""
    return self._successor_csr

  @functools.cached_property
  def in_degree(self) -> np.ndarray:
    """[num_ops] number of distinct predecessors."""
    return np.diff(self._predecessor_csr[0])

  @functools.cached_property
  def out_degree(self) -> np.ndarray:
    """[num_ops] number of distinct successors."""
    return np.diff(self._successor_csr[0])

  @functools.cached_property
  def topological_order(self) -> np.ndarray:
    """Ops in dependency order; among ready ops the lowest index comes first."""
    order = kahn_order(self.num_ops, self._successor_csr, self.in_degree)
    order.flags.writeable = False
    return order

  # ----- transformations -------------------------------------------------------------------
  def replace(self, **changes: Any) -> "Graph":
    """A copy with some fields replaced (validated again)."""
    return dataclasses.replace(self, **changes)

  def __eq__(self, other: object) -> bool:
    if not isinstance(other, Graph):
      return NotImplemented
    return (self.name == other.name and self.op_names == other.op_names
            and self.op_types == other.op_types and self.metadata == other.metadata
            and all(np.array_equal(getattr(self, f), getattr(other, f))
                    for f in _FLOAT_FIELDS + _INDEX_FIELDS))

  __hash__ = None  # Mutable-looking arrays inside: compare, don't hash.

  def __repr__(self) -> str:
    return (f"Graph({self.name!r}, ops={self.num_ops}, tensors={self.num_tensors}, "
            f"data_edges={self.num_data_edges}, control_edges={self.num_control_edges})")


def _unique_csr(rows: np.ndarray, cols: np.ndarray,
                num_rows: int) -> tuple[np.ndarray, np.ndarray]:
  if len(rows):
    pairs = np.unique(np.stack([rows, cols], axis=1), axis=0)
  else:
    pairs = np.zeros((0, 2), np.int64)
  indptr = np.zeros(num_rows + 1, np.int64)
  np.cumsum(np.bincount(pairs[:, 0], minlength=num_rows), out=indptr[1:])
  return indptr, pairs[:, 1].copy()


def kahn_order(num_ops: int, successor_csr: tuple[np.ndarray, np.ndarray],
               in_degree: np.ndarray) -> np.ndarray:
  """Ops in dependency order (lowest index first among ready ops) from successor lists in CSR
  form (indptr, indices) and in-degrees counted over the same lists."""
  indptr, indices = successor_csr
  remaining = in_degree.astype(np.int64).copy()
  ready = [int(op) for op in np.flatnonzero(remaining == 0)]
  heapq.heapify(ready)
  order = []
  while ready:
    op = heapq.heappop(ready)
    order.append(op)
    for succ in indices[indptr[op]:indptr[op + 1]]:
      remaining[succ] -= 1
      if remaining[succ] == 0:
        heapq.heappush(ready, int(succ))
  return np.array(order, np.int64)


# ----- validation ----------------------------------------------------------------------------
def validate(graph: Graph) -> None:
  """Raises a `GraphError` subclass with a one-line message if `graph` is invalid."""
  num_ops = graph.num_ops
  if num_ops == 0:
    raise errors.EmptyGraphError(f"graph {graph.name!r} has no ops")
  if len(graph.op_types) != num_ops:
    raise errors.GraphError(
        f"graph {graph.name!r} has {num_ops} op names but {len(graph.op_types)} op types")
  for field, expected in (("compute_cost", num_ops), ("extra_memory", num_ops),
                          ("tensor_producer", graph.num_tensors),
                          ("data_edge_consumer", graph.num_data_edges),
                          ("control_edge_dst", graph.num_control_edges)):
    if len(getattr(graph, field)) != expected:
      raise errors.GraphError(f"graph {graph.name!r}: {field} has {len(getattr(graph, field))} "
                              f"entries, expected {expected}")
  _check_unique_names(graph)
  _check_costs(graph)
  _check_references(graph)
  _check_acyclic(graph)


def _check_unique_names(graph: Graph) -> None:
  if len(set(graph.op_names)) == graph.num_ops:
    return
  seen = set()
  for name in graph.op_names:
    if name in seen:
      raise errors.DuplicateNameError(f"graph {graph.name!r}: duplicate op name {name!r}")
    seen.add(name)


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_costs(graph: Graph) -> None:
  for field, owner in (("compute_cost", "op"), ("extra_memory", "op"), ("tensor_size", "tensor")):
    values = getattr(graph, field)
    with np.errstate(over="ignore"):  # A sum past float64 is inf: refused below, no warning.
      total = float(np.sum(values, dtype=np.float64)) if np.isfinite(values).all() else 0.0
    if total > FLOAT32_MAX:  # The models sum them in float32: the sum would be inf.
      raise errors.InvalidCostError(
          f"graph {graph.name!r}: the {field.replace('_', ' ')}s add up to {total:.3g}, beyond "
          f"float32's {FLOAT32_MAX:.3g}, in which the models compute; scale the units down")
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if len(bad):
      index = int(bad[0])
      label = (f"op {graph.op_names[index]!r}" if owner == "op" else
               f"tensor {index} (produced by "
               f"{_op_label(graph, int(graph.tensor_producer[index]))})")
      raise errors.InvalidCostError(
          f"graph {graph.name!r}: {label} has {field.replace('_', ' ')} {float(values[index])}; "
          f"costs and sizes must be finite and non-negative")


def _op_label(graph: Graph, op: int) -> str:
  return repr(graph.op_names[op]) if 0 <= op < graph.num_ops else f"unknown op {op}"


def _check_references(graph: Graph) -> None:
  num_ops, num_tensors = graph.num_ops, graph.num_tensors
  bad = np.flatnonzero((graph.tensor_producer < 0) | (graph.tensor_producer >= num_ops))
  if len(bad):
    tensor = int(bad[0])
    raise errors.MissingProducerError(
        f"graph {graph.name!r}: tensor {tensor} has no producer (producer index "
        f"{int(graph.tensor_producer[tensor])}, graph has {num_ops} ops)")
  bad = np.flatnonzero((graph.data_edge_tensor < 0) | (graph.data_edge_tensor >= num_tensors))
  if len(bad):
    edge = int(bad[0])
    raise errors.UnknownNodeError(
        f"graph {graph.name!r}: data edge {edge} reads unknown tensor "
        f"{int(graph.data_edge_tensor[edge])} (graph has {num_tensors} tensors)")
  for field in ("data_edge_consumer", "control_edge_src", "control_edge_dst"):
    ids = getattr(graph, field)
    bad = np.flatnonzero((ids < 0) | (ids >= num_ops))
    if len(bad):
      edge = int(bad[0])
      kind = "data" if field.startswith("data") else "control"
      raise errors.UnknownNodeError(
          f"graph {graph.name!r}: {kind} edge {edge} names unknown op {int(ids[edge])} "
          f"(graph has {num_ops} ops)")


def _check_acyclic(graph: Graph) -> None:
  if len(graph.topological_order) == graph.num_ops:
    return
  raise errors.CycleError(f"graph {graph.name!r} has a cycle: " +
                          " -> ".join(repr(graph.op_names[op]) for op in find_cycle(graph)))


def find_cycle(graph: Graph) -> list[int]:
  """Ops on one cycle, the first repeated at the end; [] for a DAG."""
  in_order = np.zeros(graph.num_ops, bool)
  in_order[graph.topological_order] = True
  if in_order.all():
    return []
  # Every op left out of Kahn's order has a predecessor that is also left out, so walking
  # backwards through left-out ops must revisit one: that walk closes a cycle.
  start = int(np.flatnonzero(~in_order)[0])
  position = {}
  walk = []
  op = start
  while op not in position:
    position[op] = len(walk)
    walk.append(op)
    op = next(int(p) for p in graph.predecessors(op) if not in_order[p])
  cycle = walk[position[op]:][::-1]
  first = cycle.index(min(cycle))  # Start at the lowest index so the message is stable.
  cycle = cycle[first:] + cycle[:first]
  return cycle + [cycle[0]]


# ----- construction helpers -----------------------------------------------------------------
class GraphBuilder:
  """Builds a `Graph` op by op, referring to ops by name or index.

  Unknown names raise `UnknownNodeError` at once, naming the missing op.
  """

  def __init__(self, name: str = "graph", metadata: Mapping[str, Any] | None = None):
    self.name = name
    self.metadata = dict(metadata or {})
    self._index: dict[str, int] = {}
    self._names: list[str] = []
    self._types: list[str] = []
    self._cost: list[float] = []
    self._extra: list[float] = []
    self._producer: list[int] = []
    self._size: list[float] = []
    self._edge_tensor: list[int] = []
    self._edge_consumer: list[int] = []
    self._control: list[tuple[int, int]] = []

  def add_op(self, name: str, cost: float, op_type: str = "", extra_memory: float = 0.0) -> int:
    if name in self._index:
      raise errors.DuplicateNameError(f"graph {self.name!r}: duplicate op name {name!r}")
    self._index[name] = len(self._names)
    self._names.append(name)
    self._types.append(op_type)
    self._cost.append(cost)
    self._extra.append(extra_memory)
    return self._index[name]

  def op(self, ref: int | str) -> int:
    """The index of an op given by name or index."""
    if isinstance(ref, str):
      if ref not in self._index:
        raise errors.UnknownNodeError(f"graph {self.name!r}: unknown op {ref!r}")
      return self._index[ref]
    if not 0 <= ref < len(self._names):
      raise errors.UnknownNodeError(f"graph {self.name!r}: unknown op index {ref}")
    return int(ref)

  def op_name(self, index: int) -> str:
    return self._names[index]

  def add_tensor(self, producer: int | str, size: float) -> int:
    self._producer.append(self.op(producer))
    self._size.append(size)
    return len(self._size) - 1

  def add_data_edge(self, tensor: int, consumer: int | str) -> None:
    if not 0 <= tensor < len(self._size):
      raise errors.UnknownNodeError(f"graph {self.name!r}: unknown tensor {tensor}")
    self._edge_tensor.append(tensor)
    self._edge_consumer.append(self.op(consumer))

  def add_control_edge(self, src: int | str, dst: int | str) -> None:
    self._control.append((self.op(src), self.op(dst)))

  def build(self) -> Graph:
    control = np.array(self._control, np.int64).reshape(-1, 2)
    return Graph(op_names=self._names, op_types=self._types, compute_cost=self._cost,
                 extra_memory=self._extra, tensor_producer=self._producer,
                 tensor_size=self._size, data_edge_tensor=self._edge_tensor,
                 data_edge_consumer=self._edge_consumer, control_edge_src=control[:, 0],
                 control_edge_dst=control[:, 1], name=self.name, metadata=self.metadata)
