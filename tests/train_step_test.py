"""regal_datasets.train_step and the zoo's `--step train`: a training step's matmuls against
analytic counts, phase by phase; parameter counts of the published models; mixed precision;
batch norm on the batch's statistics; the command's errors."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal.parallelism import roofline
from regal_datasets import errors, io, train_step, zoo
from regal_datasets.graph import validate


def _dot_flops_by_phase(graph):
  found = dict.fromkeys(train_step.PHASES, 0.0)
  for op_type, phase, flops in zip(graph.op_types, train_step.phases(graph),
                                    graph.metadata["op_flops"]):
    if op_type == "dot_general":
      found[phase] += flops
  return found


def gpt2_forward_matmul_flops(batch, seq, layers, hidden, vocab):
  """A GPT-2 forward pass's matmul FLOPs, written from the architecture: per token and layer
  QKV (3 H^2), the projection (H^2) and the MLP (8 H^2) multiply-adds; attention's scores and
  weighted sum (2 S H per token, causal masking computes the full square); the tied head."""
  tokens = batch * seq
  return 2 * tokens * (layers * (12 * hidden * hidden + 2 * seq * hidden) + vocab * hidden)


@pytest.fixture(scope="module")
def gpt2_two_layers():  # Attention as its ops, so that every matmul is a dot_general.
  return zoo.model_graph("gpt2_small", batch=2, seq_len=32, layers=2, step="train",
                         attention="materialized")


def test_a_training_step_multiplies_three_times_its_forward_pass(gpt2_two_layers):
  validate(gpt2_two_layers)
  flops = _dot_flops_by_phase(gpt2_two_layers)
  forward = gpt2_forward_matmul_flops(2, 32, 2, 768, 50257)
  assert flops["forward"] == pytest.approx(forward)
  # Backward: a weight gradient and an input gradient per matmul, each as big as the forward.
  assert flops["backward"] == pytest.approx(2 * forward)
  assert flops["optimizer"] == 0 and flops["input"] == 0


def test_remat_recomputes_the_blocks_forward_in_the_backward_pass():
  graph = zoo.model_graph("gpt2_small", batch=2, seq_len=32, layers=2, step="train",
                          remat=True, attention="materialized")
  flops = _dot_flops_by_phase(graph)
  forward = gpt2_forward_matmul_flops(2, 32, 2, 768, 50257)
  head = 2 * 2 * 32 * 50257 * 768  # Outside the blocks: not recomputed.
  # Nor is each block's last matmul (MLP down, 4 H^2 per token): its output only feeds the
  # residual sum, whose gradient does not read it, and JAX drops what is not read.
  down = 2 * 2 * 32 * 4 * 768 * 768
  assert flops["forward"] == pytest.approx(forward)
  assert flops["backward"] == pytest.approx(2 * forward + (forward - head - 2 * down))


def test_the_step_updates_float32_masters_and_computes_in_bfloat16(gpt2_two_layers):
  graph = gpt2_two_layers
  training = graph.metadata["training"]
  phases = np.array(train_step.phases(graph))
  item = roofline.op_item_bytes(graph)
  dots = np.array([t == "dot_general" for t in graph.op_types])
  assert (item[dots & (phases != "optimizer")] == 2).all()  # BF16 matmuls, fwd and bwd.
  assert not (item[phases == "optimizer"] == 2).any()  # The update in FP32.
  # Inputs: FP32 parameters, Adam's two FP32 moments, the step count, the tokens.
  sources = np.flatnonzero(phases == "input")
  held = graph.tensor_size[np.isin(graph.tensor_producer, sources)].sum()
  count = training["parameters"]
  assert held == pytest.approx(4 * count + 8 * count + 4 + 2 * 32 * 4)
  assert training["parameter_bytes"] == 4 * count
  # The phases come in order: forward, backward, optimizer.
  ops = np.arange(graph.num_ops)
  assert ops[phases == "forward"].max() < ops[phases == "backward"].min()
  assert ops[phases == "backward"].max() < ops[phases == "optimizer"].min()


@pytest.mark.parametrize("model,layers,expected", [
    # GPT-2 medium: 354,823,168 (the published checkpoint's count) with 24 layers: embeddings
    # 50257 x 1024 + 1024 x 1024, final LayerNorm 2048, 12,596,224 per layer.
    ("gpt2_medium", 2, 50257 * 1024 + 1024 * 1024 + 2048 + 2 * 12_596_224),
    # Llama-2-7B: 6,738,415,616 with 32 layers; embedding and head 32000 x 4096 each, final
    # norm 4096, per layer 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096.
    ("llama_7b", 1, 2 * 32000 * 4096 + 4096 + 4 * 4096 ** 2 + 3 * 4096 * 11008 + 2 * 4096),
])
def test_published_parameter_counts(model, layers, expected):
  graph = zoo.model_graph(model, batch=1, seq_len=16, layers=layers, step="train")
  assert graph.metadata["training"]["parameters"] == expected


def test_llama_7b_has_its_published_size():
  module, tokens = zoo.build("llama_7b", batch=1, seq_len=16)
  shapes = jax.eval_shape(module.init, jax.random.key(0), tokens)
  count = sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(shapes))
  assert count == 6_738_415_616


def test_resnet_trains_on_the_batchs_statistics():
  graph = zoo.model_graph("resnet50", batch=2, step="train")
  validate(graph)
  flops = _dot_flops_by_phase(graph)  # The head's matmul only: the rest are convolutions.
  assert flops["backward"] == pytest.approx(2 * flops["forward"])
  convolutions = [f for t, f in zip(graph.op_types, graph.metadata["op_flops"])
                  if t == "conv_general_dilated"]
  # ~8.2 GFLOPs per image forward; the backward's two convolutions per forward one (the first
  # layer's input gradient is not needed) make it about 3x.
  assert 2.8 * 2 * 8.2e9 * 0.9 < sum(convolutions) < 3 * 2 * 8.2e9 * 1.1
  # Batch statistics: the new running averages are outputs, labels an input.
  assert any(name.startswith("input[2]") and "batch_stats" in name
             for name in graph.op_names)
  assert any(name.startswith("input[3][1]") for name in graph.op_names)


@pytest.mark.parametrize("kwargs,message", [
    (dict(model="llama_block", step="train"), "llama_block has no training head"),
    (dict(model="gpt2_small", remat=True), "--remat would do nothing here"),
    (dict(model="resnet50", step="backward", remat=True), "--remat would do nothing here"),
    (dict(model="gpt2_small", step="sideways"), "unknown step 'sideways'"),
])
def test_steps_a_model_cannot_take_are_refused(kwargs, message):
  with pytest.raises(errors.ConfigError, match=message):
    zoo.check_size(**kwargs)


def test_a_users_function_trains_too():
  def apply(variables, x):
    params = variables["params"]
    return jnp.tanh(x @ params["w"]) @ params["v"]

  step = train_step.training_step(apply, lambda out, x: jnp.mean(out ** 2))
  params = {"w": jax.ShapeDtypeStruct((8, 16), jnp.float32),
            "v": jax.ShapeDtypeStruct((16, 4), jnp.float32)}
  traced = train_step.trace_training(step, {"params": params},
                                     jax.ShapeDtypeStruct((4, 8), jnp.float32), "mine")
  flops = _dot_flops_by_phase(traced.graph)
  assert flops["forward"] == 2 * 4 * (8 * 16 + 16 * 4)
  # The first matmul's input gradient is not needed: x is data, not a parameter.
  assert flops["backward"] == 2 * 4 * (8 * 16 + 2 * 16 * 4)
  with pytest.raises(errors.ConfigError, match="unknown compute dtype"):
    train_step.training_step(apply, lambda out, x: out, compute_dtype="float8")


def test_the_command_writes_a_training_step(tmp_path):
  out = tmp_path / "g.json"
  done = subprocess.run(
      [sys.executable, "-m", "regal_datasets.zoo", "--model", "gpt2_medium", "--batch", "2",
       "--seq_len", "16", "--layers", "1", "--step", "train", "--out", str(out)],
      capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert done.returncode == 0, done.stderr
  assert "gpt2_medium_b2_s16_train" in done.stdout
  graph = io.load_graph(str(out))
  assert graph.metadata["zoo"]["step"] == "train"
  assert set(train_step.phases(graph)) == set(train_step.PHASES)


def test_fused_attention_is_one_kernel_each_way_with_the_same_forward_flops():
  kwargs = dict(batch=2, seq_len=64, layers=2, step="train")
  fused = zoo.model_graph("gpt2_small", attention="fused", **kwargs)
  plain = zoo.model_graph("gpt2_small", attention="materialized", **kwargs)
  assert zoo.model_graph("gpt2_small", **kwargs).metadata["zoo"]["attention"] == "fused"
  assert fused.op_types.count("fused_attention_forward") == 2
  assert fused.op_types.count("fused_attention_backward") == 2
  def phase_flops(graph, phase):
    return sum(f for f, p in zip(graph.metadata["op_flops"], train_step.phases(graph))
               if p == phase)
  # (Equal up to the mask's few constant ops, which a jitted body counts where XLA folds them.)
  assert phase_flops(fused, "forward") == pytest.approx(phase_flops(plain, "forward"),
                                                        rel=1e-4)
  # The backward kernel recomputes the scores and softmax: one more attention forward.
  (forward_op,) = [f for t, f in zip(fused.op_types, fused.metadata["op_flops"])
                   if t == "fused_attention_forward"][:1]
  assert phase_flops(fused, "backward") == pytest.approx(
      phase_flops(plain, "backward") + 2 * forward_op, rel=1e-3)
  # No [S, S] tensor reaches memory: the kernels' results are [B, S, heads, head_dim].
  shapes = fused.metadata["tensor_shapes"]
  assert not any(len(s) == 4 and s[-1] == s[-2] == 64 for s in shapes)
  with pytest.raises(errors.ConfigError, match="bert_base's attention is not ours to fuse"):
    zoo.check_size("bert_base", step="train", attention="fused")
