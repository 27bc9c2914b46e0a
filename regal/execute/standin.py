"""Stand-in kernels for graphs that carry costs but no semantics (synthetic graphs, the Doppler
files): each op reads every input (so the data dependencies are real), spins a small matmul
loop for a time proportional to its compute cost and writes one buffer per output tensor sized
by the tensor's bytes.

Scales are chosen so the graph fits the machine: the whole graph's compute on one device takes
about `target_seconds`, and the largest buffer is at most `max_buffer_bytes`. Buffer sizes are
rounded up to a power of two elements (stand-ins of equal shapes compile once), which
`Program.facts["tensor_bytes"]` records for models that want the executed sizes.
"""
from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from regal_datasets.graph import Graph
from regal.execute.program import Kernel, Program, op_inputs, op_tensors, sink_tensors

_TILE = 32  # The spin loop's matrix side: small enough for fine-grained time steps.


@jax.jit
def _first(x):
  return jnp.ravel(x)[0]


@jax.jit
def _spin(iterations, token):
  tile = jnp.full((_TILE, _TILE), 1e-3, jnp.float32) + 0.0 * token
  tile = jax.lax.fori_loop(0, iterations, lambda _, m: jnp.tanh(m @ m + 1e-3), tile)
  return tile[0, 0]


@functools.partial(jax.jit, static_argnums=0)
def _fill(elements: int, token):
  return jnp.full((elements,), token, jnp.float32)


def _standin_op(out_elements: tuple[int, ...], iterations, *inputs):
  """Reads every input, spins, writes the outputs: a few small dispatches, each compiled once
  per input shape or output size (not once per op; the spin loop once per device)."""
  token = sum((_first(x) for x in inputs), np.float32(0.0))
  token = _spin(iterations, token)
  return tuple(_fill(n, token) for n in out_elements) or (token,)


def seconds_per_iteration(iterations: int = 2000) -> float:
  """The spin loop's time per iteration on the default device, measured."""
  jax.block_until_ready(_spin(np.int32(iterations), np.float32(0.0)))
  start = time.perf_counter()
  jax.block_until_ready(_spin(np.int32(iterations), np.float32(0.0)))
  return (time.perf_counter() - start) / iterations


def _elements(num_bytes: float) -> int:
  elements = max(int(np.ceil(num_bytes / 4.0)), 1)
  return 1 << int(np.ceil(np.log2(elements)))


def standin_program(graph: Graph, target_seconds: float = 0.2,
                    max_buffer_bytes: float = 16e6) -> Program:
  total = float(graph.compute_cost.sum())
  per_iteration = seconds_per_iteration()
  seconds_per_cost = target_seconds / total if total > 0 else 0.0
  largest = float(graph.tensor_size.max(initial=0.0))
  bytes_scale = min(1.0, max_buffer_bytes / largest) if largest > 0 else 1.0
  tensors, inputs = op_tensors(graph), op_inputs(graph)
  out_elements = [_elements(graph.tensor_size[t] * bytes_scale) for t in range(graph.num_tensors)]
  ordered = np.zeros(graph.num_ops, bool)
  ordered[graph.control_edge_dst] = True
  kernels = []
  for op in range(graph.num_ops):
    sizes = tuple(out_elements[t] for t in tensors[op])
    cost = float(graph.compute_cost[op])
    if cost == 0.0 and not inputs[op] and not ordered[op]:
      kernels.append(Kernel(inputs=(), value=tuple(np.zeros(n, np.float32) for n in sizes)
                            or (np.zeros((), np.float32),)))
      continue
    iterations = int(round(cost * seconds_per_cost / per_iteration))
    kernels.append(Kernel(inputs=tuple(inputs[op]), fn=functools.partial(
        _standin_op, sizes, np.int32(iterations))))
  return Program(tuple(kernels), "standin", sink_tensors(graph), {
      "seconds_per_cost": seconds_per_cost, "bytes_scale": bytes_scale,
      "seconds_per_iteration": per_iteration,
      "tensor_bytes": [4.0 * n for n in out_elements]})
