r"""A model zoo, architectures only, turned into graphs by abstract tracing.

  python -m regal_datasets.zoo --model resnet50 --batch 32 --out resnet50.json
  python -m regal_datasets.zoo --model gpt2_medium --batch 8 --seq_len 1024 --step train \
      --out gpt2m_train.json

Models (Flax linen, `zoo_models`; parameters are only ever shapes, via `jax.eval_shape`) are
the records of `ZOO`: ResNet-50, Inception-V3, BERT-base, one Llama-2-7B block, GPT-2 small
and medium, Llama-2-7B. `--layers` shortens the layered ones (e.g. one layer for tests).
`--step` picks what is traced: `forward` (default); `backward`, the gradient of the summed
output too; `train`, a training step as engineers run it (`regal_datasets.train_step`: the
model's loss, backward, AdamW, BF16 compute on FP32 master weights), with `--remat` to
recompute each block in the backward pass; `--attention fused` runs attention as one kernel
each way, as FlashAttention (the default for a training step). This module, and the command,
load the modules only to trace, so a mistake in the flags is one line before JAX loads.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence

from regal_datasets import cli, errors
from regal_datasets.graph import Graph
from regal_datasets.jax_import import DEFAULT_FLOPS_PER_BYTE

if TYPE_CHECKING:
  from regal_datasets.jax_import import Traced

@dataclasses.dataclass(frozen=True)
class ZooModel:
  """One zoo architecture: what it reads, how long its sequences may be, how it trains."""
  name: str
  summary: str
  reads: str  # "images", "tokens" or "hidden" (a block's input activations).
  layers: int | None = None  # Its layer count, where `--layers` may shorten it.
  positions: int | None = None  # The longest sequence it embeds (None: any).
  loss: str | None = None  # "classes", "masked_lm", "next_token"; None: no training head.
  fusable: bool = False  # Its attention may run fused, as FlashAttention (`--attention`).


ZOO = (
    ZooModel("resnet50", "ResNet-50 v1.5 (bottleneck blocks 3-4-6-3), 224 x 224 images, 1000 "
             "classes", "images", loss="classes"),
    ZooModel("inception_v3", "Inception-V3 (stem, 3 A, B, 4 C, D, 2 E blocks), 299 x 299 "
             "images", "images", loss="classes"),
    ZooModel("bert_base", "BERT-base encoder: 12 layers, hidden 768, 12 heads, MLP 3072, vocab "
             "30522 (trained with its masked-LM head, the tied embedding)", "tokens", 12, 512,
             "masked_lm"),
    ZooModel("llama_block", "one Llama-2-7B decoder block: RMSNorm, rotary attention (32 heads "
             "of 128), SwiGLU MLP 11008 (no head: not trainable alone; see llama_7b)",
             "hidden", fusable=True),
    ZooModel("gpt2_small", "GPT-2 small (124M): 12 pre-LayerNorm layers, hidden 768, 12 heads, "
             "causal attention, GELU MLP 3072, vocab 50257, 1024 positions, tied LM head",
             "tokens", 12, 1024, "next_token", True),
    ZooModel("gpt2_medium", "GPT-2 medium (355M): gpt2_small with 24 layers, hidden 1024, 16 "
             "heads, MLP 4096", "tokens", 24, 1024, "next_token", True),
    ZooModel("llama_7b", "Llama-2-7B (6.74B): 32 llama_block layers, vocab 32000, untied LM "
             "head, 4096 positions", "tokens", 32, 4096, "next_token", True),
)
MODELS = tuple(model.name for model in ZOO)
SPECS = {model.name: model for model in ZOO}
SEQUENCE_MODELS = tuple(m.name for m in ZOO if m.reads != "images")  # Read --seq_len.
LAYERED_MODELS = tuple(m.name for m in ZOO if m.layers)  # Read --layers.
STEPS = ("forward", "backward", "train")  # backward: the gradient of the summed output.
ATTENTIONS = ("materialized", "fused")  # fused: one kernel each way (`zoo_models.fused_attention`).


def attention_of(model: str, step: str, attention: str | None) -> str:
  """The attention a trace uses: as given, else fused for a training step where the model
  can (as trainers run FlashAttention), else materialized."""
  if attention is None:
    return "fused" if step == "train" and SPECS[model].fusable else "materialized"
  return attention


def check_size(model: str, batch: int = 1, seq_len: int = 128, layers: int | None = None,
               step: str = "forward", remat: bool = False,
               attention: str | None = None) -> None:
  """A zoo model of these sizes exists: positive sizes, and a sequence no longer than the
  model's positions (else its embedding would read past them, silently); the step is one it
  can take."""
  if model not in MODELS:
    raise errors.ConfigError(f"unknown zoo model {model!r}; known: {', '.join(MODELS)}")
  spec = SPECS[model]
  layers = spec.layers or 1 if layers is None else layers
  if batch < 1 or seq_len < 1 or layers < 1:
    raise errors.ConfigError(f"batch, seq_len and layers must be positive, got {batch}, "
                             f"{seq_len}, {layers}")
  if spec.positions and seq_len > spec.positions:
    raise errors.ConfigError(f"{model} has {spec.positions} positions: seq_len {seq_len} "
                             f"is longer")
  if step not in STEPS:
    raise errors.ConfigError(f"unknown step {step!r}; known: {', '.join(STEPS)}")
  if step == "train" and spec.loss is None:
    raise errors.ConfigError(f"--step train: {model} has no training head (its loss is "
                             f"undefined); train llama_7b, or --layers 1 of it, instead")
  if attention not in (None, *ATTENTIONS):
    raise errors.ConfigError(f"unknown attention {attention!r}; known: {', '.join(ATTENTIONS)}")
  if attention == "fused" and not spec.fusable:
    raise errors.ConfigError(f"--attention fused: {model}'s attention is not ours to fuse; "
                             f"models that can: "
                             f"{', '.join(m.name for m in ZOO if m.fusable)}")
  if remat and (step == "forward" or not spec.layers):
    raise errors.ConfigError(
        f"--remat would do nothing here: it recomputes the blocks of "
        f"{', '.join(LAYERED_MODELS)} in a backward pass (--step backward or train)")


def build(model: str, batch: int = 1, seq_len: int = 128, layers: int | None = None,
          remat: bool = False, head: bool = False, fused: bool = False):
  """(module, abstract input) of a zoo model; `head`: BERT with its masked-LM head; `fused`:
  its attention one kernel each way."""
  import jax
  import jax.numpy as jnp

  from regal_datasets import zoo_models as m
  check_size(model, batch, seq_len, layers, "backward" if remat else "forward", remat)
  spec = SPECS[model]
  layers = layers or spec.layers
  tokens = jax.ShapeDtypeStruct((batch, seq_len), jnp.int32)
  if model == "resnet50":
    return m.ResNet50(), jax.ShapeDtypeStruct((batch, 224, 224, 3), jnp.float32)
  if model == "inception_v3":
    return m.InceptionV3(), jax.ShapeDtypeStruct((batch, 299, 299, 3), jnp.float32)
  if model == "bert_base":
    return m.BertBase(spec.positions, layers=layers, lm_head=head, remat=remat), tokens
  if model == "llama_block":
    return m.LlamaBlock(fused=fused), jax.ShapeDtypeStruct((batch, seq_len, 4096), jnp.float32)
  if model == "llama_7b":
    return m.Llama(layers=layers, remat=remat, fused=fused), tokens
  sizes = {"gpt2_small": {}, "gpt2_medium": {"hidden": 1024, "heads": 16}}[model]
  return m.GPT2(spec.positions, layers=layers, remat=remat, fused=fused, **sizes), tokens


def model_graph(model: str, batch: int = 1, seq_len: int = 128, layers: int | None = None,
                step: str = "forward", inline: bool = True,
                flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE, remat: bool = False,
                attention: str | None = None) -> Graph:
  """A zoo model's forward pass, forward + backward, or training step as a graph; nothing is
  materialized."""
  return model_trace(model, batch, seq_len, layers, step, inline, flops_per_byte, remat,
                     attention).graph


def cross_entropy(logits, targets):
  """The mean negative log-likelihood of integer `targets`, in float32."""
  import jax
  import jax.numpy as jnp
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def next_token_loss(logits, tokens):
  """A language model's loss: each position predicts the next token."""
  return cross_entropy(logits[:, :-1], tokens[:, 1:])


def _loss(kind: str):
  """loss(output, batch) of a training head, in float32."""
  if kind == "classes":
    return lambda logits, batch: cross_entropy(logits, batch[1])
  if kind == "masked_lm":  # Every position predicted (a masked LM scores 15%; same matmuls).
    return cross_entropy
  return next_token_loss


def model_trace(model: str, batch: int = 1, seq_len: int = 128, layers: int | None = None,
                step: str = "forward", inline: bool = True,
                flops_per_byte: float = DEFAULT_FLOPS_PER_BYTE, remat: bool = False,
                attention: str | None = None) -> Traced:
  """`model_graph` with the equations behind every op (what `regal.execute` runs); the graph
  records how it was made (`metadata["zoo"]`), so `retrace(graph)` rebuilds this."""
  import jax
  import jax.numpy as jnp

  from regal_datasets.jax_import import trace
  check_size(model, batch, seq_len, layers, step, remat, attention)
  spec = SPECS[model]
  attention = attention_of(model, step, attention)
  module, example = build(model, batch, seq_len, layers, remat, head=step == "train",
                          fused=attention == "fused")
  variables = jax.eval_shape(module.init, jax.random.key(0), example)
  name = (f"{model}_b{batch}" + (f"_s{seq_len}" if model in SEQUENCE_MODELS else "")
          + {"forward": "", "backward": "_fwbw", "train": "_train"}[step])
  if step == "train":
    from regal_datasets import train_step
    if spec.reads == "images":
      labels = jax.ShapeDtypeStruct((batch,), jnp.int32)
      apply = lambda v, b: module.apply(v, b[0], mutable=["batch_stats"])
      fn = train_step.training_step(apply, _loss(spec.loss), mutable=["batch_stats"])
      traced = train_step.trace_training(fn, variables, (example, labels), name, inline,
                                         flops_per_byte)
    else:
      fn = train_step.training_step(module.apply, _loss(spec.loss))
      traced = train_step.trace_training(fn, variables, example, name, inline, flops_per_byte)
  else:
    forward: Callable[..., Any] = lambda v, x: module.apply(v, x)
    fn = forward
    if step == "backward":
      fn = lambda v, x: jax.grad(lambda w: jnp.sum(forward(w, x)))(v)
    traced = trace(fn, variables, example, name=name, inline=inline,
                   flops_per_byte=flops_per_byte)
  made = {"model": model, "batch": batch, "seq_len": seq_len, "layers": layers, "step": step,
          "inline": inline, "flops_per_byte": flops_per_byte, "remat": remat,
          "attention": attention}
  graph = traced.graph.replace(metadata={**traced.graph.metadata, "zoo_model": model,
                                         "batch": batch, "step": step, "zoo": made})
  return dataclasses.replace(traced, graph=graph)


def how_made(graph: Graph) -> dict | None:
  """`model_trace`'s arguments for a zoo graph (or a split of one), or None for any other."""
  made = graph.metadata.get("zoo")
  if not isinstance(made, dict):
    return None
  if "backward" in made:  # Written before `step` replaced the flag.
    made = {**made, "step": "backward" if made.pop("backward") else "forward"}
  return dict(made)


def retrace(graph: Graph) -> Traced | None:
  """The trace a zoo graph (or a split of one) was made from, or None for any other graph.
  (A graph edited after it was made would not match: its op count is checked.)"""
  made = how_made(graph)
  if made is None:
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
  check_size(flag.model, flag.batch, flag.seq_len, flag.layers, flag.step, flag.remat,
             flag.attention)
  if flag.out:
    from regal_datasets import atomic
    graph_io.check_graph_output(flag.out)
    atomic.check_output(flag.out, "--out")
  graph = model_graph(flag.model, flag.batch, flag.seq_len, flag.layers, flag.step,
                      flag.inline, flag.flops_per_byte, flag.remat, flag.attention)
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
  _flags.DEFINE_integer("seq_len", 128, f"Sequence length ({', '.join(SEQUENCE_MODELS)}).",
                        lower_bound=1, upper_bound=1_000_000)
  _flags.DEFINE_integer("layers", None, f"Layers ({', '.join(LAYERED_MODELS)}; default: the "
                        f"model's own).", lower_bound=1, upper_bound=1000)
  _flags.DEFINE_enum("step", "forward", list(STEPS), "What to trace: the forward pass, "
                     "forward + backward, or a training step (loss, backward, AdamW).")
  _flags.DEFINE_bool("remat", False, "Recompute each block in the backward pass.")
  _flags.DEFINE_enum("attention", None, list(ATTENTIONS), "Attention as one kernel each way "
                     "(fused, as FlashAttention) or its ops (materialized). Default: fused for "
                     "--step train where the model allows, else materialized.")
  _flags.DEFINE_bool("inline", True, "Inline jit / custom_jvp bodies into their primitives.")
  _flags.DEFINE_float("flops_per_byte", DEFAULT_FLOPS_PER_BYTE,
                      "Device FLOP rate over link byte rate (cost scale).", lower_bound=1e-6,
                      upper_bound=1e12)
  _flags.DEFINE_string("out", None, "Write the graph here (format by extension).")
  cli.run_cli(main, stop_searches_early=False)
