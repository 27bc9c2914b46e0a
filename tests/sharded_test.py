"""regal_datasets.sharded: valid graphs, meta-op groups, FLOPs that add up to the unsharded work."""
import collections

import pytest

from regal_datasets import errors, sharded
from regal_datasets.graph import validate


@pytest.mark.parametrize("workload", sharded.WORKLOADS)
@pytest.mark.parametrize("num_devices", [1, 2, 4, 8])
def test_every_workload_is_a_valid_graph(workload, num_devices):
  graph = sharded.generate(workload, num_devices)
  validate(graph)
  assert len(graph.metadata["meta_op"]) == len(graph.metadata["meta_op_role"]) == graph.num_ops
  assert set(graph.metadata["meta_op_role"]) <= {"input", "shard", "reduce"}


def test_chain_mm_for_four_devices_has_four_shards_per_matmul():
  graph = sharded.generate("chain_mm", 4)
  shards = collections.Counter(meta for meta, role in zip(graph.metadata["meta_op"],
                                                          graph.metadata["meta_op_role"])
                               if role == "shard")
  for matmul in ("AxB", "DxE", "Cx(DxE)"):
    assert shards[matmul] == 4
  # The shard multiplies do exactly the unsharded work: 3 products of 10000^3 multiply-adds.
  matmul_flops = sum(cost for cost, t in zip(graph.compute_cost, graph.op_types)
                     if t == "matmul") * 1000.0
  assert matmul_flops == pytest.approx(3 * 2 * 10000 ** 3)


@pytest.mark.parametrize("num_devices, grid", [(1, (1, 1, 1)), (2, (1, 2, 1)), (4, (2, 2, 1)),
                                               (8, (2, 2, 2)), (6, (2, 3, 1))])
def test_matmul_grid(num_devices, grid):
  assert sharded.matmul_grid(num_devices) == grid
  pm, pk, pn = sharded.matmul_grid(num_devices, "2d")
  assert pm * pn == num_devices and pk == 1


def test_llama_attention_runs_per_head_group():
  graph = sharded.generate("llama_block", 4, seq_len=256)
  assert graph.op_types.count("attention_scores") == 4
  # Scores of one group of 8 heads: 8 x 256 x 256 floats.
  scores = graph.op_types.index("attention_scores")
  assert graph.tensor_size[graph.tensor_producer == scores].tolist() == [8 * 256 * 256 * 4]


def test_bad_parameters():
  with pytest.raises(errors.ConfigError, match="unknown workload"):
    sharded.generate("resnet", 4)
  for devices in (0, 1025):
    with pytest.raises(errors.DeviceSpecError, match="between 1 and 1024"):
      sharded.generate("ffnn", devices)
  with pytest.raises(errors.ConfigError, match="ffnn_width must be at most 2147483647"):
    sharded.generate("ffnn", 2, ffnn_width=2 ** 31)


def test_cli_writes_a_graph(tmp_path):
  from cli_test import run
  out = tmp_path / "ffnn.json"
  result = run("regal_datasets.sharded", "--workload", "ffnn", "--devices", "2", "--out", str(out))
  assert result.returncode == 0, result.stderr
  from regal_datasets import io as graph_io
  assert graph_io.load_graph(str(out)).metadata["workload"] == "ffnn"
