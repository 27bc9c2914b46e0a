"""The Doppler-compatible model: single-device sums and hand-derived multi-device makespans."""
import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets import io as graph_io
from regal_datasets.formats import doppler
from regal.scoring.doppler.reference import doppler_units, simulate_doppler

ALL_ON_ONE = {"chain_mm_112nodes.txt": 4800.28, "ffnn_192nodes.txt": 226.783,
              "transformer_block_215nodes.txt": 388.678,
              "full_transformer_layer_261nodes.txt": 388.977}


@pytest.mark.parametrize("file_name", sorted(ALL_ON_ONE))
def test_all_on_one_device_is_the_sum_of_compute(shared_graphs, file_name):
  graph = graph_io.load_graph(str(shared_graphs / "doppler" / file_name))
  for device in (0, 3):
    schedule = simulate_doppler(graph, devices_lib.homogeneous(4),
                                np.full(graph.num_ops, device))
    assert schedule.makespan == graph.compute_cost.sum()
  assert round(float(doppler_units(schedule.makespan)), 3) == pytest.approx(
      ALL_ON_ONE[file_name], abs=2e-3)


def text(nodes, edges):
  """A Doppler file from (compute, communication) per node and (src, dst) edges."""
  lines = [str(len(nodes)), "", ", ".join(str(s) for s, _ in edges),
           ", ".join(str(d) for _, d in edges)]
  return "\n".join(lines + [f"{c},{m}" for c, m in nodes]) + "\n"


def test_transfer_delay_and_device_queue():
  # 0 -> 1, 0 -> 2. Node 0 (2, comm 8) on dev 0, node 1 (3) on dev 1, node 2 (1) on dev 0.
  graph = doppler.parse(text([(2, 8), (3, 0), (1, 0)], [(0, 1), (0, 2)]))
  s = simulate_doppler(graph, devices_lib.homogeneous(2), np.array([0, 1, 0]))
  assert s.op_start.tolist() == [0, 10, 2] and s.makespan == 13


def test_simultaneous_requests_follow_process_order():
  # Node 0 (cost 0) feeds 1 and 2 on the same device; both ask for it at t = 0 and are served
  # in id order. Node 1 (5) feeds node 3 (1) on the other device with comm 1; 2 costs 5.
  graph = doppler.parse(text([(0, 0), (5, 1), (5, 0), (1, 0)], [(0, 1), (0, 2), (1, 3)]))
  s = simulate_doppler(graph, devices_lib.homogeneous(2), np.array([0, 0, 0, 1]))
  # 1 runs 0-5, 2 runs 5-10; 3 gets 1's output at 6 and runs 6-7: makespan 10.
  assert s.op_start.tolist() == [0, 0, 5, 6] and s.makespan == 10
  # Swap the roles of 1 and 2 by id: the feeder now waits, 1 runs 5-10, 3 runs 11-12.
  swapped = doppler.parse(text([(0, 0), (5, 0), (5, 1), (1, 0)], [(0, 1), (0, 2), (2, 3)]))
  s = simulate_doppler(swapped, devices_lib.homogeneous(2), np.array([0, 0, 0, 1]))
  assert s.makespan == 12


def test_transfers_do_not_contend():
  # Two tensors cross the same link at once: both arrive after their own delay.
  graph = doppler.parse(text([(1, 4), (1, 4), (1, 0), (1, 0)], [(0, 2), (1, 3)]))
  s = simulate_doppler(graph, devices_lib.homogeneous(2), np.array([0, 0, 1, 1]))
  # 0 runs 0-1, 1 runs 1-2; arrivals at 5 and 6; 2 runs 5-6, 3 runs 6-7.
  assert s.op_start.tolist() == [0, 1, 5, 6] and s.makespan == 7


def test_doppler_units():
  assert doppler_units(48002800000000) == np.float32(4800.28)
  assert doppler_units(2267831861248) == np.float32(226.78319)
  assert doppler_units(2267831861248).dtype == np.float32
