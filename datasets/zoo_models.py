"""The zoo's architectures as Flax linen modules (`regal_datasets.zoo` traces them; parameters
are only ever shapes, via `jax.eval_shape`). Each module's sizes are its fields; the zoo passes
the position counts it checks a sequence against (`zoo.POSITIONS`). Batch norm uses the
batch's statistics when its `batch_stats` are mutable (a training step), else the running
ones; `remat` wraps each transformer block in `nn.remat` (recomputed in the backward pass)."""
from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp


def batch_norm(module: nn.Module) -> nn.BatchNorm:
  """Batch norm as training runs it when the statistics are being updated."""
  return nn.BatchNorm(use_running_average=not module.is_mutable_collection("batch_stats"))


# ----- ResNet-50 ---------------------------------------------------------------------------
class Bottleneck(nn.Module):
  features: int
  strides: int = 1

  @nn.compact
  def __call__(self, x):
    norm = functools.partial(batch_norm, self)
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
    x = nn.relu(batch_norm(self)(x))
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
    return nn.relu(batch_norm(self)(x))


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
  max_len: int  # Positions.
  layers: int = 12
  hidden: int = 768
  vocab: int = 30522
  lm_head: bool = False  # Masked-LM logits through the tied embedding (pre-training's head).
  remat: bool = False

  @nn.compact
  def __call__(self, tokens):
    embed = nn.Embed(self.vocab, self.hidden)
    positions = nn.Embed(self.max_len, self.hidden)(jnp.arange(tokens.shape[1]))
    x = nn.LayerNorm()(embed(tokens) + positions[None])
    layer = nn.remat(BertLayer) if self.remat else BertLayer
    for _ in range(self.layers):
      x = layer(self.hidden)(x)
    return embed.attend(x) if self.lm_head else x


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
  # In the activations' precision, as Llama's code casts them: else a BF16 step computes
  # attention in FP32.
  cos = jnp.cos(angle)[None, :, None].astype(x.dtype)
  sin = jnp.sin(angle)[None, :, None].astype(x.dtype)
  first, second = x[..., :half], x[..., half:]
  return jnp.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def causal_attention(q, k, v):
  """Causal softmax attention over [batch, seq, heads, head_dim] queries, keys and values."""
  seq, head_dim = q.shape[1], q.shape[-1]
  logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(head_dim)
  mask = jnp.tril(jnp.ones((seq, seq), bool))
  weights = jax.nn.softmax(jnp.where(mask, logits, -1e9), axis=-1)
  return jnp.einsum("bhqk,bkhd->bqhd", weights, v)


@jax.custom_vjp
def fused_attention(q, k, v):
  """`causal_attention` as FlashAttention runs it: one kernel forward and one backward that
  recomputes the scores, so no [S, S] tensor reaches memory (the importer keeps a call named
  `fused_...` whole: `jax_import.is_fused`)."""
  return fused_attention_forward(q, k, v)


@jax.jit
def fused_attention_forward(q, k, v):
  return causal_attention(q, k, v)


@jax.jit
def fused_attention_backward(q, k, v, grad):
  return jax.vjp(causal_attention, q, k, v)[1](grad)


fused_attention.defvjp(lambda q, k, v: (fused_attention(q, k, v), (q, k, v)),
                       lambda saved, grad: fused_attention_backward(*saved, grad))


def attention(fused: bool):
  return fused_attention if fused else causal_attention


class LlamaBlock(nn.Module):
  hidden: int = 4096
  heads: int = 32
  mlp: int = 11008
  fused: bool = False  # FlashAttention-style attention (`fused_attention`).

  @nn.compact
  def __call__(self, x):
    batch, seq, _ = x.shape
    head_dim = self.hidden // self.heads
    h = RMSNorm()(x)
    q, k, v = (nn.Dense(self.hidden, use_bias=False)(h).reshape(batch, seq, self.heads,
                                                                 head_dim) for _ in range(3))
    q, k = rotary(q), rotary(k)
    attended = attention(self.fused)(q, k, v).reshape(batch, seq, self.hidden)
    x = x + nn.Dense(self.hidden, use_bias=False)(attended)
    h = RMSNorm()(x)
    gate = nn.silu(nn.Dense(self.mlp, use_bias=False)(h))
    up = nn.Dense(self.mlp, use_bias=False)(h)
    return x + nn.Dense(self.hidden, use_bias=False)(gate * up)


class Llama(nn.Module):
  """A Llama-2-style decoder: token embedding, blocks, RMSNorm, an untied LM head."""
  layers: int = 32
  hidden: int = 4096
  heads: int = 32
  mlp: int = 11008
  vocab: int = 32000
  remat: bool = False
  fused: bool = False

  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(self.vocab, self.hidden)(tokens)
    block = nn.remat(LlamaBlock) if self.remat else LlamaBlock
    for _ in range(self.layers):
      x = block(self.hidden, self.heads, self.mlp, self.fused)(x)
    return nn.Dense(self.vocab, use_bias=False)(RMSNorm()(x))


# ----- GPT-2 -------------------------------------------------------------------------------
class GPT2Block(nn.Module):
  hidden: int = 768
  heads: int = 12
  fused: bool = False

  @nn.compact
  def __call__(self, x):
    batch, seq, _ = x.shape
    head_dim = self.hidden // self.heads
    q, k, v = jnp.split(nn.Dense(3 * self.hidden)(nn.LayerNorm()(x)), 3, axis=-1)
    q, k, v = (t.reshape(batch, seq, self.heads, head_dim) for t in (q, k, v))
    attended = attention(self.fused)(q, k, v).reshape(batch, seq, self.hidden)
    x = x + nn.Dense(self.hidden)(attended)
    y = nn.Dense(self.hidden)(nn.gelu(nn.Dense(4 * self.hidden)(nn.LayerNorm()(x))))
    return x + y


class GPT2(nn.Module):
  max_len: int  # Positions.
  layers: int = 12
  hidden: int = 768
  heads: int = 12
  vocab: int = 50257
  remat: bool = False
  fused: bool = False

  @nn.compact
  def __call__(self, tokens):
    token_embedding = nn.Embed(self.vocab, self.hidden)
    positions = nn.Embed(self.max_len, self.hidden)(jnp.arange(tokens.shape[1]))
    x = token_embedding(tokens) + positions[None]
    block = nn.remat(GPT2Block) if self.remat else GPT2Block
    for _ in range(self.layers):
      x = block(self.hidden, self.heads, self.fused)(x)
    return token_embedding.attend(nn.LayerNorm()(x))  # The tied LM head: logits.


# ----- graphs ------------------------------------------------------------------------------
