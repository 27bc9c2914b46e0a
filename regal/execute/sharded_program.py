"""Real data for the sharded workloads (`regal_datasets.sharded`): every op's recorded semantics as
a jitted function.

An operand is a region of a logical matrix and the blocks (tensors) that cover it; the kernel
cuts each block to the region and pastes it into place, so an op computes exactly the piece of
the unsharded operation it stands for. Kernels are keyed by their shape of work (tensor ids
replaced by argument positions, regions made relative), so equal shards compile once.
"""
from __future__ import annotations

import functools
import json
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from regal_datasets import errors
from regal_datasets.graph import Graph
from regal.execute.program import Kernel, Program, sink_tensors

_ELEMENTWISE = ("elementwise", "add", "bias", "bias_relu", "softmax", "rmsnorm", "rotary",
                "swiglu")
_RMS_EPSILON = 1e-6


def input_value(seed: int, op: int, shape) -> np.ndarray:
  """An input block's data: small normal values, the same for an op whatever its device."""
  return (0.5 * np.random.default_rng([seed, op]).standard_normal(shape)).astype(np.float32)


def sharded_program(graph: Graph, seed: int = 0) -> Program:
  semantics = graph.metadata.get("semantics")
  if not isinstance(semantics, list) or len(semantics) != graph.num_ops:
    raise errors.ConfigError(f"graph {graph.name!r} records no per-op semantics (only graphs "
                             f"from regal_datasets.sharded do); run it with stand-in kernels")
  kernels = []
  for op, spec in enumerate(semantics):
    if spec["kind"] == "input":
      kernels.append(Kernel(inputs=(), value=(input_value(seed, op, tuple(spec["shape"])),)))
      continue
    inputs: dict[int, int] = {}
    key = _positional(spec, inputs)
    kernels.append(Kernel(inputs=tuple(inputs), fn=functools.partial(
        _apply, json.dumps(key, sort_keys=True))))
  return Program(tuple(kernels), "sharded", sink_tensors(graph),
                 {"seed": seed, "workload": graph.metadata.get("workload")})


def _positional(spec: Any, inputs: dict[int, int]) -> Any:
  """`spec` with tensor ids replaced by argument positions and operand regions relative to
  their own origin (what the computation depends on)."""
  def arg(tensor: int) -> int:
    return inputs.setdefault(int(tensor), len(inputs))

  def operand(o: dict) -> dict:
    r0, _, c0, _ = o["region"]
    return {"shape": [o["region"][1] - r0, o["region"][3] - c0],
            "blocks": [[arg(t), br0 - r0, br1 - r0, bc0 - c0, bc1 - c0]
                       for t, br0, br1, bc0, bc1 in o["blocks"]]}

  kind = spec["kind"]
  if kind == "matmul":
    return {"kind": kind, "a": operand(spec["a"]), "b": operand(spec["b"])}
  if kind == "sum":
    return {"kind": kind, "inputs": [arg(t) for t in spec["inputs"]]}
  if kind == "elementwise":
    if spec["fn"] not in _ELEMENTWISE:
      raise errors.ConfigError(f"unknown elementwise function {spec['fn']!r}")
    r0, _, c0, _ = spec["region"]
    return {"kind": kind, "fn": spec["fn"], "x": arg(spec["x"]),
            "others": [operand(o) for o in spec["others"]],
            "row_input": None if spec["row_input"] is None else arg(spec["row_input"]),
            # Rotary needs absolute positions; nothing else depends on where the block is.
            "origin": [r0, c0] if spec["fn"] == "rotary" else None,
            "head_dim": spec.get("head_dim")}
  if kind == "row_stat":
    return {"kind": kind, "fn": spec["fn"], "blocks": [arg(t) for t in spec["blocks"]]}
  if kind == "attention_scores":
    return {"kind": kind, "heads": spec["heads"], "q": operand(spec["q"]),
            "k": operand(spec["k"])}
  if kind == "causal_softmax":
    return {"kind": kind, "x": arg(spec["x"])}
  if kind == "attention_values":
    return {"kind": kind, "heads": spec["heads"], "probs": arg(spec["probs"]),
            "v": operand(spec["v"])}
  raise errors.ConfigError(f"unknown op semantics {kind!r}")


def _assemble(args, operand: dict) -> jnp.ndarray:
  (rows, cols), blocks = operand["shape"], operand["blocks"]
  if len(blocks) == 1 and blocks[0][1:] == [0, rows, 0, cols]:
    return args[blocks[0][0]]
  out = jnp.zeros((rows, cols), jnp.float32)
  for position, r0, r1, c0, c1 in blocks:
    ir0, ir1, ic0, ic1 = max(r0, 0), min(r1, rows), max(c0, 0), min(c1, cols)
    piece = args[position][ir0 - r0:ir1 - r0, ic0 - c0:ic1 - c0]
    out = out.at[ir0:ir1, ic0:ic1].set(piece)
  return out


def _rotary(x: jnp.ndarray, origin, head_dim: int) -> jnp.ndarray:
  """Rotary embedding on a block: column pairs (2i, 2i + 1) of each head rotate by
  position x 10000^(-2i / head_dim); `origin` is the block's (row, column) in the matrix."""
  rows, cols = x.shape
  position = origin[0] + jnp.arange(rows, dtype=jnp.float32)[:, None]
  column = origin[1] + jnp.arange(0, cols, 2)
  pair = (column % head_dim) // 2
  angle = position * 10000.0 ** (-2.0 * pair / head_dim)
  even, odd = x[:, 0::2], x[:, 1::2]
  cos, sin = jnp.cos(angle), jnp.sin(angle)
  return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(rows, cols)


def _elementwise(fn: str, x, others, stat, origin, head_dim):
  if fn == "elementwise":
    return x + sum(others)
  if fn in ("add", "bias"):
    return x + others[0]
  if fn == "bias_relu":
    return jax.nn.relu(x + others[0])
  if fn == "softmax":
    return jnp.exp(x - stat)
  if fn == "rmsnorm":
    return x * stat * others[0]
  if fn == "rotary":
    return _rotary(x, origin, head_dim)
  return jax.nn.silu(x) * others[0]  # swiglu


def _heads(x: jnp.ndarray, heads: int) -> jnp.ndarray:
  rows, cols = x.shape
  heads = heads if cols % heads == 0 else 1
  return x.reshape(rows, heads, cols // heads)


@functools.partial(jax.jit, static_argnums=0)
def _apply(key: str, *args) -> tuple[jnp.ndarray, ...]:
  spec = json.loads(key)
  kind = spec["kind"]
  if kind == "matmul":
    return (_assemble(args, spec["a"]) @ _assemble(args, spec["b"]),)
  if kind == "sum":
    return (functools.reduce(jnp.add, [args[i] for i in spec["inputs"]]),)
  if kind == "elementwise":
    others = [_assemble(args, o) for o in spec["others"]]
    stat = None if spec["row_input"] is None else args[spec["row_input"]].reshape(-1, 1)
    return (_elementwise(spec["fn"], args[spec["x"]], others, stat, spec["origin"],
                         spec["head_dim"]),)
  if kind == "row_stat":
    row = jnp.concatenate([args[i] for i in spec["blocks"]], axis=1)
    if spec["fn"] == "softmax":
      return (jax.nn.logsumexp(row, axis=1),)
    return (jax.lax.rsqrt(jnp.mean(row * row, axis=1) + _RMS_EPSILON),)
  if kind == "attention_scores":
    q = _heads(_assemble(args, spec["q"]), spec["heads"])
    k = _heads(_assemble(args, spec["k"]), spec["heads"])
    return (jnp.einsum("qhd,khd->hqk", q, k) / jnp.sqrt(jnp.float32(q.shape[-1])),)
  if kind == "causal_softmax":
    scores = args[spec["x"]]
    seq = scores.shape[-1]
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    return (jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1),)
  probs = args[spec["probs"]]
  v = _heads(_assemble(args, spec["v"]), spec["heads"])
  out = jnp.einsum("hqk,khd->qhd", probs, v)
  return (out.reshape(out.shape[0], -1),)
