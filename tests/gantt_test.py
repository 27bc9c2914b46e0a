"""Gantt charts and the critical path they outline."""
import numpy as np

from datasets import devices as devices_lib
from datasets.graph import GraphBuilder
from regal.app import gantt
from regal.scoring import reference_models as rm


def chain_with_side_op():
  b = GraphBuilder("chain")
  for name, cost in (("a", 1), ("b", 2), ("c", 3), ("side", 1)):
    b.add_op(name, cost, op_type="MatMul" if name != "side" else "Add")
  b.add_data_edge(b.add_tensor("a", 4), "b")
  b.add_data_edge(b.add_tensor("b", 6), "c")
  return b.build()


def test_critical_path_follows_transfers_and_devices():
  graph = chain_with_side_op()
  devices = devices_lib.homogeneous(2)
  placement = np.array([0, 1, 0, 0])
  # a 0-1 (dev0), side 1-2 (dev0), a->1 1-5, b 5-7 (dev1), b->0 7-13, c 13-16.
  schedule = rm.simulate_wc(graph, devices, placement, np.array([4.0, 3, 2, 1]),
                            np.zeros((2, 2)))
  assert schedule.makespan == 16
  ops, transfers = gantt.critical_path(graph, placement, schedule)
  assert ops == [0, 1, 2]
  assert transfers == [(0, 1), (1, 0)]


def test_draw_png_and_svg(tmp_path):
  graph = chain_with_side_op()
  devices = devices_lib.homogeneous(2)
  placement = np.array([0, 1, 0, 0])
  schedule = rm.simulate_wc(graph, devices, placement, np.zeros(4), np.zeros((2, 2)))
  for name in ("chart.png", "chart.svg"):
    gantt.draw(graph, placement, schedule, str(tmp_path / name))
  assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert b"<svg" in (tmp_path / "chart.svg").read_bytes()[:500]
