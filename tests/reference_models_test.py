"""Hand-checked cases for the reference WC and synchronous models (makespans worked out here)."""
import numpy as np
import pytest
from graph_strategies import dags
from hypothesis import given
from hypothesis import strategies as st

from regal_datasets import devices as devices_lib
from regal_datasets.graph import GraphBuilder
from regal.scoring import performance
from regal.scoring.sync import reference as sync_reference
from regal.scoring.wc import reference as wc_reference


def chain():
  b = GraphBuilder("chain")
  for name, cost in (("a", 1), ("b", 2), ("c", 3)):
    b.add_op(name, cost)
  b.add_data_edge(b.add_tensor("a", 4), "b")
  b.add_data_edge(b.add_tensor("b", 6), "c")
  return b.build()


def diamond():
  # a -> (b, c) -> d; a's one output (2 bytes) is read by b and c.
  b = GraphBuilder("diamond")
  for name, cost in (("a", 1), ("b", 2), ("c", 3), ("d", 1)):
    b.add_op(name, cost)
  ta = b.add_tensor("a", 2)
  b.add_data_edge(ta, "b")
  b.add_data_edge(ta, "c")
  b.add_data_edge(b.add_tensor("b", 1), "d")
  b.add_data_edge(b.add_tensor("c", 1), "d")
  return b.build()


def run(model, graph, devices, placement, priority=None, transfer_priority=None):
  priority = np.zeros(graph.num_ops) if priority is None else np.asarray(priority, float)
  if transfer_priority is None:
    transfer_priority = np.zeros((graph.num_tensors, devices.num_devices))
  simulate = wc_reference.simulate_wc if model == "wc" else sync_reference.simulate_synchronous
  return simulate(graph, devices, np.asarray(placement), priority, transfer_priority)


@pytest.mark.parametrize("model", ["wc", "sync"])
def test_chain_on_one_device(model):
  s = run(model, chain(), devices_lib.homogeneous(1), [0, 0, 0])
  assert s.makespan == 6
  assert s.op_start.tolist() == [0, 1, 3] and s.op_end.tolist() == [1, 3, 6]
  # a's 4 bytes live until b ends; while b runs, both 4 and 6 are resident.
  assert s.peak_memory.tolist() == [10]


def test_chain_across_devices_wc():
  s = run("wc", chain(), devices_lib.homogeneous(2), [0, 1, 0])
  # a 0-1 | send 4 bytes 1-5 | b 5-7 on dev 1 | send 6 bytes 7-13 | c 13-16.
  assert s.makespan == 16
  assert s.transfer_start[0, 1] == 1 and s.transfer_end[0, 1] == 5
  assert s.transfer_end[1, 0] == 13
  # dev 0 holds a's output until its transfer ends, later b's output (received) during c.
  assert s.peak_memory.tolist() == [6, 10]


def test_diamond_wc_and_sync():
  devices = devices_lib.homogeneous(2)
  placement = [0, 0, 1, 0]
  wc = run("wc", diamond(), devices, placement)
  # a 0-1 | dev0: b 1-3 | a's tensor to dev1 1-3 | c 3-6 on dev1 | c's tensor 6-7 | d 7-8.
  assert wc.makespan == 8 and wc.op_start.tolist() == [0, 1, 3, 7]
  # Synchronous, priorities a > b > c > d, transfers below ops: order a, b, (a->1), c, (c->0), d.
  # The transfer of a's tensor waits for dev0 to finish b (t = 3), occupies both devices 3-5.
  sync = run("sync", diamond(), devices, placement, priority=[4, 3, 2, 1],
             transfer_priority=np.full((3, 2), -1.0))
  assert sync.op_start.tolist() == [0, 1, 5, 9] and sync.makespan == 10
  assert sync.transfer_start[0, 1] == 3 and sync.transfer_start[2, 0] == 8


def test_fig10_style_synchronous_blocking():
  # REGAL Fig. 10 in spirit: a long op on the receiver delays a synchronous transfer, while
  # the WC model sends as soon as the tensor exists.
  b = GraphBuilder("fig10")
  b.add_op("p", 1)
  b.add_op("long", 10)
  b.add_op("q", 1)
  b.add_data_edge(b.add_tensor("p", 2), "q")
  g = b.build()
  devices = devices_lib.homogeneous(2)
  # p on dev0, long and q on dev1; long has the higher priority.
  sync = run("sync", g, devices, [0, 1, 1], priority=[3, 2, 1])
  assert sync.transfer_start[0, 1] == 10 and sync.makespan == 13
  wc = run("wc", g, devices, [0, 1, 1], priority=[3, 2, 1])
  assert wc.transfer_start[0, 1] == 1 and wc.makespan == 11


def test_link_contention_and_transfer_priority():
  # A producer on dev0 makes t1 (4 bytes, for a short op) and t2 (4 bytes, for a long op),
  # both on dev1: one link, one transfer at a time, so the order of transfers matters.
  b = GraphBuilder("contention")
  b.add_op("prod", 0)
  b.add_op("short", 1)
  b.add_op("long", 10)
  b.add_data_edge(b.add_tensor("prod", 4), "short")
  b.add_data_edge(b.add_tensor("prod", 4), "long")
  g = b.build()
  devices = devices_lib.homogeneous(2)
  long_first = np.array([[0, 0], [0, 1.0]])  # t2 to dev1 beats t1.
  short_first = np.array([[0, 1.0], [0, 0]])
  # long first: t2 0-4, long 4-14, t1 4-8, short 14-15 -> 15.
  assert run("wc", g, devices, [0, 1, 1], transfer_priority=long_first).makespan == 15
  # short first: t1 0-4, short 4-5, t2 4-8, long 8-18 -> 18.
  assert run("wc", g, devices, [0, 1, 1], transfer_priority=short_first).makespan == 18
  # Equal priorities: the lower tensor id (t1) goes first.
  assert run("wc", g, devices, [0, 1, 1]).makespan == 18


def test_memory_limit_prefers_feasible():
  # Device 1 is twice as fast but holds only 80 bytes; a's output is 100 bytes.
  b = GraphBuilder("memory")
  b.add_op("a", 10)
  b.add_op("c", 10)
  b.add_op("other", 10)
  b.add_data_edge(b.add_tensor("a", 100), "c")
  g = b.build()
  devices = devices_lib.DeviceSpec(memory_capacity=[200, 80], speed=[1, 2], bandwidth=1,
                                   latency=0)
  problem = performance.Problem(g, devices, objective="runtime_under_memory")
  fast = run("wc", g, devices, [1, 1, 0])  # a, c on the fast, small device.
  slow = run("wc", g, devices, [0, 0, 1])
  assert (fast.makespan, slow.makespan) == (10, 20)
  assert fast.peak_memory.tolist() == [0, 100] and slow.peak_memory.tolist() == [100, 0]
  fast_score = performance.objective_value(problem, fast.makespan, fast.peak_memory)
  slow_score = performance.objective_value(problem, slow.makespan, slow.peak_memory)
  assert slow_score == 20 and fast_score > problem.duration_bound() > slow_score


@given(dags(max_ops=10), st.sampled_from(["wc", "sync"]), st.data())
def test_one_device_runs_back_to_back(graph, model, data):
  priority = np.array(data.draw(st.lists(st.floats(0, 1), min_size=graph.num_ops,
                                         max_size=graph.num_ops)))
  s = run(model, graph, devices_lib.homogeneous(1, speed=2.0), np.zeros(graph.num_ops, int),
          priority)
  assert s.makespan == pytest.approx(graph.compute_cost.sum() / 2)
  assert np.isnan(s.transfer_start).all()
