"""The program a graph runs: its own semantics where it has them, stand-ins otherwise."""
from __future__ import annotations

from regal_datasets.graph import Graph
from regal_datasets.jax_import import Traced
from regal.execute.jax_program import jax_program
from regal.execute.program import Program
from regal.execute.sharded_jax import sharded_jax_program
from regal.execute.sharded_program import sharded_program
from regal.execute.standin import standin_program


def program_for(graph: Graph, seed: int = 0, standin_seconds: float = 0.2,
                traced: Traced | None = None) -> Program:
  """A traced JAX function runs its equations (a zoo model's graph is traced again; a split of
  one runs its shards), a sharded workload its blocks (real data); any other graph runs
  stand-in kernels taking about `standin_seconds` on one device."""
  if traced is None and "zoo" in graph.metadata:
    from regal_datasets import zoo  # Local: the zoo loads Flax.
    traced = zoo.retrace(graph)
  if traced is not None and "shard_of" in graph.metadata:
    return sharded_jax_program(traced, graph, seed)
  if traced is not None:
    return jax_program(traced, seed)
  if "semantics" in graph.metadata:
    return sharded_program(graph, seed)
  return standin_program(graph, standin_seconds)
