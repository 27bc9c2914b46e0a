"""Gantt charts and the critical path they outline."""
import signal

import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets.graph import GraphBuilder
from regal.app import gantt
from regal.scoring.wc import reference as wc_reference
from regal.scoring.schedule import Schedule


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
  schedule = wc_reference.simulate_wc(graph, devices, placement, np.array([4.0, 3, 2, 1]),
                                      np.zeros((2, 2)))
  assert schedule.makespan == 16
  ops, transfers = gantt.critical_chain(graph, placement, schedule)
  assert ops == [0, 1, 2]
  assert transfers == [(0, 1), (1, 0)]


def test_draw_png_and_svg(tmp_path):
  graph = chain_with_side_op()
  devices = devices_lib.homogeneous(2)
  placement = np.array([0, 1, 0, 0])
  schedule = wc_reference.simulate_wc(graph, devices, placement, np.zeros(4), np.zeros((2, 2)))
  import matplotlib
  gantt.draw(graph, placement, schedule, str(tmp_path / "chart.png"))
  assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  with matplotlib.rc_context({"svg.fonttype": "none"}):  # Text as text, to read it back.
    gantt.draw(graph, placement, schedule, str(tmp_path / "chart.svg"))
  svg = (tmp_path / "chart.svg").read_text()
  # A row per device used, a link row per direction data crossed, the makespan in the title,
  # op names in bars wide enough and the legend's op types.
  sent = {(int(placement[graph.tensor_producer[t]]), int(d))
          for t, d in np.argwhere(~np.isnan(schedule.transfer_start))}
  assert sent == {(0, 1), (1, 0)}
  for text in ("device 0", "device 1", "link 0-&gt;1", "link 1-&gt;0",
               f"makespan {float(schedule.makespan):.6g}", ">side<", ">MatMul<", ">Add<",
               ">critical path<"):
    assert text in svg, text
  assert "device 2" not in svg


def _zero_length_ops_on_a_busy_device():
  """b runs 0-2 on device 0; z1 and z2 take no time at 2 (as a coarsened answer's grouped
  ops do); `last` has no inputs and starts at 2 only because the device was busy."""
  b = GraphBuilder("zeros")
  for name, cost in (("z1", 0), ("z2", 0), ("b", 2), ("last", 1)):
    b.add_op(name, cost)
  graph = b.build()
  nan = np.full((0, 1), np.nan)
  schedule = Schedule(makespan=np.float64(3), peak_memory=np.zeros(1),
                      op_start=np.array([2.0, 2.0, 0.0, 2.0]),
                      op_end=np.array([2.0, 2.0, 2.0, 3.0]), transfer_start=nan,
                      transfer_end=nan)
  return graph, np.zeros(4, int), schedule


def test_critical_path_ends_among_zero_length_ops_sharing_a_device_and_start():
  """The walk circled between z1 and z2 forever (each "ended" when the other started)."""
  graph, placement, schedule = _zero_length_ops_on_a_busy_device()
  previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the walk did not end"))
  signal.alarm(10)
  try:
    ops, transfers = gantt.critical_chain(graph, placement, schedule)
    from_z2 = gantt.critical_chain(graph, placement, schedule._replace(
        op_end=np.array([2.0, 2.0, 2.0, 2.0]), makespan=np.float64(2)))
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
  assert ops == [2, 3] and transfers == []  # last waited for b, the op with a length.
  assert len(set(from_z2[0])) == len(from_z2[0])  # No op twice.


def test_chart_names_every_mark_and_the_units(tmp_path):
  """Legend entries for transfers and the critical path, the rarest op types grouped once
  colours run out, op names on wide bars, times in the unit given."""
  b = GraphBuilder("many_types")
  for k in range(24):
    b.add_op(f"w{k}", 100.0 + k, op_type=f"type{k}")
    if k:
      b.add_data_edge(b.add_tensor(f"w{k - 1}", 50.0), f"w{k}")
  graph = b.build()
  placement = np.arange(24) % 2
  schedule = wc_reference.simulate_wc(graph, devices_lib.homogeneous(2), placement,
                                      -np.arange(24.0), np.zeros((23, 2)))
  path = tmp_path / "chart.svg"
  gantt.draw(graph, placement, schedule, str(path), model="doppler")
  svg = path.read_text()
  for text in ("transfer", "critical path", "other (7 types)", "time (Doppler units)",
               "<!-- w23 -->", "type23"):
    assert text in svg, text
  assert "type0<" not in svg  # The shortest types share "other": 17 colours and a grey.
  legend, colours = gantt.type_colours(graph, schedule)
  assert len(legend) == 18 and len({str(c) for c in colours.values()}) == 18


def test_a_coarsened_zoo_model_is_charted(tmp_path):
  """The reported case in small: a coarsened BERT layer's answer holds groups of zero-cost ops
  sharing a device and a start time; its chart is drawn (the walk through them ends)."""
  from regal_datasets import zoo
  from regal.app import methods, optimize_lib
  graph = zoo.model_graph("bert_base", layers=1, seq_len=16)
  report = optimize_lib.run(graph, devices_lib.homogeneous(4),
                            methods.RunConfig(method="heft", setup=methods.Setup(coarsen="12")))
  ends = report.schedule.op_end
  zero = np.flatnonzero(graph.compute_cost == 0)
  shared = {(int(report.placement[o]), float(ends[o])) for o in zero}
  assert len(shared) < len(zero)  # Zero-length ops share a device and an instant.
  previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the chart never ended"))
  signal.alarm(60)
  try:
    gantt.draw(graph, report.placement, report.schedule, str(tmp_path / "c.png"))
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
  assert (tmp_path / "c.png").stat().st_size > 0
