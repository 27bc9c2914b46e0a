"""regal.parallelism: a training step's profile, a mesh's time and memory, the configurations.
Checked against what the papers publish: Megatron's two all-reduces per block each way
(Shoeybi et al. 2019), the bytes per parameter of mixed-precision Adam with and without a
distributed optimizer (Megatron-LM's docs: 18 and 6 + 12 / d), the 1F1B bubble (Narayanan
et al. 2021), a kernel's roofline worked by hand."""
import itertools
import json
import time

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal.parallelism import collectives, configurations, plan, profile
from regal.parallelism import hardware, roofline
from regal_datasets import errors, jax_import, train_step, zoo


@pytest.fixture(scope="module")
def gpt2():
  graph = zoo.model_graph("gpt2_small", batch=8, seq_len=64, layers=4, step="train")
  return graph, profile.profile(graph, "h100")


@pytest.mark.parametrize("model,hidden", [("gpt2_small", 768), ("llama_7b", 4096),
                                          ("bert_base", 768)])
def test_tensor_parallelism_all_reduces_twice_per_block_each_way(model, hidden):
  batch, seq = 2, 32
  graph = zoo.model_graph(model, batch=batch, seq_len=seq, layers=3, step="train")
  found = profile.profile(graph, "h100")
  activation = batch * seq * hidden * 2  # [B, S, H] in BF16.
  for block in (1, 2):  # Block 0 also all-reduces the vocabulary-parallel embedding.
    for phase in ("forward", "backward"):
      on = (found.unit == block) & (found.phase == phase) & (found.all_reduce_bytes > 0)
      assert found.all_reduce_bytes[on].tolist() == [activation, activation], (block, phase)


def test_bytes_per_parameter_are_megatrons(gpt2):
  graph, found = gpt2
  count = graph.metadata["training"]["parameters"]
  static = ("parameters_fp32", "optimizer_state", "gradients_fp32", "parameters_bf16")
  plain = plan.estimate(found, plan.Mesh(8))
  assert sum(plain.memory[k] for k in static) == pytest.approx(18 * count)
  distributed = plan.estimate(found, plan.Mesh(8, zero=1))
  assert sum(distributed.memory[k] for k in static) == pytest.approx((6 + 12 / 8) * count)


def test_one_f_one_b_idles_p_minus_1_of_m_plus_p_minus_1_slots(gpt2):
  _, found = gpt2
  for stages, micro in ((2, 2), (2, 8), (4, 4)):
    step = plan.estimate(found, plan.Mesh(1, 1, stages, micro_batches=micro)).time
    busy = step["compute"] + step["tensor_all_reduce"] + step["pipeline_sends"]
    assert step["pipeline_bubble"] / (busy + step["pipeline_bubble"]) == pytest.approx(
        (stages - 1) / (micro + stages - 1))


def test_data_and_tensor_ranks_divide_the_work_they_split(gpt2):
  _, found = gpt2
  one = plan.estimate(found, plan.Mesh(1)).time["compute"]
  assert plan.estimate(found, plan.Mesh(8)).time["compute"] == pytest.approx(one / 8)
  split = found.split & found.scales & np.isin(found.phase, ("forward", "backward"))
  whole = found.scales & ~found.split & np.isin(found.phase, ("forward", "backward"))
  expected = found.seconds[split].sum() / 4 + found.seconds[whole].sum()
  assert plan.estimate(found, plan.Mesh(1, 4)).time["compute"] == pytest.approx(expected)


def test_fused_kernels_by_hand():
  def fn(w, x):
    y = jnp.exp(x @ w) * 2.0 + 1.0  # One kernel: the matmul and its epilogue.
    return (y @ w).sum()  # Another: the second matmul; the sum a third.
  graph = jax_import.trace_graph(fn, jax.ShapeDtypeStruct((256, 256), jnp.float32),
                                 jax.ShapeDtypeStruct((64, 256), jnp.float32))
  phase = np.array(train_step.phases(graph))
  unit = np.zeros(graph.num_ops, int)
  readers = [[] for _ in range(graph.num_tensors)]
  for op, operands in enumerate(graph.metadata["operands"]):
    for tensor in dict.fromkeys(t for t in operands if t is not None):
      readers[tensor].append(op)
  groups = roofline.fusion_groups(graph, phase, unit, readers)
  kernels = {groups[op] for op in range(graph.num_ops) if phase[op] != "input"}
  assert len(kernels) == 3
  seconds = roofline.fused_seconds(graph, "h100", phase, groups, readers)
  h100 = hardware.KINDS["h100"]
  matmul, memory, launch = roofline.KERNEL_COSTS["h100"]
  peak, bandwidth = h100.peak_flops * matmul, h100.memory_bandwidth * memory
  first = max((2 * 64 * 256 * 256 + 3 * 64 * 256) / peak,
              (4 * (256 * 256 + 64 * 256) + 4 * 64 * 256) / bandwidth)
  second = max(2 * 64 * 256 * 256 / peak, 4 * (256 * 256 + 2 * 64 * 256) / bandwidth)
  third = max(64 * 256 / peak, (4 * 64 * 256 + 4) / bandwidth)
  assert seconds.sum() == pytest.approx(first + second + third + 3 * launch)


def test_llama_7b_on_8_h100s():
  started = time.perf_counter()
  graph = zoo.model_graph("llama_7b", batch=8, seq_len=2048, step="train")
  found = profile.profile(graph, "h100")
  answers = {name: configurations.best(found, 8, name)
             for name in configurations.CONFIGURATIONS.names()}
  assert time.perf_counter() - started < 60
  plain = answers["data_parallel"]
  assert not plain.feasible
  assert "optimizer_state 53.9" in plain.overflow and "of 80 GB" in plain.overflow
  found_plan = answers["auto"]
  assert found_plan.feasible and found_plan.memory_bytes <= 80e9
  for name in configurations.BASELINES:
    if answers[name].feasible:
      assert found_plan.step_seconds <= answers[name].step_seconds
  assert found_plan.mesh.describe()


def test_the_search_never_loses_to_a_configuration(gpt2):
  _, found = gpt2
  searched = configurations.best(found, 8, "auto")
  for name in configurations.BASELINES:
    answer = configurations.best(found, 8, name)
    if answer is not None and answer.feasible:
      assert searched.step_seconds <= answer.step_seconds + 1e-12, name


def test_what_cannot_be_priced_is_refused(gpt2):
  _, found = gpt2
  with pytest.raises(errors.ConfigError, match="not a training step"):
    profile.profile(zoo.model_graph("gpt2_small", layers=1, seq_len=8), "h100")
  with pytest.raises(errors.ConfigError, match="batch 8 does not split"):
    plan.estimate(found, plan.Mesh(1, 1, 1, micro_batches=3))
  with pytest.raises(errors.ConfigError, match="5 pipeline stages for 4 blocks"):
    plan.estimate(found, plan.Mesh(1, 1, 5, micro_batches=8))
  with pytest.raises(errors.ConfigError, match="no kernel costs"):
    profile.profile(zoo.model_graph("gpt2_small", layers=1, seq_len=8, step="train"), "tpu")
  assert collectives.FABRICS["h100"].gpus_per_node == 8


def test_what_the_backward_holds_is_what_leaves_a_forward_kernel():
  def apply(variables, x):
    p = variables["params"]
    hidden = x @ p["w1"]  # A matmul's result: held (the GELU's gradient reads it).
    return jax.nn.gelu(hidden, approximate=True) @ p["w2"]  # GELU's inside: recomputed.

  step = train_step.training_step(apply, lambda out, x: jnp.mean(out.astype(jnp.float32) ** 2))
  params = {"w1": jax.ShapeDtypeStruct((64, 256), jnp.float32),
            "w2": jax.ShapeDtypeStruct((256, 64), jnp.float32)}
  graph = train_step.trace_training(step, {"params": params},
                                    jax.ShapeDtypeStruct((32, 64), jnp.float32), "mlp").graph
  found = profile.profile(graph, "h100")
  # BF16: the first matmul's result and the GELU's output (the second matmul's input, read
  # for w2's gradient), and the second matmul's result (the loss's gradient reads it).
  assert found.saved_bytes.sum() == 2 * (32 * 256 + 32 * 256 + 32 * 64)
  assert found.working_bytes.max() > 0


def test_recomputed_blocks_trade_memory_for_time(gpt2):
  graph, plain = gpt2
  made = zoo.how_made(graph)
  recomputing = profile.profile(zoo.model_graph(**{**made, "remat": True}), "h100")
  assert profile.mixed(plain, recomputing, 0) is plain
  mesh = plan.Mesh(1)
  steps = [plan.estimate(profile.mixed(plain, recomputing, k),
                         plan.Mesh(1, recomputed=k)) for k in range(plain.blocks + 1)]
  memory = [s.memory["activations"] for s in steps]
  compute = [s.time["compute"] for s in steps]
  assert all(a > b for a, b in zip(memory, memory[1:]))  # Each recomputed block frees memory,
  assert all(a < b for a, b in zip(compute, compute[1:]))  # and costs its forward again.
  with pytest.raises(errors.ConfigError, match="recomputes 2 blocks; the profile 0"):
    plan.estimate(plain, plan.Mesh(1, recomputed=2))
  assert mesh.describe() == "one device"
  assert "2 blocks recomputed" in plan.Mesh(1, recomputed=2).describe()


@pytest.mark.parametrize("data,tensor,pipeline", [(8, 1, 1), (4, 2, 1), (2, 2, 2), (2, 1, 4)])
def test_sharding_more_never_holds_more(gpt2, data, tensor, pipeline):
  """Each ZeRO stage shards more, so no device holds more; more micro-batches hold fewer
  activations each (1F1B keeps at most p in flight)."""
  _, found = gpt2
  micro = max(pipeline, 1)
  held = [plan.estimate(found, plan.Mesh(data, tensor, pipeline, zero, micro)).memory_bytes
          for zero in plan.ZERO_STAGES]
  assert all(a >= b for a, b in zip(held, held[1:])), held
  activations = [plan.estimate(found, plan.Mesh(data, tensor, pipeline, 0, m)).memory[
      "activations"] for m in (micro, 2 * micro) if found.batch % (data * m) == 0]
  assert all(a >= b for a, b in zip(activations, activations[1:])), activations


def test_a_mesh_on_two_nodes_pays_the_network(gpt2):
  """Sixteen H100s are two nodes: the gradients' all-reduce crosses InfiniBand at 50 GB/s
  where within a node it runs on NVLink at 450 GB/s."""
  graph = zoo.model_graph("gpt2_small", batch=16, seq_len=64, layers=4, step="train")
  found = profile.profile(graph, "h100")
  fabric = collectives.FABRICS["h100"]
  bytes_ = found.parameter_bytes.sum()
  inside = collectives.on_fabric("all_reduce", bytes_, fabric, 8)
  across = collectives.on_fabric("all_reduce", bytes_, fabric, 16)
  assert across > 4 * inside
  one_node = plan.estimate(found, plan.Mesh(8, micro_batches=2))
  two_nodes = plan.estimate(found, plan.Mesh(16))
  assert two_nodes.time["data_sync_exposed"] >= one_node.time["data_sync_exposed"]


def _slowest(block, first, last, sizes):
  """The slowest stage of a split, read off its blocks one by one."""
  ends = np.cumsum(sizes)
  times = [sum(block[end - size:end]) for size, end in zip(sizes, ends)]
  times[0] += first
  times[-1] += last
  return max(times)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(block=st.lists(st.integers(1, 9), min_size=1, max_size=9),
                  first=st.integers(0, 20), last=st.integers(0, 20), data=st.data())
def test_the_balanced_split_is_the_best_contiguous_split(block, first, last, data):
  """Against every composition of the blocks into the stages: none has a faster slowest
  stage (integer seconds: exact)."""
  pipeline = data.draw(st.integers(1, len(block)))
  found = plan.balanced_split(np.array(block, float), float(first), float(last), pipeline)
  assert len(found) == pipeline and min(found) >= 1 and sum(found) == len(block)
  every = [sizes for sizes in itertools.product(range(1, len(block) + 1), repeat=pipeline)
           if sum(sizes) == len(block)]
  assert _slowest(block, first, last, found) == min(_slowest(block, first, last, sizes)
                                                    for sizes in every)


def test_a_pipeline_gives_the_stage_with_the_head_fewer_blocks(gpt2):
  """GPT-2's head and loss (a 50,257-word vocabulary) outweigh a block: balanced, the last of
  four stages holds fewer blocks than the first, and the step is no slower than the even
  split's; `auto` prices both."""
  _, found = gpt2
  balanced = plan.balanced_stages(found, 2)
  assert balanced[0] > balanced[-1] and sum(balanced) == found.blocks
  even = plan.estimate(found, plan.Mesh(1, 1, 2, micro_batches=4))
  uneven = plan.estimate(found, plan.Mesh(1, 1, 2, micro_batches=4, stages=balanced))
  assert uneven.step_seconds < even.step_seconds
  assert f"(blocks {balanced[0]}/{balanced[1]})" in uneven.mesh.describe()
  assert json.loads(json.dumps(uneven.to_json()))["mesh"]["stages"] == list(balanced)
  meshes = list(configurations.CONFIGURATIONS.get("pipeline_data").meshes(
      found, 2, collectives.FABRICS["h100"]))
  assert {mesh.stages for mesh in meshes} == {(), balanced}
  with pytest.raises(errors.ConfigError, match="do not share 4 blocks among 2 stages"):
    plan.estimate(found, plan.Mesh(1, 1, 2, micro_batches=4, stages=(1, 2)))
