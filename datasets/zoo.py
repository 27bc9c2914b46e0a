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
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from regal_datasets import cli, errors
from regal_datasets.graph import Graph
from regal_datasets.jax_import import DEFAULT_FLOPS_PER_BYTE, Traced, trace

MODELS = ("resnet50", "inception_v3", "bert_base", "llama_block", "gpt2_small")
SEQUENCE_MODELS = ("bert_base", "llama_block", "gpt2_small")  # Read --seq_len.
LAYERED_MODELS = ("bert_base", "gpt2_small")  # Read --layers.


# ----- ResNet-50 ---------------------------------------------------------------------------
class Bottleneck(nn.Module):
  features: int
  strides: int = 1

  @nn.compact
  def __call__(self, x):
    norm = functools.partial(nn.BatchNorm, use_running_average=True)
    y = nn.relu(norm()(nn.Conv(self.features, (1, 1), use_bias=False)(x)))
    y = nn.Conv(self.features, (3, 3), (self.strides, self.strides), use_bias=False)(y)
    y = nn.relu(norm()(y))
    y = norm()(nn.Conv(self.features * 4, (1, 1), use_bias=False)(y))
    if x.shape[-1] != self.features * 4 or self.strides != 1:
      x = norm()(nn.Conv(self.features * 4, (1, 1), (self.strides, self.strides),
                         use_bias=False)(x))
    return nn.relu(x + y)


class ResNet50(nn.Module):
  num_classes: int = 1000

  @nn.compact
  def __call__(self, x):
    x = nn.Conv(64, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], use_bias=False)(x)
    x = nn.relu(nn.BatchNorm(use_running_average=True)(x))
    x = nn.max_pool(x, (3, 3), (2, 2), padding="SAME")
    for stage, blocks in enumerate((3, 4, 6, 3)):
      for block in range(blocks):
        x = Bottleneck(64 * 2 ** stage, strides=2 if stage > 0 and block == 0 else 1)(x)
    return nn.Dense(self.num_classes)(x.mean(axis=(1, 2)))


# ----- Inception-V3 ------------------------------------------------------------------------
class ConvBN(nn.Module):
  features: int
  kernel: tuple[int, int]
  strides: tuple[int, int] = (1, 1)
  padding: str = "SAME"

  @nn.compact
  def __call__(self, x):
    x = nn.Conv(self.features, self.kernel, self.strides, padding=self.padding,
                use_bias=False)(x)
    return nn.relu(nn.BatchNorm(use_running_average=True)(x))


def _avg_branch(x, features):
  return ConvBN(features, (1, 1))(nn.avg_pool(x, (3, 3), (1, 1), padding="SAME"))


class InceptionA(nn.Module):
  pool_features: int

  @nn.compact
  def __call__(self, x):
    b1 = ConvBN(64, (1, 1))(x)
    b5 = ConvBN(64, (5, 5))(ConvBN(48, (1, 1))(x))
    b3 = ConvBN(96, (3, 3))(ConvBN(96, (3, 3))(ConvBN(64, (1, 1))(x)))
    return jnp.concatenate([b1, b5, b3, _avg_branch(x, self.pool_features)], axis=-1)


class InceptionB(nn.Module):
  @nn.compact
  def __call__(self, x):
    b3 = ConvBN(384, (3, 3), (2, 2), "VALID")(x)
    bd = ConvBN(96, (3, 3), (2, 2), "VALID")(ConvBN(96, (3, 3))(ConvBN(64, (1, 1))(x)))
    pool = nn.max_pool(x, (3, 3), (2, 2), padding="VALID")
    return jnp.concatenate([b3, bd, pool], axis=-1)


class InceptionC(nn.Module):
  channels: int

  @nn.compact
  def __call__(self, x):
    c = self.channels
    b1 = ConvBN(192, (1, 1))(x)
    b7 = ConvBN(192, (7, 1))(ConvBN(c, (1, 7))(ConvBN(c, (1, 1))(x)))
    bd = ConvBN(c, (1, 1))(x)
    for features, kernel in ((c, (7, 1)), (c, (1, 7)), (c, (7, 1)), (192, (1, 7))):
      bd = ConvBN(features, kernel)(bd)
    return jnp.concatenate([b1, b7, bd, _avg_branch(x, 192)], axis=-1)


class InceptionD(nn.Module):
  @nn.compact
  def __call__(self, x):
    b3 = ConvBN(320, (3, 3), (2, 2), "VALID")(ConvBN(192, (1, 1))(x))
    b7 = ConvBN(192, (7, 1))(ConvBN(192, (1, 7))(ConvBN(192, (1, 1))(x)))
    b7 = ConvBN(192, (3, 3), (2, 2), "VALID")(b7)
    pool = nn.max_pool(x, (3, 3), (2, 2), padding="VALID")
    return jnp.concatenate([b3, b7, pool], axis=-1)


class InceptionE(nn.Module):
  @nn.compact
  def __call__(self, x):
    b1 = ConvBN(320, (1, 1))(x)
    b3 = ConvBN(384, (1, 1))(x)
    b3 = jnp.concatenate([ConvBN(384, (1, 3))(b3), ConvBN(384, (3, 1))(b3)], axis=-1)
    bd = ConvBN(384, (3, 3))(ConvBN(448, (1, 1))(x))
    bd = jnp.concatenate([ConvBN(384, (1, 3))(bd), ConvBN(384, (3, 1))(bd)], axis=-1)
    return jnp.concatenate([b1, b3, bd, _avg_branch(x, 192)], axis=-1)


class InceptionV3(nn.Module):
  num_classes: int = 1000

  @nn.compact
  def __call__(self, x):
    x = ConvBN(32, (3, 3), (2, 2), "VALID")(x)
    x = ConvBN(32, (3, 3), padding="VALID")(x)
    x = ConvBN(64, (3, 3))(x)
    x = nn.max_pool(x, (3, 3), (2, 2))
    x = ConvBN(80, (1, 1))(x)
    x = ConvBN(192, (3, 3), padding="VALID")(x)
    x = nn.max_pool(x, (3, 3), (2, 2))
    for pool_features in (32, 64, 64):
      x = InceptionA(pool_features)(x)
    x = InceptionB()(x)
    for channels in (128, 160, 160, 192):
      x = InceptionC(channels)(x)
    x = InceptionD()(x)
    x = InceptionE()(InceptionE()(x))
    return nn.Dense(self.num_classes)(x.mean(axis=(1, 2)))


# ----- BERT-base ---------------------------------------------------------------------------
class BertLayer(nn.Module):
  hidden: int = 768
  heads: int = 12
  mlp: int = 3072

  @nn.compact
  def __call__(self, x):
    attention = nn.MultiHeadDotProductAttention(num_heads=self.heads, qkv_features=self.hidden)
    x = nn.LayerNorm()(x + attention(x, x))
    y = nn.Dense(self.hidden)(nn.gelu(nn.Dense(self.mlp)(x)))
    return nn.LayerNorm()(x + y)


class BertBase(nn.Module):
  layers: int = 12
  hidden: int = 768
  vocab: int = 30522
  max_len: int = 512

  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(self.vocab, self.hidden)(tokens)
    positions = nn.Embed(self.max_len, self.hidden)(jnp.arange(tokens.shape[1]))
    x = nn.LayerNorm()(x + positions[None])
    for _ in range(self.layers):
      x = BertLayer(self.hidden)(x)
    return x


# ----- Llama block -------------------------------------------------------------------------
class RMSNorm(nn.Module):
  @nn.compact
  def __call__(self, x):
    scale = self.param("scale", nn.initializers.ones, (x.shape[-1],))
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * scale


def rotary(x):
  """Rotary position embedding over [batch, seq, heads, head_dim]."""
  half = x.shape[-1] // 2
  frequency = 1.0 / 10000 ** (jnp.arange(half) / half)
  angle = jnp.arange(x.shape[1])[:, None] * frequency[None]
  cos, sin = jnp.cos(angle)[None, :, None], jnp.sin(angle)[None, :, None]
  first, second = x[..., :half], x[..., half:]
  return jnp.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def causal_attention(q, k, v):
  """Causal softmax attention over [batch, seq, heads, head_dim] queries, keys and values."""
  seq, head_dim = q.shape[1], q.shape[-1]
  logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(head_dim)
  mask = jnp.tril(jnp.ones((seq, seq), bool))
  weights = jax.nn.softmax(jnp.where(mask, logits, -1e9), axis=-1)
  return jnp.einsum("bhqk,bkhd->bqhd", weights, v)


class LlamaBlock(nn.Module):
  hidden: int = 4096
  heads: int = 32
  mlp: int = 11008

  @nn.compact
  def __call__(self, x):
    batch, seq, _ = x.shape
    head_dim = self.hidden // self.heads
    h = RMSNorm()(x)
    q, k, v = (nn.Dense(self.hidden, use_bias=False)(h).reshape(batch, seq, self.heads,
                                                                 head_dim) for _ in range(3))
    q, k = rotary(q), rotary(k)
    attended = causal_attention(q, k, v).reshape(batch, seq, self.hidden)
    x = x + nn.Dense(self.hidden, use_bias=False)(attended)
    h = RMSNorm()(x)
    gate = nn.silu(nn.Dense(self.mlp, use_bias=False)(h))
    up = nn.Dense(self.mlp, use_bias=False)(h)
    return x + nn.Dense(self.hidden, use_bias=False)(gate * up)


# ----- GPT-2 small -------------------------------------------------------------------------
class GPT2Block(nn.Module):
  hidden: int = 768
  heads: int = 12

  @nn.compact
  def __call__(self, x):
    batch, seq, _ = x.shape
    head_dim = self.hidden // self.heads
    q, k, v = jnp.split(nn.Dense(3 * self.hidden)(nn.LayerNorm()(x)), 3, axis=-1)
    q, k, v = (t.reshape(batch, seq, self.heads, head_dim) for t in (q, k, v))
    attended = causal_attention(q, k, v).reshape(batch, seq, self.hidden)
    x = x + nn.Dense(self.hidden)(attended)
    y = nn.Dense(self.hidden)(nn.gelu(nn.Dense(4 * self.hidden)(nn.LayerNorm()(x))))
    return x + y


class GPT2Small(nn.Module):
  layers: int = 12
  hidden: int = 768
  vocab: int = 50257
  max_len: int = 1024

  @nn.compact
  def __call__(self, tokens):
    token_embedding = nn.Embed(self.vocab, self.hidden)
    positions = nn.Embed(self.max_len, self.hidden)(jnp.arange(tokens.shape[1]))
    x = token_embedding(tokens) + positions[None]
    for _ in range(self.layers):
      x = GPT2Block(self.hidden)(x)
    return token_embedding.attend(nn.LayerNorm()(x))  # The tied LM head: logits.


# ----- graphs ------------------------------------------------------------------------------
def build(model: str, batch: int = 1, seq_len: int = 128, layers: int = 12
          ) -> tuple[nn.Module, jax.ShapeDtypeStruct]:
  """(module, abstract input) of a zoo model."""
  if model == "resnet50":
    return ResNet50(), jax.ShapeDtypeStruct((batch, 224, 224, 3), jnp.float32)
  if model == "inception_v3":
    return InceptionV3(), jax.ShapeDtypeStruct((batch, 299, 299, 3), jnp.float32)
  if model == "bert_base":
    return BertBase(layers=layers), jax.ShapeDtypeStruct((batch, seq_len), jnp.int32)
  if model == "llama_block":
    return LlamaBlock(), jax.ShapeDtypeStruct((batch, seq_len, 4096), jnp.float32)
  if model == "gpt2_small":
    if seq_len > GPT2Small.max_len:
      raise errors.ConfigError(f"gpt2_small has {GPT2Small.max_len} positions: seq_len "
                               f"{seq_len} is longer")
    return GPT2Small(layers=layers), jax.ShapeDtypeStruct((batch, seq_len), jnp.int32)
  raise errors.ConfigError(f"unknown zoo model {model!r}; known: {', '.join(MODELS)}")


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
  if batch < 1 or seq_len < 1 or layers < 1:
    raise errors.ConfigError(f"batch, seq_len and layers must be positive, got {batch}, "
                             f"{seq_len}, {layers}")
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
  if flag.out:
    from regal_datasets import atomic
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
