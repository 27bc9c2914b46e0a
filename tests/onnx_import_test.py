"""regal_datasets.onnx_import: ONNX models built here with onnx.helper (nothing downloaded) import with
FLOPs equal to a hand count, weights as parameter ops with their bytes, edges as the model
wires them; `.onnx` files load through `regal_datasets.io`; bad files are one-line errors."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from regal_datasets import errors, onnx_import
from regal_datasets import io as graph_io

B, I, H, O = 4, 16, 32, 8  # batch, input, hidden, output


def _weight(name, *shape):
  return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def _mlp() -> onnx.ModelProto:
  nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
           helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
           helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
           helper.make_node("MatMul", ["h2", "w2"], ["y0"], name="fc2"),
           helper.make_node("Add", ["y0", "b2"], ["y"], name="bias2")]
  graph = helper.make_graph(
      nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, I])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, O])],
      [_weight("w1", I, H), _weight("b1", H), _weight("w2", H, O), _weight("b2", O)])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _attention_block(seq=6, dim=8) -> onnx.ModelProto:
  nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
           helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
           helper.make_node("MatMul", ["x", "wv"], ["v"], name="v"),
           helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0], name="kt"),
           helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores"),
           helper.make_node("Softmax", ["scores"], ["probs"], axis=-1, name="softmax"),
           helper.make_node("MatMul", ["probs", "v"], ["attended"], name="attend"),
           helper.make_node("Add", ["attended", "x"], ["residual"], name="residual"),
           helper.make_node("LayerNormalization", ["residual", "gamma", "beta"], ["y"],
                            axis=-1, name="norm")]
  graph = helper.make_graph(
      nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, dim])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, dim])],
      [_weight("wq", dim, dim), _weight("wk", dim, dim), _weight("wv", dim, dim),
       _weight("gamma", dim), _weight("beta", dim)])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_two_layer_mlp_imports_with_its_hand_counted_flops(tmp_path):
  path = str(tmp_path / "mlp.onnx")
  onnx.save(_mlp(), path)
  graph = graph_io.load_graph(path)
  flops = dict(zip(graph.op_names, graph.metadata["op_flops"]))
  assert flops["fc1"] == 2 * B * I * H and flops["fc2"] == 2 * B * H * O
  assert flops["bias1"] == flops["relu"] == B * H and flops["bias2"] == B * O
  assert graph.metadata["total_flops"] == 2 * B * I * H + 2 * B * H + 2 * B * H * O + B * O
  assert graph.name == "mlp" and graph.metadata["source"] == "onnx"
  # Weights are parameter ops whose one tensor holds their bytes (float32).
  params = {n: t for t, n in zip(graph.tensor_producer, graph.op_names) if n.startswith("param:")}
  sizes = {graph.op_names[graph.tensor_producer[t]]: graph.tensor_size[t]
           for t in range(graph.num_tensors)}
  assert sizes["param:w1"] == 4 * I * H and sizes["param:b2"] == 4 * O and len(params) == 4
  assert sizes["fc1"] == 4 * B * H and sizes["input:x"] == 4 * B * I
  np.testing.assert_allclose(graph.compute_cost[graph.op_names.index("fc1")],
                             2 * B * I * H / onnx_import.DEFAULT_FLOPS_PER_BYTE)
  readers = {(graph.op_names[graph.tensor_producer[t]], graph.op_names[c])
             for t, c in zip(graph.data_edge_tensor, graph.data_edge_consumer)}
  assert {("input:x", "fc1"), ("param:w1", "fc1"), ("fc1", "bias1"), ("relu", "fc2"),
          ("fc2", "bias2")} <= readers


def test_an_attention_block_imports_with_its_hand_counted_flops():
  seq, dim = 6, 8
  graph = onnx_import.from_model(_attention_block(seq, dim), "block")
  flops = dict(zip(graph.op_names, graph.metadata["op_flops"]))
  projections = 3 * 2 * seq * dim * dim
  attention = 2 * seq * seq * dim + 2 * seq * seq * dim
  assert flops["q"] + flops["k"] + flops["v"] == projections
  assert flops["scores"] + flops["attend"] == attention
  assert flops["softmax"] == 5 * seq * seq and flops["norm"] == 8 * seq * dim
  assert flops["kt"] == 0 and graph.compute_cost[graph.op_names.index("kt")] > 0  # Movement.
  assert graph.metadata["total_flops"] == (projections + attention + 5 * seq * seq
                                           + seq * dim + 8 * seq * dim)


def test_einsum_costs_a_multiply_add_per_point_of_its_index_space():
  heads, seq, dim = 2, 5, 4
  node = helper.make_node("Einsum", ["q", "k"], ["s"], equation="hqd,hkd->hqk", name="scores")
  graph = helper.make_graph(
      [node], "einsum", [helper.make_tensor_value_info("q", TensorProto.FLOAT, [heads, seq, dim]),
                         helper.make_tensor_value_info("k", TensorProto.FLOAT, [heads, seq, dim])],
      [helper.make_tensor_value_info("s", TensorProto.FLOAT, [heads, seq, seq])])
  imported = onnx_import.from_model(helper.make_model(
      graph, opset_imports=[helper.make_opsetid("", 17)]))
  assert imported.metadata["total_flops"] == 2 * heads * seq * seq * dim


def test_an_operator_without_a_cost_rule_is_warned_about_by_name(caplog):
  model = _mlp()
  model.graph.node.append(helper.make_node("Hardmax", ["y"], ["z"], name="hardmax"))
  model.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", TensorProto.FLOAT, [B, O]))
  onnx_import._warned.discard("Hardmax")
  graph = onnx_import.from_model(model)
  assert "Hardmax" in caplog.text and "data movement" in caplog.text
  assert graph.metadata["op_flops"][graph.op_names.index("hardmax")] == 0


@pytest.mark.parametrize("content", [b"not a model at all \x00\x01", b""])
def test_a_file_that_is_not_onnx_is_one_error(tmp_path, content):
  path = tmp_path / "broken.onnx"
  path.write_bytes(content)
  with pytest.raises(errors.FormatError, match="not an ONNX model"):
    graph_io.load_graph(str(path))


def test_an_unknown_operator_and_a_symbolic_shape_are_one_error_each():
  model = _mlp()
  model.graph.node.append(helper.make_node("NoSuchOp", ["y"], ["z"], name="mystery"))
  with pytest.raises(errors.FormatError, match="not valid.*NoSuchOp"):
    onnx_import.from_model(model)
  dynamic = _mlp()
  dynamic.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
  with pytest.raises(errors.FormatError, match="symbolic dimension"):
    onnx_import.from_model(dynamic)


def _batched_transformer_block(batch=4, seq=6, dim=8) -> onnx.ModelProto:
  nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
           helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
           helper.make_node("MatMul", ["x", "wv"], ["v"], name="v"),
           helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
           helper.make_node("MatMul", ["q", "kt"], ["scores"], name="scores"),
           helper.make_node("Softmax", ["scores"], ["probs"], axis=-1, name="softmax"),
           helper.make_node("MatMul", ["probs", "v"], ["attended"], name="attend"),
           helper.make_node("Add", ["attended", "x"], ["residual"], name="residual"),
           helper.make_node("LayerNormalization", ["residual", "gamma", "beta"], ["normed"],
                            axis=-1, name="norm"),
           helper.make_node("MatMul", ["normed", "w1"], ["up"], name="up"),
           helper.make_node("Relu", ["up"], ["act"], name="relu"),
           helper.make_node("MatMul", ["act", "w2"], ["down"], name="down"),
           helper.make_node("Add", ["down", "normed"], ["y"], name="residual2")]
  graph = helper.make_graph(
      nodes, "transformer_block",
      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, dim])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, dim])],
      [_weight("wq", dim, dim), _weight("wk", dim, dim), _weight("wv", dim, dim),
       _weight("gamma", dim), _weight("beta", dim), _weight("w1", dim, 4 * dim),
       _weight("w2", 4 * dim, dim)])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_models_shard_and_optimize_end_to_end(tmp_path):
  """An MLP and a transformer block: FLOPs by hand, every op with FLOPs split on the batch,
  and `regal.optimize --device_preset h100 --shard auto` beats one device and is no worse
  than data parallelism."""
  from regal.parallelism import shard_imported
  from regal_datasets import op_dims
  from regal.parallelism import hardware
  from regal.app import methods, optimize_lib
  batch, seq, dim = 4, 6, 8
  block = onnx_import.from_model(_batched_transformer_block(batch, seq, dim), "block")
  tokens = batch * seq
  assert block.metadata["total_flops"] == (
      3 * 2 * tokens * dim * dim + 2 * 2 * batch * seq * seq * dim + 5 * batch * seq * seq
      + tokens * dim + 8 * tokens * dim + 2 * 2 * tokens * dim * 4 * dim + tokens * 4 * dim
      + tokens * dim)
  path = str(tmp_path / "mlp.onnx")
  onnx.save(_mlp(), path)
  for graph in (graph_io.load_graph(path), block):
    batch_labels = op_dims.batch_labels(graph)
    assert op_dims.label_flops_share(graph, batch_labels) == 1.0
    split = shard_imported.shard(graph, 4, shard_imported.data_parallel_choice(graph, 4))
    assert sum(split.metadata["op_flops"]) == graph.metadata["total_flops"]
    spec = hardware.resolve(4, None, "h100")
    ours = optimize_lib.run(graph, spec, methods.RunConfig(evals=300,
                                                           setup=methods.Setup(shard="auto")))
    data_parallel = optimize_lib.run(graph, spec, methods.RunConfig(method="data_parallel"))
    assert ours.result.sharding["chosen"]["shards"] > 1
    assert ours.result.objective <= data_parallel.result.objective * (1 + 1e-6)
    assert ours.result.improvement_pct > 0
    assert {row["op"] for row in ours.result.sharding["plan"]} >= {
        op for op, t in enumerate(graph.op_types) if t not in ("input", "param")}


def _torch_flatten() -> onnx.ModelProto:
  """torch.flatten(x, 1) as torch exports it with static shapes: the new shape is computed from
  the input's (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), then a MatMul."""
  nodes = [helper.make_node("Shape", ["x"], ["shape"]),
           helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
           helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
           helper.make_node("Concat", ["batch1", "minus_one"], ["flat_shape"], axis=0),
           helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
           helper.make_node("MatMul", ["flat", "w"], ["y"])]
  constants = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
               numpy_helper.from_array(np.array([0], np.int64), "axes"),
               numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
  graph = helper.make_graph(
      nodes, "flatten", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2, 3, 4])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
      constants + [_weight("w", 24, 5)])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_static_export_whose_shapes_are_computed_from_shapes_imports():
  """The flatten's new shape is data, not a static shape: inference propagates it ([4, 24]),
  and the MatMul after it costs 2 x 4 x 24 x 5."""
  graph = onnx_import.from_model(_torch_flatten(), "flatten")
  matmul = graph.op_types.index("MatMul")
  assert graph.metadata["op_flops"][matmul] == 2 * 4 * 24 * 5


def test_missing_external_weights_are_one_error(tmp_path):
  path = str(tmp_path / "mlp.onnx")
  onnx.save_model(_mlp(), path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="mlp.data", size_threshold=0)
  (tmp_path / "mlp.data").unlink()
  with pytest.raises(errors.FormatError, match="mlp.onnx: its weights cannot be read"):
    graph_io.load_graph(path)


def test_a_folder_of_graphs_includes_its_onnx_files(tmp_path):
  onnx.save(_mlp(), str(tmp_path / "mlp.onnx"))
  (tmp_path / "tiny.json").write_text(graph_io.graph_to_text(onnx_import.from_model(_mlp()),
                                                             "json"))
  (tmp_path / "optima.csv").write_text("name,optimum\n")
  assert [p.rsplit("/", 1)[-1] for p in graph_io.graph_files(str(tmp_path))] == [
      "mlp.onnx", "tiny.json"]


def _embedding_model(batch=4, seq=6, vocab=50, hidden=8) -> onnx.ModelProto:
  """A token embedding as torch exports it (Gather on the table by int64 ids), then a layer."""
  nodes = [helper.make_node("Gather", ["table", "ids"], ["embedded"], axis=0, name="embed"),
           helper.make_node("MatMul", ["embedded", "w"], ["h"], name="fc"),
           helper.make_node("Relu", ["h"], ["y"], name="relu")]
  graph = helper.make_graph(
      nodes, "embedding", [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                         [batch, seq])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, hidden])],
      [_weight("table", vocab, hidden), _weight("w", hidden, hidden)])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _conv_net(batch=4) -> onnx.ModelProto:
  """Two convolutions (the second grouped), a global average pool, a classifier."""
  nodes = [helper.make_node("Conv", ["x", "k1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
           helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
           helper.make_node("Conv", ["r1", "k2"], ["c2"], group=2, name="conv2"),
           helper.make_node("ReduceMean", ["c2"], ["pooled"], axes=[2, 3], keepdims=0,
                            name="pool"),
           helper.make_node("MatMul", ["pooled", "w"], ["y"], name="classifier")]
  graph = helper.make_graph(
      nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 5])],
      [_weight("k1", 6, 3, 3, 3), _weight("b1", 6), _weight("k2", 4, 3, 3, 3),
       _weight("w", 4, 5)])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("model", [_embedding_model, _conv_net])
def test_embeddings_and_convolutions_split_on_the_batch(model):
  """Gather (an embedding) and Conv carry the batch from their data input to their output, so
  data parallelism splits every op with FLOPs, each shard's FLOPs adding to the whole."""
  from regal.parallelism import shard_imported
  from regal_datasets import op_dims
  graph = onnx_import.from_model(model(), "model")
  batch_labels = op_dims.batch_labels(graph)
  assert op_dims.label_flops_share(graph, batch_labels) == 1.0
  choice = shard_imported.data_parallel_choice(graph, 2)
  computing = [op for op, flops in enumerate(graph.metadata["op_flops"]) if flops > 0]
  assert all(choice[op] is not None for op in computing)
  split = shard_imported.shard(graph, 2, choice)
  assert sum(split.metadata["op_flops"]) == pytest.approx(graph.metadata["total_flops"])


def test_a_convolution_splits_its_output_channels_and_sums_its_input_channels():
  from regal_datasets import op_dims
  graph = onnx_import.from_model(_conv_net(), "cnn")
  dims = op_dims.graph_dims(graph)
  conv1, conv2 = (dims[graph.op_names.index(name)] for name in ("conv1", "conv2"))
  x, kernel, bias = conv1.inputs
  out = conv1.outputs[0]
  assert (x[0], kernel[0], bias[0]) == (out[0], out[1], out[1])
  assert x[1] == kernel[1] and conv1.combine == {x[1]: "sum"}
  assert set(conv1.splittable()) == {out[0], out[1], x[1]}  # Not the spatial axes.
  assert set(conv2.splittable()) == {conv2.outputs[0][0]}  # Grouped: the batch alone.


def test_a_model_past_protobufs_2_gb_imports_without_reading_its_weights(tmp_path):
  """A 3 GiB weight in external data (a sparse file: nothing is written or read): the check and
  shape inference run on the file, and the weight's bytes come from its shape and type."""
  rows = 3 * 2 ** 30 // 4 // 1024
  weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[rows, 1024],
                       data_location=TensorProto.EXTERNAL)
  for key, value in (("location", "w.data"), ("offset", "0"), ("length", str(rows * 4096))):
    entry = weight.external_data.add()
    entry.key, entry.value = key, value
  with open(tmp_path / "w.data", "wb") as f:
    f.truncate(rows * 4096)
  graph = helper.make_graph(
      [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], "big",
      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, rows])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1024])], [weight])
  onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
            str(tmp_path / "big.onnx"))
  imported = graph_io.load_graph(str(tmp_path / "big.onnx"))
  weight_tensor = list(imported.tensor_producer).index(imported.op_names.index("param:w"))
  assert imported.tensor_size[weight_tensor] == 3 * 2 ** 30
  assert imported.metadata["op_flops"][imported.op_names.index("fc")] == 2 * 4 * rows * 1024


def _int64(name, value):
  return numpy_helper.from_array(np.array(value, np.int64), name)


def _heads_chain(B=2, S=6, H=8, NH=2) -> onnx.ModelProto:
  """x.view(B * S, H) @ w, then .view(B, S, heads, head_dim).transpose(1, 2), the sizes read
  from x.size() as torch exports them (Shape -> Gather -> Mul / Unsqueeze -> Concat -> Reshape)."""
  nodes = [helper.make_node("Shape", ["x"], ["shape"]),
           helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
           helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
           helper.make_node("Mul", ["b", "s"], ["bs"]),
           helper.make_node("Unsqueeze", ["bs", "axes"], ["bs1"]),
           helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
           helper.make_node("Unsqueeze", ["s", "axes"], ["s1"]),
           helper.make_node("Concat", ["bs1", "hidden"], ["rows_shape"], axis=0),
           helper.make_node("Reshape", ["x", "rows_shape"], ["rows"]),
           helper.make_node("MatMul", ["rows", "w"], ["projected"], name="project"),
           helper.make_node("Concat", ["b1", "s1", "heads", "head_dim"], ["heads_shape"], axis=0),
           helper.make_node("Reshape", ["projected", "heads_shape"], ["split_heads"]),
           helper.make_node("Transpose", ["split_heads"], ["y"], perm=[0, 2, 1, 3])]
  constants = [_int64("zero", 0), _int64("one", 1), _int64("axes", [0]), _int64("hidden", [H]),
               _int64("heads", [NH]), _int64("head_dim", [H // NH]),
               _weight("w", H, H)]
  graph = helper.make_graph(
      nodes, "heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, H])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, NH, S, H // NH])], constants)
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_exported_attention_projection_with_computed_shapes_splits_on_its_batch():
  """The reshapes merge the batch into the rows and split it out again; their target shapes
  are computed from Shape: the data path splits on the batch, the shape arithmetic stays whole,
  FLOPs are conserved."""
  from regal.parallelism import shard_imported
  graph = onnx_import.from_model(_heads_chain(), "heads")
  choice = shard_imported.data_parallel_choice(graph, 2)
  split_types = {graph.op_types[op] for op, label in enumerate(choice) if label is not None}
  assert split_types == {"input", "Reshape", "MatMul", "Transpose"}
  split = shard_imported.shard(graph, 2, choice)
  assert sum(split.metadata["op_flops"]) == graph.metadata["total_flops"]


def test_an_onnx_models_elementwise_ops_fuse_into_their_matmuls():
  """MatMul -> Add -> Relu, MatMul -> Add: two kernels on an H100, so the ops' times add up
  to two launches and two kernels' rooflines, as the same layers traced from JAX do."""
  from regal.parallelism import roofline
  graph = onnx_import.from_model(_mlp(), "mlp")
  seconds = roofline.kernel_seconds(graph, "h100")
  _, _, launch = roofline.KERNEL_COSTS["h100"]
  phase = np.where(roofline.present_before_the_step(graph), "input", "forward")
  readers = roofline.tensor_readers(graph)
  kernels = roofline.fusion_groups(graph, phase, np.zeros(graph.num_ops, int), readers)
  assert len({kernels[op] for op in range(graph.num_ops) if phase[op] != "input"}) == 2
  unfused = roofline.roofline_seconds(graph, "h100").sum()
  assert seconds.sum() < unfused + 5 * launch  # Each op its own kernel would pay five.
  assert seconds.sum() > 2 * launch
