"""The files the mistake checks name (`bench.startup` times the mistakes, and
`tests/optimize_inputs_test.py` runs them): graphs a check must refuse, a policy trained for
another model, an ONNX model whose weights are gone, a certificate path that cannot be written.
No flags here, so a test may import it."""
from __future__ import annotations

import json
import os

GRAPHS = {
    "cyclic.json": '{"format": "regal.graph", "version": 1, "name": "cyc", "ops": [{"name": '
                   '"a", "compute_cost": 1}, {"name": "b", "compute_cost": 1}], "tensors": [{'
                   '"producer": "a", "size": 1, "consumers": ["b"]}, {"producer": "b", "size": '
                   '1, "consumers": ["a"]}]}',
    "negative.json": '{"format": "regal.graph", "version": 1, "name": "neg", "ops": [{"name": '
                     '"a", "compute_cost": -1}]}',
    "empty.json": "",
    "tiny.json": '{"format": "regal.graph", "version": 1, "name": "tiny", "ops": [{"name": '
                 '"a", "compute_cost": 1}, {"name": "b", "compute_cost": 1}], "tensors": []}',
}


def write_files(folder: str) -> None:
  """`GRAPHS`; `sync_policy/` (a checkpoint trained on the sync model for 2 devices: its
  metadata is all a check reads); `unweighted.onnx` (its external weights file removed);
  `taken.certificate.json/` (a folder where `datasets.constructed` would write a file)."""
  import msgpack
  import numpy as np
  import onnx
  from onnx import TensorProto, helper, numpy_helper
  for name, text in GRAPHS.items():
    with open(os.path.join(folder, name), "w") as f:
      f.write(text)
  os.makedirs(os.path.join(folder, "sync_policy"))
  with open(os.path.join(folder, "sync_policy", "checkpoint.msgpack"), "wb") as f:
    f.write(msgpack.packb({"format": "regal.checkpoint", "state": {}, "meta": json.dumps(
        {"config_values": {"model": "sync", "num_devices": 2, "objective": "runtime"}})}))
  graph = helper.make_graph(
      [helper.make_node("MatMul", ["x", "w"], ["y"])], "mlp",
      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
      [numpy_helper.from_array(np.zeros((8, 8), np.float32), "w")])
  onnx.save_model(helper.make_model(graph), os.path.join(folder, "unweighted.onnx"),
                  save_as_external_data=True, location="unweighted.data", size_threshold=0)
  os.remove(os.path.join(folder, "unweighted.data"))
  os.makedirs(os.path.join(folder, "taken.certificate.json"))
