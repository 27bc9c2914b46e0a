r"""A small model zoo, architectures only, turned into graphs by abstract tracing.

  python -m regal_datasets.zoo --model resnet50 --batch 32 --out resnet50.json
  python -m regal_datasets.zoo --model bert_base --seq_len 128 --backward --out bert.json

Models (Flax linen; parameters are only ever shapes, via `jax.eval_shape`):
  resnet50      ResNet-50 v1.5 (bottleneck blocks 3-4-6-3), 224 x 224 images, 1000 classes;
  inception_v3  Inception-V3 (stem, 3 A, B, 4 C, D, 2 E blocks), 299 x 299 images;
  bert_base     BERT-base encoder: 12 layers, hidden 768, 12 heads, MLP 3072, vocab 30522;
  llama_block   one Llama-2-7B decoder block: RMSNorm, rotary attention (32 heads of 128),
                SwiGLU MLP 11008;
  gpt2_small    a GPT-2-small-sized decoder: 12 pre-LayerNorm layers, hidden 768, 12 heads,
                causal attention, GELU MLP 3072, vocab 50257, 1024 positions, tied LM head.
`--layers` shortens BERT and GPT-2 (e.g. one layer for tests). The forward pass is traced by default;
`--backward` traces the gradient of the summed output with respect to the parameters too.
The modules live in `zoo_models` (Flax); this module, and the command, load it only to trace,
so a mistake in the flags is one line before JAX loads.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence

from regal_datasets import cli, errors
from regal_datasets.graph import Graph
from regal_datasets.jax_import import DEFAULT_FLOPS_PER_BYTE

if TYPE_CHECKING:
  from regal_datasets.jax_import import Traced

MODELS = ("resnet50", "inception_v3", "bert_base", "llama_block", "gpt2_small")
SEQUENCE_MODELS = ("bert_base", "llama_block", "gpt2_small")  # Read --seq_len.
LAYERED_MODELS = ("bert_base", "gpt2_small")  # Read --layers.
POSITIONS = {"bert_base": 512, "gpt2_small": 1024}  # The longest sequence each one embeds.


def check_size(model: str, batch: int = 1, seq_len: int = 128, layers: int = 12) -> None:
  """A zoo model of these sizes exists: positive sizes, and a sequence no longer than the
  model's positions (else its embedding would read past them, silently)."""
  if model not in MODELS:
    raise errors.ConfigError(f"unknown zoo model {model!r}; known: {', '.join(MODELS)}")
  if batch < 1 or seq_len < 1 or layers < 1:
    raise errors.ConfigError(f"batch, seq_len and layers must be positive, got {batch}, "
                             f"{seq_len}, {layers}")
  if model in POSITIONS and seq_len > POSITIONS[model]:
    raise errors.ConfigError(f"{model} has {POSITIONS[model]} positions: seq_len {seq_len} "
                             f"is longer")


def build(model: str, batch: int = 1, seq_len: int = 128, layers: int = 12):
  """(module, abstract input) of a zoo model."""
  import jax
  import jax.numpy as jnp

  from regal_datasets import zoo_models as m
  check_size(model, batch, seq_len, layers)
  if model == "resnet50":
    return m.ResNet50(), jax.ShapeDtypeStruct((batch, 224, 224, 3), jnp.float32)
  if model == "inception_v3":
    return m.InceptionV3(), jax.ShapeDtypeStruct((batch, 299, 299, 3), jnp.float32)
  if model == "bert_base":
    return (m.BertBase(POSITIONS[model], layers=layers),
            jax.ShapeDtypeStruct((batch, seq_len), jnp.int32))
  if model == "llama_block":
    return m.LlamaBlock(), jax.ShapeDtypeStruct((batch, seq_len, 4096), jnp.float32)
  return (m.GPT2Small(POSITIONS[model], layers=layers),
          jax.ShapeDtypeStruct((batch, seq_len), jnp.int32))


def model_graph(model: str, batch: int = 1, seq_len: int = 128, layers: int = 12,
                backward: bool = False, inline: bool = True,
                flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE) -> Graph:
  """A zoo model's forward (or forward + backward) pass as a graph; nothing is materialized."""
  return model_trace(model, batch, seq_len, layers, backward, inline, flops_per_byte).graph


def model_trace(model: str, batch: int = 1, seq_len: int = 128, layers: int = 12,
                backward: bool = False, inline: bool = True,
                flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE) -> Traced:
  """`model_graph` with the equations behind every op (what `regal.execute` runs); the graph
  records how it was made (`metadata["zoo"]`), so `retrace(graph)` rebuilds this."""
  import jax
  import jax.numpy as jnp

  from regal_datasets.jax_import import trace
  module, example = build(model, batch, seq_len, layers)
  variables = jax.eval_shape(module.init, jax.random.key(0), example)
  forward: Callable[..., Any] = lambda v, x: module.apply(v, x)
  fn = forward
  if backward:
    fn = lambda v, x: jax.grad(lambda w: jnp.sum(forward(w, x)))(v)
  name = f"{model}_b{batch}" + (f"_s{seq_len}" if model in SEQUENCE_MODELS else "")
  traced = trace(fn, variables, example, name=name + ("_fwbw" if backward else ""),
                 inline=inline, flops_per_byte=flops_per_byte)
  made = {"model": model, "batch": batch, "seq_len": seq_len, "layers": layers,
          "backward": backward, "inline": inline, "flops_per_byte": flops_per_byte}
  graph = traced.graph.replace(metadata={**traced.graph.metadata, "zoo_model": model,
                                         "batch": batch, "backward": backward, "zoo": made})
  return dataclasses.replace(traced, graph=graph)


def retrace(graph: Graph) -> Traced | None:
  """The trace a zoo graph (or a split of one) was made from, or None for any other graph.
  (A graph edited after it was made would not match: its op count is checked.)"""
  made = graph.metadata.get("zoo")
  if not isinstance(made, dict):
    return None
  traced = model_trace(**made)
  source_ops = graph.metadata.get("sharding", {}).get("source_ops", graph.num_ops)
  return traced if traced.graph.num_ops == source_ops else None


def main(argv: Sequence[str]) -> None:
  from absl import flags
  from regal_datasets import io as graph_io
  flag = flags.FLAGS
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  for name, readers in (("seq_len", SEQUENCE_MODELS), ("layers", LAYERED_MODELS)):
    if flag[name].present and flag.model not in readers:
      raise errors.ConfigError(f"--{name} would do nothing here: --model {flag.model} does not "
                               f"read it (only {', '.join(readers)} do)")
  check_size(flag.model, flag.batch, flag.seq_len, flag.layers)
  if flag.out:
    from regal_datasets import atomic
    graph_io.check_graph_output(flag.out)
    atomic.check_output(flag.out, "--out")
  graph = model_graph(flag.model, flag.batch, flag.seq_len, flag.layers, flag.backward,
                      flag.inline, flag.flops_per_byte)
  print(f"{graph.name}: {graph.num_ops} ops, {graph.num_tensors} tensors, "
        f"{graph.num_data_edges} data edges, {graph.metadata['total_flops'] / 1e9:.3f} GFLOPs")
  if flag.out:
    graph_io.save_graph(graph, flag.out)
    print(f"wrote {flag.out}")


if __name__ == "__main__":
  cli.watch_signals()
  from absl import flags as _flags
  _flags.DEFINE_enum("model", "resnet50", list(MODELS), "Zoo model.")
  _flags.DEFINE_integer("batch", 1, "Batch size.", lower_bound=1, upper_bound=1_000_000)
  _flags.DEFINE_integer("seq_len", 128, "Sequence length (bert_base, llama_block, gpt2_small).",
                        lower_bound=1, upper_bound=1_000_000)
  _flags.DEFINE_integer("layers", 12, "Layers (bert_base, gpt2_small).", lower_bound=1,
                        upper_bound=1000)
  _flags.DEFINE_bool("backward", False, "Trace forward + backward.")
  _flags.DEFINE_bool("inline", True, "Inline jit / custom_jvp bodies into their primitives.")
  _flags.DEFINE_float("flops_per_byte", DEFAULT_FLOPS_PER_BYTE,
                      "Device FLOP rate over link byte rate (cost scale).", lower_bound=1e-6,
                      upper_bound=1e12)
  _flags.DEFINE_string("out", None, "Write the graph here (format by extension).")
  cli.run_cli(main, stop_searches_early=False)
