"""regal.parallelism.roofline: the roofline costs an imported graph's ops in seconds on a real
accelerator (checked by hand), presets carry each kind's memory in bytes and links in bytes
per time unit, a mix's speeds are the ratio of its kinds' total roofline times, and device
spec files may name kinds."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal.parallelism import hardware, roofline
from regal_datasets import devices, errors, jax_import

UNITS_PER_SECOND = jax_import.NOMINAL_LINK_BYTES_PER_SECOND  # One unit: 10 ps.


def _matmul_then_tanh():
  def fn(w, x):
    return jnp.tanh(x @ w)
  return jax_import.trace_graph(fn, jax.ShapeDtypeStruct((512, 512), jnp.float32),
                                jax.ShapeDtypeStruct((256, 512), jnp.float32))


def test_the_unfused_roofline_is_the_slower_of_compute_and_memory_by_hand():
  graph = _matmul_then_tanh()
  h100 = hardware.KINDS["h100"]
  seconds = roofline.roofline_seconds(graph, "h100")
  matmul, tanh = graph.op_types.index("dot_general"), graph.op_types.index("tanh")
  flops = 2 * 256 * 512 * 512
  moved = 4 * (512 * 512 + 256 * 512 + 256 * 512)
  assert seconds[matmul] == pytest.approx(max(flops / h100.peak_flops,
                                              moved / h100.memory_bandwidth))
  # tanh: 256 x 512 FLOPs against 2 x 512 kB moved: memory-bound.
  assert seconds[tanh] == pytest.approx(2 * 4 * 256 * 512 / h100.memory_bandwidth)


def test_a_preset_costs_ops_as_fused_kernels_by_hand():
  """The matmul and its tanh are one kernel: its FLOPs at the calibrated matmul share, the
  bytes entering (both operands) and leaving it (the tanh's result; the matmul's stays
  inside), one launch, shared by the two ops; the input takes no time."""
  graph = _matmul_then_tanh()
  spec = hardware.resolve(2, None, "h100")
  costed, costed_spec = roofline.recost(graph, spec)
  h100 = hardware.KINDS["h100"]
  matmul_share, memory_share, launch = roofline.KERNEL_COSTS["h100"]
  matmul, tanh = graph.op_types.index("dot_general"), graph.op_types.index("tanh")
  flops = 2 * 256 * 512 * 512 + graph.metadata["op_flops"][tanh]
  moved = 4 * (512 * 512 + 256 * 512 + 256 * 512)
  kernel = max(flops / (h100.peak_flops * matmul_share),
               moved / (h100.memory_bandwidth * memory_share)) + launch
  seconds = costed.compute_cost / UNITS_PER_SECOND
  assert seconds[matmul] + seconds[tanh] == pytest.approx(kernel)
  assert seconds[matmul] > seconds[tanh] > 0  # Shared by each op's own work.
  assert seconds.sum() == pytest.approx(kernel)  # Sources take no time.
  np.testing.assert_array_equal(costed_spec.speed, [1.0, 1.0])
  assert costed_spec.memory_capacity[0] == 80e9
  assert costed_spec.bandwidth[0, 1] == pytest.approx(450e9 / UNITS_PER_SECOND)
  assert costed.metadata["roofline"]["device"] == h100.name


def test_a_gpu_and_host_mix_links_over_pcie_with_the_hosts_speed_from_the_graph():
  spec = hardware.resolve(2, None, "h100+cpu")
  assert spec.num_devices == 3 and spec.kinds == ("h100", "h100", "cpu")
  assert spec.bandwidth[0, 2] == pytest.approx(hardware.PCIE_BANDWIDTH / UNITS_PER_SECOND)
  assert spec.bandwidth[0, 1] == pytest.approx(450e9 / UNITS_PER_SECOND)
  graph = _matmul_then_tanh()
  _, costed = roofline.recost(graph, spec)
  gpu = roofline.kernel_seconds(graph, "h100").sum()
  cpu = roofline.kernel_seconds(graph, "cpu").sum()
  assert costed.speed[2] == pytest.approx(gpu / cpu) and 0 < costed.speed[2] < 0.1


def test_a_device_spec_file_may_name_kinds_and_round_trips(tmp_path):
  spec = hardware.resolve(4, None, "tpu_v5e")
  path = tmp_path / "tpus.json"
  devices.save(spec, str(path))
  assert json.loads(path.read_text())["kinds"] == ["tpu_v5e"] * 4
  assert hardware.load(str(path)) == spec
  path.write_text(json.dumps({"num_devices": 2, "kinds": ["h100", "b300"]}))
  with pytest.raises(errors.DeviceSpecError, match="unknown kind 'b300'"):
    hardware.load(str(path))


def test_the_presets_are_listed_once_and_checked_before_any_work():
  from absl import flags
  values = flags.FlagValues()
  hardware.define_flags(values)
  assert tuple(values["device_preset"].parser.enum_values) == hardware.PRESETS == (
      *devices.TOPOLOGY_PRESETS, *hardware.KINDS, *hardware.MIXES)
  with pytest.raises(errors.DeviceSpecError, match="unknown device preset"):
    hardware.resolve(2, None, "h200")
  with pytest.raises(errors.DeviceSpecError, match="got -2"):
    hardware.resolve(-2, None, "h100")
  # A spec built in code names its kinds freely; costing on it checks them, in one line.
  made = devices.DeviceSpec(memory_capacity=1.0, speed=[1.0], bandwidth=1.0, latency=0.0,
                            kinds=("b300",))
  with pytest.raises(errors.DeviceSpecError, match="unknown kind 'b300'"):
    roofline.recost(_matmul_then_tanh(), made)


def test_a_spec_that_names_kinds_and_speeds_keeps_its_slow_device():
  """Two H100s, the second said to run at a tenth of its speed: the roofline costs keep that
  ratio (they silently made both equal), and the search leaves the slow device idle where it
  can."""
  from regal_datasets import zoo
  from regal.app import methods, optimize_lib
  graph = zoo.model_graph("llama_block", seq_len=64)
  spec = hardware.from_json_dict({"num_devices": 2, "kinds": ["h100", "h100"],
                                 "speed": [1.0, 0.1]})
  work, costed = roofline.recost(graph, spec)
  assert costed.speed[1] == pytest.approx(0.1 * costed.speed[0])
  preset = roofline.recost(graph, hardware.resolve(2, None, "h100"))[1]
  assert preset.speed[0] == preset.speed[1] == costed.speed[0]
  result = optimize_lib.run(graph, spec, methods.RunConfig(evals=600)).result
  on_slow = np.array([op["device"] == 1 for op in result.placement])
  # Its share of the work (ops fused into a neighbour's kernel carry little of it each).
  assert work.compute_cost[on_slow].sum() < 0.05 * work.compute_cost.sum()


def test_a_spec_naming_unlike_kinds_without_speeds_runs_as_their_preset():
  """An H100 and a host CPU named by kinds alone: each runs at its kind's roofline, as the
  h100+cpu preset's devices do (no speed given is each kind's own)."""
  from regal_datasets import zoo
  graph = zoo.model_graph("llama_block", seq_len=64)
  spec = hardware.from_json_dict({"num_devices": 2, "kinds": ["h100", "cpu"]})
  preset = hardware.resolve(1, None, "h100+cpu")
  assert preset.kinds == spec.kinds
  np.testing.assert_allclose(roofline.recost(graph, spec)[1].speed,
                             roofline.recost(graph, preset)[1].speed)
  assert roofline.recost(graph, spec)[1].speed[1] < 0.5


@pytest.mark.parametrize("kind", ["h100", "a100", "v100"])
def test_an_op_computing_in_16_bits_runs_at_the_16_bit_peak(kind):
  """A compute-bound matmul by hand: FLOPs over the dense BF16 (V100: FP16) peak in bfloat16,
  over the 32-bit peak in float32; the memory-bound tanh reads and writes half the bytes."""
  size = 4096
  accelerator = hardware.KINDS[kind]
  seconds = {}
  for dtype in (jnp.float32, jnp.bfloat16):
    graph = jax_import.trace_graph(lambda w, x: jnp.tanh(x @ w),
                                   jax.ShapeDtypeStruct((size, size), dtype),
                                   jax.ShapeDtypeStruct((size, size), dtype))
    seconds[dtype] = dict(zip(graph.op_types, roofline.roofline_seconds(graph, kind)))
  flops = 2 * size ** 3
  assert seconds[jnp.float32]["dot_general"] == pytest.approx(flops / accelerator.peak_flops)
  assert seconds[jnp.bfloat16]["dot_general"] == pytest.approx(
      flops / accelerator.half_peak_flops)
  assert seconds[jnp.bfloat16]["tanh"] == pytest.approx(seconds[jnp.float32]["tanh"] / 2)


def test_sixteen_h100s_are_two_dgx_nodes_over_infiniband():
  spec = hardware.accelerator_spec(hardware.kinds_of("h100+cpu", 16))
  per_second = spec.bandwidth * UNITS_PER_SECOND
  seconds = spec.latency / UNITS_PER_SECOND
  node = np.arange(16) // 8
  same = (node[:, None] == node[None, :]) & ~np.eye(16, dtype=bool)  # A device to itself: free.
  gpus = per_second[:16, :16]
  assert (gpus[same] == 450e9).all() and (seconds[:16, :16][same] == 3e-6).all()
  across = node[:, None] != node[None, :]
  assert (gpus[across] == 50e9).all() and (seconds[:16, :16][across] == 10e-6).all()
  assert (per_second[16, :16] == hardware.PCIE_BANDWIDTH).all()  # The host: PCIe to all.
