"""Shared ports (issue 83): a GPU's NVLink serves all its peers through one port, so its
transfers to several peers take turns (and so do several peers' transfers to it), as the
three WC engines agree bit for bit; the presets wire NVLink and the network that way, a
device file may, and a model without ports is refused such devices."""
import json

import jax
import numpy as np
import pytest
from graph_strategies import dags, ported_device_sets
from hypothesis import given, settings
from hypothesis import strategies as st

from regal.parallelism import hardware
from regal.scoring import performance
from regal.scoring.sim_graph import build_sim_graph
from regal.scoring.wc import batched as wc_batched
from regal.scoring.wc import native as wc_native
from regal.scoring.wc import reference as wc_reference
from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets.graph import GraphBuilder


def _fan_out():
  """a (device 0) feeds b and c; b on device 1, c on device 2: two 4-byte transfers."""
  builder = GraphBuilder("fan_out")
  a = builder.add_op("a", 1.0)
  t = builder.add_tensor(a, 4.0)
  for name in ("b", "c"):
    builder.add_data_edge(t, builder.add_op(name, 1.0))
  return builder.build()


def _fan_in():
  """a (device 0) and b (device 1) each feed c (device 2)."""
  builder = GraphBuilder("fan_in")
  c_inputs = [builder.add_tensor(builder.add_op(name, 1.0), 4.0) for name in ("a", "b")]
  c = builder.add_op("c", 1.0)
  for t in c_inputs:
    builder.add_data_edge(t, c)
  return builder.build()


def _three(ports):
  return devices_lib.DeviceSpec(memory_capacity=None, speed=np.ones(3), bandwidth=1.0,
                                latency=0.0, ports=ports)


# Two classes the transfers take apart: 0 -> 1 and 0 -> 2 (fan-out), 0 -> 2 and 1 -> 2 (fan-in).
APART = {"fan_out": [[-1, 0, 1], [0, -1, 0], [0, 0, -1]],
         "fan_in": [[-1, 0, 0], [0, -1, 1], [0, 0, -1]]}


@pytest.mark.parametrize("graph, placement", [(_fan_out(), [0, 1, 2]),
                                              (_fan_in(), [0, 1, 2])])
def test_two_transfers_through_one_port_take_turns_by_hand(graph, placement):
  """Own channels: both 4-unit transfers overlap, 1 + 4 + 1 = 6. One port per device: the
  second waits for the first, 1 + 4 + 4 + 1 = 10. Ports of different classes overlap again."""
  placement = np.array(placement)
  priority = np.arange(graph.num_ops, 0, -1, dtype=np.float32)
  transfers = np.ones((graph.num_tensors, 3), np.float32)
  shared = np.where(np.eye(3, dtype=bool), -1, 0)
  by_class = np.array(APART[graph.name])
  for ports, makespan in ((None, 6.0), (shared, 10.0), (by_class, 6.0)):
    devices = _three(ports)
    schedule = wc_reference.simulate_wc(graph, devices, placement, priority, transfers)
    assert schedule.makespan == makespan, ports
    native = wc_native.simulate(wc_native.build_native_graph(graph, devices),
                                placement[None], priority[None], transfers[None])
    assert native[0][0] == makespan


def _inputs(rng, graph, devices, population):
  placement = rng.integers(0, devices.num_devices, (population, graph.num_ops))
  priority = np.round(rng.random((population, graph.num_ops)) * 3).astype(np.float32) / 3
  transfer = (np.round(rng.random((population, graph.num_tensors, devices.num_devices)) * 2)
              / 2).astype(np.float32)
  return placement, priority, transfer


@settings(max_examples=40, deadline=None)
@given(dags(max_ops=12, max_outputs=2), ported_device_sets, st.booleans(),
       st.integers(0, 2 ** 31))
def test_the_native_loop_is_the_reference_bit_for_bit(graph, devices, memory, seed):
  placement, priority, transfer = _inputs(np.random.default_rng(seed), graph, devices, 4)
  makespan, peak, _ = wc_native.simulate_with_completion(
      wc_native.build_native_graph(graph, devices, memory=memory), placement, priority,
      transfer)
  for p in range(len(placement)):
    ref = wc_reference.simulate_wc(graph, devices, placement[p], priority[p], transfer[p],
                                   dtype=np.float32)
    assert makespan[p] == ref.makespan
    if memory:
      np.testing.assert_array_equal(peak[p], ref.peak_memory)


@settings(max_examples=10, deadline=None)  # Each example compiles.
@given(dags(max_ops=12, max_outputs=2), ported_device_sets, st.integers(0, 2 ** 31))
def test_the_jax_model_is_the_reference_bit_for_bit(graph, devices, seed):
  sim = build_sim_graph(graph, devices, shape=(16, 32, 128, 64, 16), max_outputs=2)
  placement, priority, transfer = _inputs(np.random.default_rng(seed), graph, devices, 4)
  pad_ops = sim.op_mask.shape[0] - graph.num_ops
  pad_tensors = sim.tensor_size.shape[0] - graph.num_tensors
  result = jax.device_get(wc_batched.simulate_batch(
      sim, np.pad(placement, ((0, 0), (0, pad_ops))), np.pad(priority, ((0, 0), (0, pad_ops))),
      np.pad(transfer, ((0, 0), (0, pad_tensors), (0, 0)))))
  o, t = graph.num_ops, graph.num_tensors
  for p in range(len(placement)):
    ref = wc_reference.simulate_wc(graph, devices, placement[p], priority[p], transfer[p],
                                   dtype=np.float32)
    np.testing.assert_array_equal(result.op_start[p, :o], ref.op_start)
    np.testing.assert_array_equal(result.transfer_start[p, :t], ref.transfer_start)
    np.testing.assert_array_equal(result.transfer_end[p, :t], ref.transfer_end)
    assert result.makespan[p] == ref.makespan
    np.testing.assert_array_equal(result.peak_memory[p], ref.peak_memory)


def test_presets_wire_nvlink_and_the_network_as_ports():
  spec = hardware.resolve(16, None, "h100+cpu")
  node = np.arange(16) // 8
  gpus = spec.ports[:16, :16]
  same = (node[:, None] == node[None, :]) & ~np.eye(16, dtype=bool)
  assert (gpus[same] == hardware.NVLINK_PORT).all()
  assert (gpus[node[:, None] != node[None, :]] == hardware.NETWORK_PORT).all()
  assert (spec.ports[16] == -1).all() and (spec.ports[:, 16] == -1).all()  # PCIe: its own.
  assert not devices_lib.homogeneous(4).shares_ports


def test_a_device_file_may_name_ports_and_bad_ones_are_refused(tmp_path):
  spec = _three(np.where(np.eye(3, dtype=bool), -1, 0))
  path = tmp_path / "d.json"
  devices_lib.save(spec, str(path))
  assert json.loads(path.read_text())["ports"][0] == [-1, 0, 0]
  assert devices_lib.load(str(path)) == spec and devices_lib.load(str(path)) != _three(None)
  for ports, message in (([[0, 1], [1, 0]], "must be a 3 x 3 matrix"),
                         ([[0, -2, 0]] * 3, "must be -1"), ("abc", "matrix of integers")):
    with pytest.raises(errors.DeviceSpecError, match=message):
      devices_lib.from_json_dict({"num_devices": 3, "ports": ports})


def test_a_model_without_ports_is_refused_such_devices():
  spec = hardware.resolve(2, None, "h100")
  with pytest.raises(errors.ConfigError, match="the sync model gives every device pair"):
    performance.Problem(_fan_out(), spec, model="sync")
  performance.Problem(_fan_out(), spec, model="wc")
