"""A `Program`: what every op of a graph computes, so that the executor can run it.

Ops are either *sources* (their outputs are host arrays, put on the op's device before the
clock starts, as a model's zero-cost input ops are present from the start) or *kernels*: a
jitted function of the op's input tensors returning one array per output tensor of the op (a
scalar token when the op has none, so its completion can still be observed).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from regal_datasets import errors
from regal_datasets.graph import Graph


@dataclasses.dataclass(frozen=True)
class Kernel:
  inputs: tuple[int, ...]  # Tensors passed to `fn`, in its argument order.
  fn: Callable[..., tuple] | None = None
  value: tuple[np.ndarray, ...] | None = None  # A source's outputs (host arrays).

  @property
  def is_source(self) -> bool:
    return self.value is not None


@dataclasses.dataclass(frozen=True)
class Program:
  kernels: tuple[Kernel, ...]
  kind: str  # "sharded" (real data), "jax" (an imported function), "standin" (cost only).
  outputs: tuple[int, ...]  # The tensors that hold the computation's result.
  facts: dict[str, Any] = dataclasses.field(default_factory=dict)  # Scales, for reports.


def op_tensors(graph: Graph) -> list[list[int]]:
  """Each op's output tensors in index order (its output ports)."""
  tensors: list[list[int]] = [[] for _ in range(graph.num_ops)]
  for tensor, producer in enumerate(graph.tensor_producer):
    tensors[int(producer)].append(tensor)
  return tensors


def op_inputs(graph: Graph) -> list[list[int]]:
  """Each op's distinct input tensors, in edge order."""
  inputs: list[dict[int, None]] = [{} for _ in range(graph.num_ops)]
  for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
    inputs[int(consumer)][int(tensor)] = None
  return [list(d) for d in inputs]


def sink_tensors(graph: Graph) -> tuple[int, ...]:
  """Tensors nobody reads: a computation's results."""
  read = np.zeros(graph.num_tensors, bool)
  read[graph.data_edge_tensor] = True
  return tuple(int(t) for t in np.flatnonzero(~read))


def check(graph: Graph, program: Program) -> None:
  """A program that does not fit its graph is a bug of its builder, named in one line."""
  if len(program.kernels) != graph.num_ops:
    raise errors.ConfigError(f"program has {len(program.kernels)} kernels, graph {graph.name!r} "
                             f"has {graph.num_ops} ops")
  inputs = op_inputs(graph)
  for op, kernel in enumerate(program.kernels):
    extra = set(kernel.inputs) - set(inputs[op])
    if extra:
      raise errors.ConfigError(f"op {graph.op_names[op]!r}: its kernel reads tensor "
                               f"{min(extra)}, which the graph does not feed it")
    if kernel.fn is None and kernel.value is None:
      raise errors.ConfigError(f"op {graph.op_names[op]!r} has neither a kernel nor a value")
