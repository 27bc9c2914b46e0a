"""Real data for a JAX function imported by `regal_datasets.jax_import.trace`: every op binds its
equation's primitive (jitted per op), inputs are random arrays of the traced shapes and
captured constants keep their values, so executing the graph under any placement computes
`fn(*inputs)`."""
from __future__ import annotations

import functools

import jax
import numpy as np

from regal_datasets import errors
from regal_datasets.jax_import import Traced
from regal.execute.program import Kernel, Program, op_tensors


def input_values(traced: Traced, seed: int = 0) -> list[np.ndarray]:
  """The arrays fed to the function's inputs (normal floats, small integers, booleans)."""
  rng = np.random.default_rng(seed)
  values = []
  for aval in traced.input_avals:
    dtype = np.dtype(aval.dtype)
    if np.issubdtype(dtype, np.floating):
      values.append((0.5 * rng.standard_normal(aval.shape)).astype(dtype))
    elif dtype == np.bool_:
      values.append(rng.random(aval.shape) < 0.5)
    else:
      values.append(rng.integers(0, 4, aval.shape).astype(dtype))
  return values


def bind(equation, operands, keep, *tensors):
  """The equation's primitive on its operands (literals in place, `tensors` in order): the
  results whose variable is kept."""
  values = iter(tensors)
  args = [operand[1] if isinstance(operand, tuple) else next(values) for operand in operands]
  kept = tuple(r for r, k in zip(bind_args(equation, args), keep) if k)
  return kept or (jax.numpy.zeros((), jax.numpy.float32),)


def bind_args(equation, args, params: dict | None = None) -> list:
  """The equation's primitive on `args` (with `params` in place of its own): every result."""
  params = equation.primitive.get_bind_params(equation.params if params is None else params)
  if isinstance(params, tuple):  # Older JAX: (sub-functions, parameters).
    subfuns, params = params
    args = [*subfuns, *args]
  with equation.ctx.manager:
    results = equation.primitive.bind(*args, **params)
  return list(results) if equation.primitive.multiple_results else [results]


def jax_program(traced: Traced, seed: int = 0) -> Program:
  graph = traced.graph
  tensors = op_tensors(graph)
  sources = iter(input_values(traced, seed) + [np.asarray(c) for c in traced.consts])
  kernels = []
  for op, entry in enumerate(traced.equations):
    if entry is None:
      kernels.append(Kernel(inputs=(), value=(next(sources),)))
      continue
    equation, operands = entry
    keep = [type(v).__name__ != "DropVar" for v in equation.outvars]
    # An operand the graph does not carry (None: a variable defined by nothing we import)
    # cannot occur for a closed jaxpr; tensor operands keep their order, repeats included.
    inputs = tuple(o for o in operands if not isinstance(o, tuple))
    distinct = tuple(dict.fromkeys(inputs))
    positions = [distinct.index(o) for o in inputs]
    fn = jax.jit(functools.partial(_reorder, functools.partial(bind, equation, operands, keep),
                                   tuple(positions)))
    if len(tensors[op]) != sum(keep):
      raise errors.ConfigError(f"op {graph.op_names[op]!r}: {len(tensors[op])} output tensors "
                               f"in the graph, {sum(keep)} results in its equation")
    kernels.append(Kernel(inputs=distinct, fn=fn))
  outputs = tuple(t for t in traced.outputs if t is not None)
  return Program(tuple(kernels), "jax", outputs, {"seed": seed})


def _reorder(fn, positions, *distinct):
  return fn(*[distinct[p] for p in positions])
