"""A training step as engineers run it, ready to trace into a graph (issue 83).

  step = training_step(apply, loss)              # any JAX / Flax model
  traced = trace_training(step, params, batch)   # regal_datasets.jax_import.trace on it

One step is the forward pass, the loss, the backward pass (`jax.value_and_grad`) and the
optimizer's update (AdamW, `optax.adamw`), in mixed precision as Megatron-LM and the JAX LLM
trainers run it: parameters and optimizer state are held in float32 (the master weights, Adam's
first and second moments), the forward and backward passes compute in bfloat16 on a cast
copy, gradients come back in float32 through that cast's transpose, and the update runs in
float32. The step's inputs (parameters, optimizer state, model state such as batch-norm
statistics, the batch) are the graph's inputs; its outputs are the new parameters, optimizer
state and model state, and the loss. Rematerialisation is the model's choice (Flax `nn.remat`
around its blocks: `regal_datasets.zoo`'s `remat`).

Phases are read from the name stack each op was traced under (`jax_import`'s `op_scopes`):
`forward` and `optimizer` are named scopes, and JAX marks the backward pass's ops
`transpose(jvp(...))` (`phases`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from regal_datasets import errors
from regal_datasets.graph import Graph

PHASES = ("input", "forward", "backward", "optimizer")
COMPUTE_DTYPES = ("bfloat16", "float32")
ADAMW = {"learning_rate": 3e-4, "b1": 0.9, "b2": 0.95, "weight_decay": 0.1}  # GPT-3's.


def training_step(apply: Callable[..., Any], loss: Callable[[Any, Any], Any],
                  compute_dtype: str = "bfloat16", mutable: Sequence[str] = ()
                  ) -> Callable[..., Any]:
  """fn(params, opt_state, model_state, batch) -> (params, opt_state, model_state, loss).

  `apply(variables, batch)` returns the model's output (with `mutable` collections,
  `(output, updated model state)`, as Flax's `apply(..., mutable=...)` does); `loss(output,
  batch)` a scalar. Parameters are cast to `compute_dtype` for the forward and backward passes;
  the optimizer (AdamW, `ADAMW`) updates the float32 masters."""
  import jax
  import jax.numpy as jnp
  import optax
  if compute_dtype not in COMPUTE_DTYPES:
    raise errors.ConfigError(f"unknown compute dtype {compute_dtype!r}; known: "
                             f"{', '.join(COMPUTE_DTYPES)}")
  dtype = jnp.dtype(compute_dtype)
  optimizer = optax.adamw(**ADAMW)

  def cast(tree):
    return jax.tree_util.tree_map(
        lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)

  def step(params, opt_state, model_state, batch):
    def objective(master):
      with jax.named_scope("forward"):
        variables = {"params": cast(master), **model_state}
        output = apply(variables, cast(batch))
        new_state = model_state
        if mutable:
          output, new_state = output
        return loss(output, batch).astype(jnp.float32), new_state

    (value, new_state), grads = jax.value_and_grad(objective, has_aux=True)(params)
    with jax.named_scope("optimizer"):
      updates, opt_state = optimizer.update(grads, opt_state, params)
      params = optax.apply_updates(params, updates)
    return params, opt_state, new_state, value

  step.optimizer = optimizer  # type: ignore[attr-defined]  # What `trace_training` inits.
  return step


def trace_training(step: Callable[..., Any], variables: Any, batch: Any, name: str,
                   inline: bool = True, flops_per_byte: float | None = None):
  """The `jax_import.Traced` of one `training_step` on abstract `variables` (Flax's
  `{"params": ..., other collections}`) and `batch` (arrays or `ShapeDtypeStruct`s)."""
  import jax

  from regal_datasets import jax_import
  variables = dict(variables)
  if "params" not in variables:
    raise errors.ConfigError("a training step needs the model's 'params' collection")
  params = variables.pop("params")
  opt_state = jax.eval_shape(step.optimizer.init, params)
  per_byte = jax_import.DEFAULT_FLOPS_PER_BYTE if flops_per_byte is None else flops_per_byte
  traced = jax_import.trace(step, params, opt_state, variables, batch, name=name,
                            inline=inline, flops_per_byte=per_byte, data_args=(3,))
  count = int(sum(np.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(params)))
  training = {"optimizer": "adamw", **ADAMW, "parameters": count,
              "parameter_bytes": 4 * count, "optimizer_state_bytes": 8 * count}
  graph = traced.graph.replace(metadata={**traced.graph.metadata, "training": training})
  return dataclasses.replace(traced, graph=graph)


def phases(graph: Graph) -> list[str]:
  """Each op's phase (`PHASES`) from its traced name stack; every op is `forward` in a graph
  traced without scopes."""
  scopes = graph.metadata.get("op_scopes") or [""] * graph.num_ops
  found = []
  for op_type, scope in zip(graph.op_types, scopes):
    if op_type in ("input", "const"):
      found.append("input")
    elif "transpose(" in scope:
      found.append("backward")
    elif scope.startswith("optimizer"):
      found.append("optimizer")
    else:
      found.append("forward")
  return found
