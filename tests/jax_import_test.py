"""regal_datasets.jax_import and regal_datasets.zoo: FLOPs against analytic counts, valid graphs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal_datasets import errors, jax_import, zoo
from regal_datasets.graph import validate

S = jax.ShapeDtypeStruct


def _dot_flops(graph):
  return sorted(f for t, f in zip(graph.op_types, graph.metadata["op_flops"])
                if t == "dot_general")


def mlp(params, x):
  hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
  return jax.nn.softmax(hidden @ params["w2"] + params["b2"])


MLP_PARAMS = {"w1": S((32, 64), jnp.float32), "b1": S((64,), jnp.float32),
              "w2": S((64, 10), jnp.float32), "b2": S((10,), jnp.float32)}


@pytest.mark.parametrize("inline", [True, False])
def test_two_layer_mlp(inline):
  graph = jax_import.trace_graph(mlp, MLP_PARAMS, S((8, 32), jnp.float32), inline=inline)
  validate(graph)
  assert _dot_flops(graph) == sorted([2 * 8 * 32 * 64, 2 * 8 * 64 * 10])
  assert graph.op_types.count("input") == 5
  # Every tensor is sized by its abstract value: the first matmul's output is 8 x 64 floats.
  first_dot = graph.op_types.index("dot_general")
  assert graph.tensor_size[graph.tensor_producer == first_dot].tolist() == [8 * 64 * 4]
  # Cost = FLOPs / flops_per_byte.
  assert graph.compute_cost[first_dot] == pytest.approx(2 * 8 * 32 * 64 / 1000)
  if not inline:  # softmax's custom_jvp stays one op.
    assert "custom_jvp_call" in graph.op_types


def test_the_graph_follows_the_data():
  graph = jax_import.trace_graph(mlp, MLP_PARAMS, S((8, 32), jnp.float32))
  dots = [i for i, t in enumerate(graph.op_types) if t == "dot_general"]
  # The second matmul depends (transitively) on the first.
  reachable, frontier = set(), [dots[0]]
  while frontier:
    op = frontier.pop()
    for succ in graph.successors(op):
      if succ not in reachable:
        reachable.add(int(succ))
        frontier.append(int(succ))
  assert dots[1] in reachable


def test_scan_counts_its_body_length_times():
  def repeated(w, x):
    return jax.lax.scan(lambda h, _: (jnp.tanh(h @ w), None), x, None, length=5)[0]
  graph = jax_import.trace_graph(repeated, S((16, 16), jnp.float32), S((4, 16), jnp.float32))
  assert graph.metadata["total_flops"] == pytest.approx(5 * (2 * 4 * 16 * 16 + 4 * 16))


def test_bert_layer_matmuls_match_analytic_counts():
  graph = zoo.model_graph("bert_base", batch=1, seq_len=128, layers=1)
  validate(graph)
  seq, hidden, heads, head_dim, mlp_width = 128, 768, 12, 64, 3072
  expected = ([2 * seq * hidden * hidden] * 4 + [2 * heads * seq * seq * head_dim] * 2
              + [2 * seq * hidden * mlp_width] * 2)
  assert _dot_flops(graph) == sorted(expected)


@pytest.fixture(scope="module")
def resnet50():
  return zoo.model_graph("resnet50", batch=1)


def test_resnet50_forward_flops(resnet50):
  validate(resnet50)
  # ~4.1 G multiply-adds at 224 x 224, i.e. ~8.2 GFLOPs.
  assert abs(resnet50.metadata["total_flops"] / 8.2e9 - 1) < 0.1
  assert resnet50.op_types.count("conv_general_dilated") == 53


def test_backward_adds_the_gradient_graph():
  forward = jax_import.trace_graph(mlp, MLP_PARAMS, S((8, 32), jnp.float32))
  backward = jax_import.trace_graph(lambda p, x: jax.grad(lambda q: mlp(q, x).sum())(p), MLP_PARAMS,
                             S((8, 32), jnp.float32))
  assert backward.num_ops > forward.num_ops
  assert len(_dot_flops(backward)) == 2 + 3  # Forward 2; backward dW1, dW2 and dX of layer 2.


def test_bad_arguments():
  with pytest.raises(errors.ConfigError, match="unknown zoo model"):
    zoo.model_graph("alexnet")
  with pytest.raises(errors.ConfigError, match="flops_per_byte"):
    jax_import.trace_graph(mlp, MLP_PARAMS, S((8, 32), jnp.float32), flops_per_byte=0)
  assert np.isfinite(zoo.model_graph("llama_block", seq_len=16).compute_cost).all()


def test_a_call_named_fused_stays_one_op_with_its_bodys_flops():
  @jax.jit
  def fused_scale_and_sum(x, w):
    return jnp.tanh(x @ w).sum(axis=-1)
  graph = jax_import.trace_graph(lambda w, x: fused_scale_and_sum(x, w) * 2.0,
                                 S((16, 16), jnp.float32), S((4, 16), jnp.float32))
  assert "fused_scale_and_sum" in graph.op_types and "dot_general" not in graph.op_types
  op = graph.op_types.index("fused_scale_and_sum")
  assert graph.metadata["op_flops"][op] == 2 * 4 * 16 * 16 + 4 * 16 + 4 * 16
  assert graph.tensor_size[graph.tensor_producer == op].tolist() == [4 * 4]
