"""regal.parallelism.shard_imported against slow references: a split graph executed on host devices
(`regal.execute.sharded_jax`, any placement) computes what the unsplit JAX function does, for
random small graphs of matmuls, einsums, elementwise ops and reductions split on random
dimensions; FLOPs are conserved (reduce ops aside); data parallelism splits every op that
has a batch; bad shard counts are one-line errors."""
import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal.parallelism import shard_imported
from regal_datasets import errors, jax_import, op_dims, zoo
from regal.execute import executor, jax_program, sharded_jax

B, S = 4, 3  # Batch and sequence of the random functions (2 shards divide the batch).


def _layer(kind: str, width: int, h, prev, w):
  if kind == "dense":
    return h @ w[:h.shape[-1], :width]
  if kind == "bias_relu":
    return jax.nn.relu(h + w[0, :h.shape[-1]])
  if kind == "attention":
    scores = jnp.einsum("bsf,btf->bst", h, h)
    return jnp.einsum("bst,btf->bsf", jax.nn.softmax(scores, axis=-1), h)
  if kind == "norm":
    return h / jnp.sqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1.0)
  if kind == "seq_sum":
    return h.sum(axis=1, keepdims=True) + h
  if kind == "max_shift":
    return h - h.max(axis=-1, keepdims=True)
  if kind == "transpose":
    half = h.shape[-1] // 2
    return h.reshape(B, S, half, 2).transpose(0, 1, 3, 2).reshape(B, S, 2 * half)
  if kind == "flatten":  # torch's x.view(B * S, F) @ w, then .view(B, S, width).
    rows = h.reshape(B * S, h.shape[-1]) @ w[:h.shape[-1], :width]
    return rows.reshape(B, S, width)
  if kind == "folded_scale":  # A batch norm's scale folded from its weights: weights only.
    return h * (w[0, :h.shape[-1]] * jax.lax.rsqrt(w[1, :h.shape[-1]] ** 2 + 1.0))
  if kind == "split_halves":  # A fused projection cut in pieces (lax.split), then joined.
    first, second = jnp.split(h, [h.shape[-1] // 2], axis=-1)
    return jnp.concatenate([second, first * 2.0], axis=-1)
  return h * prev  # "product": two tensors.


KINDS = ("dense", "bias_relu", "attention", "norm", "seq_sum", "max_shift", "transpose",
         "flatten", "split_halves", "folded_scale", "product")


def _function(kinds, widths):
  def fn(params, x):
    h = prev = x
    for index, (kind, width) in enumerate(zip(kinds, widths)):
      h, prev = _layer(kind, width, h, prev, params[index]), h
      if h.shape != prev.shape:
        prev = h
    return h.sum(axis=-1)
  return fn


def _run_split(traced, graph, shards, choice, placement_seed):
  split = shard_imported.shard(graph, shards, choice)
  program = sharded_jax.sharded_jax_program(traced, split)
  placement = np.random.default_rng(placement_seed).integers(0, 2, split.num_ops)
  values = executor.Executor(split, program, executor.available_devices(2)).tensor_values(
      placement)
  regions = split.metadata["tensor_region"]
  out = traced.outputs[0]
  result = np.zeros(traced.graph.metadata["tensor_shapes"][out], np.float32)
  for tensor in program.outputs:
    original, region = regions[tensor]
    if original == out:
      result[tuple(slice(lo, hi) for lo, hi in region)] = np.asarray(values[tensor])
  return split, result


@hypothesis.settings(max_examples=6, deadline=None)
@hypothesis.given(kinds=st.lists(st.sampled_from(KINDS), min_size=2, max_size=4),
                  widths=st.lists(st.sampled_from((2, 4, 6)), min_size=4, max_size=4),
                  picks=st.lists(st.integers(0, 7), min_size=64, max_size=64),
                  placement_seed=st.integers(0, 100))
def test_a_split_graph_computes_what_the_function_does(kinds, widths, picks, placement_seed):
  params = [jax.ShapeDtypeStruct((8, 8), jnp.float32) for _ in kinds]
  x = jax.ShapeDtypeStruct((B, S, 4), jnp.float32)
  fn = _function(kinds, widths)
  traced = jax_import.trace(fn, params, x)
  graph = traced.graph
  candidates = shard_imported.candidates(graph, 2)
  # Each op: whole, or one of the dimensions 2 divides (contracted ones included).
  choice = [None if not c or picks[op % 64] % (len(c) + 1) == len(c) else
            c[picks[op % 64] % (len(c) + 1)] for op, c in enumerate(candidates)]
  inputs = jax_program.input_values(traced)
  expected = fn(*jax.tree_util.tree_unflatten(jax.tree_util.tree_structure((params, x)),
                                              inputs))
  split, result = _run_split(traced, graph, 2, choice, placement_seed)
  np.testing.assert_allclose(result, np.asarray(expected), rtol=2e-5, atol=2e-5)
  roles = [row[2] for row in split.metadata["shard_of"]]
  kept = sum(f for f, role in zip(split.metadata["op_flops"], roles) if role != "reduce")
  # What the weights alone make is held, computed before the step: not an op of the split.
  held = np.asarray(graph.metadata["op_flops"])[shard_imported.resident_ops(graph)].sum()
  assert kept == pytest.approx(graph.metadata["total_flops"] - held, rel=1e-12)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(factors=st.lists(st.sampled_from((1, 2, 3, 4)), min_size=1, max_size=5),
                  cuts=st.lists(st.booleans(), min_size=8, max_size=8),
                  regroup=st.lists(st.booleans(), min_size=8, max_size=8))
def test_a_reshape_block_is_the_same_run_of_data_on_both_sides(factors, cuts, regroup):
  """Against row-major order itself: for every label a reshape maps (merged or split axes
  included), block k of K on the input is the same set of flat positions as block k on the
  output, for every K that divides the label."""
  def grouped(flags):
    shape, size = [], 1
    for factor, cut in zip(factors, flags):
      size *= factor
      if cut:
        shape.append(size)
        size = 1
    return tuple(shape + [size])
  in_shape, out_shape = grouped(cuts), grouped(regroup)
  dims = op_dims.reshape_dims(in_shape, out_shape)
  small, large = sorted((in_shape[0], out_shape[0]))
  if small > 1 and large % small == 0:  # The batch of [B, S] -> [B * S] (or back) splits.
    assert dims.inputs[0][0] == dims.outputs[0][0] is not None

  def positions(shape, region):
    flat = np.arange(int(np.prod(shape))).reshape(shape)
    return set(flat[tuple(slice(lo, hi) for lo, hi in region)].ravel().tolist())
  for label in dims.splittable():
    size = dims.sizes[label]
    for shards in (k for k in range(2, size + 1) if size % k == 0):
      for block in range(shards):
        read = shard_imported.block_region(dims.inputs[0], in_shape, label, size, block, shards)
        written = shard_imported.block_region(dims.outputs[0], out_shape, label, size, block,
                                              shards)
        assert positions(in_shape, read) == positions(out_shape, written)


def test_a_split_on_every_kind_of_label_matches_the_function():
  """The fixed cases hypothesis may miss: batch, features, heads and a contracted dimension
  with its reduce, in one graph."""
  def fn(params, x):
    q = jnp.einsum("bsf,fhd->bshd", x, params["w"])
    scores = jnp.einsum("bshd,bthd->bhst", q, q)
    y = jnp.einsum("bhst,bthd->bshd", jax.nn.softmax(scores, axis=-1), q)
    return jnp.einsum("bshd,hdf->bsf", y, params["o"]) + x

  params = {"w": jax.ShapeDtypeStruct((4, 2, 2), jnp.float32),
            "o": jax.ShapeDtypeStruct((2, 2, 4), jnp.float32)}
  x = jax.ShapeDtypeStruct((B, S, 4), jnp.float32)
  traced = jax_import.trace(fn, params, x)
  inputs = jax_program.input_values(traced)
  expected = np.asarray(fn(*jax.tree_util.tree_unflatten(
      jax.tree_util.tree_structure((params, x)), inputs)))
  candidates = shard_imported.candidates(traced.graph, 2)
  for position in range(3):  # The first, second and last label of every op.
    choice = [c[min(position, len(c) - 1)] if c else None for c in candidates]
    split, result = _run_split(traced, traced.graph, 2, choice, position)
    np.testing.assert_allclose(result, expected, rtol=2e-5, atol=2e-5)
  assert "reduce" in [row[2] for row in split.metadata["shard_of"]]


def test_data_parallelism_splits_every_op_with_a_batch_and_keeps_weights_resident():
  graph = zoo.model_graph("gpt2_small", batch=4, seq_len=8, layers=1)
  batch = op_dims.batch_labels(graph)
  assert op_dims.label_flops_share(graph, batch) > 0.99999  # All but a scale constant.
  split = shard_imported.shard(graph, 4, shard_imported.data_parallel_choice(graph, 4))
  roles = [row[2] for row in split.metadata["shard_of"]]
  assert "reduce" not in roles
  # Weights are not ops of the split graph: every read of one is a resident read of its
  # reader, of the whole weight (a batch split reads all of a weight), none an edge.
  resident = shard_imported.resident_ops(graph)
  sources = {row[0] for row in split.metadata["shard_of"] if row[2] == "input"}
  assert sources == set(graph.metadata["data_inputs"])
  reads = split.metadata["resident_reads"]
  weights = {t for r in reads for t, _, _ in r}
  assert weights and all(resident[int(graph.tensor_producer[t])] for t in weights)
  for op_reads in reads:
    for tensor, region, size in op_reads:
      if graph.op_types[int(graph.tensor_producer[tensor])] == "input":
        assert [hi - lo for lo, hi in region] == graph.metadata["tensor_shapes"][tensor]
        assert size == graph.tensor_size[tensor]
  # A batch never leaves its shard: every edge between two shards joins the same index.
  shard = [row[1] for row in split.metadata["shard_of"]]
  pairs = {(shard[int(split.tensor_producer[t])], shard[int(c)])
           for t, c in zip(split.data_edge_tensor, split.data_edge_consumer)}
  assert {(a, b) for a, b in pairs if a >= 0 and b >= 0} == {(s, s) for s in range(4)}
  assert sum(split.metadata["op_flops"]) == pytest.approx(graph.metadata["total_flops"])


def test_a_shard_count_no_dimension_takes_is_one_error():
  traced = jax_import.trace(lambda x: jnp.tanh(x), jax.ShapeDtypeStruct((4, 6), jnp.float32))
  shard_imported.check_shards(traced.graph, 2)
  with pytest.raises(errors.ConfigError, match="--shard 5 divides no splittable dimension"):
    shard_imported.check_shards(traced.graph, 5)
  plain = traced.graph.replace(metadata={})
  with pytest.raises(errors.ConfigError, match="records no op shapes"):
    shard_imported.candidates(plain, 2)


def test_a_backward_graph_split_on_its_batch_reduces_its_gradients_and_runs_right():
  """Data parallelism on a training step: weight gradients contract the batch, so each is a
  reduce op over the shards' partials (the all-reduce, as ordinary ops); every gradient
  computed by the split graph equals the unsplit one's."""
  def loss(params, x):
    hidden = jax.nn.gelu(x @ params["w1"] + params["b1"])
    return jnp.sum(jax.nn.softmax(hidden @ params["w2"], axis=-1) ** 2)

  params = {"w1": jax.ShapeDtypeStruct((6, 8), jnp.float32),
            "b1": jax.ShapeDtypeStruct((8,), jnp.float32),
            "w2": jax.ShapeDtypeStruct((8, 4), jnp.float32)}
  traced = jax_import.trace(jax.grad(loss), params, jax.ShapeDtypeStruct((B, 6), jnp.float32))
  graph = traced.graph
  split = shard_imported.shard(graph, 2, shard_imported.data_parallel_choice(graph, 2))
  roles = [row[2] for row in split.metadata["shard_of"]]
  assert roles.count("reduce") >= 3 and roles.count("partial") == 2 * roles.count("reduce")
  whole = jax_program.jax_program(traced)
  reference = executor.execute(graph, whole, np.zeros(graph.num_ops, int), repeats=1,
                               warmup=0).outputs
  program = sharded_jax.sharded_jax_program(traced, split)
  placement = np.random.default_rng(0).integers(0, 2, split.num_ops)
  outputs = executor.execute(split, program, placement, repeats=1, warmup=0,
                             devices=executor.available_devices(2)).outputs
  regions = split.metadata["tensor_region"]
  for tensor in whole.outputs:
    result = np.zeros(reference[tensor].shape, reference[tensor].dtype)
    for block in program.outputs:
      original, region = regions[block]
      if original == tensor:
        result[tuple(slice(lo, hi) for lo, hi in region)] = outputs[block]
    np.testing.assert_allclose(result, reference[tensor], rtol=1e-4,
                               atol=1e-4 * float(np.abs(reference[tensor]).max()))


def test_data_parallelism_moves_nothing_between_shards():
  """`jnp.split` (GPT-2's fused QKV cut in three) has dims, so each shard cuts its own rows
  (it used to gather every shard's rows on one device), and a scale folded from the weights
  alone is held by every shard (it used to be computed on one device and sent to each):
  data parallelism moves nothing between shards, and the split graph computes the
  function."""
  kinds, widths = ("dense", "split_halves", "folded_scale", "dense"), (4, 4, 4, 4)
  params = [jax.ShapeDtypeStruct((8, 8), jnp.float32) for _ in kinds]
  x = jax.ShapeDtypeStruct((B, S, 4), jnp.float32)
  fn = _function(kinds, widths)
  traced = jax_import.trace(fn, params, x)
  graph = traced.graph
  split_op = graph.op_types.index("split")
  assert graph.metadata["op_dims"][split_op] is not None
  choice = shard_imported.data_parallel_choice(graph, 2)
  assert choice[split_op] is not None
  split, result = _run_split(traced, graph, 2, choice, 0)
  shard_of = [row[1] for row in split.metadata["shard_of"]]
  crossing = [(split.op_names[split.tensor_producer[t]], split.op_names[c])
              for t, c in zip(split.data_edge_tensor, split.data_edge_consumer)
              if -1 not in (shard_of[split.tensor_producer[t]], shard_of[c])
              and shard_of[split.tensor_producer[t]] != shard_of[c]]
  assert crossing == []
  # The folded scale is computed from the weights alone: held by each shard, not sent.
  assert shard_imported.resident_ops(graph)[graph.op_types.index("rsqrt")]
  inputs = jax_program.input_values(traced)
  expected = fn(*jax.tree_util.tree_unflatten(jax.tree_util.tree_structure((params, x)),
                                              inputs))
  np.testing.assert_allclose(result, np.asarray(expected), rtol=2e-5, atol=2e-5)
