"""Gantt charts of a schedule: one row per device and per used channel, the critical path marked.

Ops are coloured by op type; transfers are grey bars on their channel's row. The critical
path is walked back from the op that ends last: each step goes to whatever its start waited
for (a predecessor's end on the same device, a transfer's arrival, or the previous op on the
device), and those ops and transfers get a thick outline.
"""
from __future__ import annotations

import os

import numpy as np

from datasets import atomic, errors
from datasets.graph import Graph
from regal.scoring.schedule import Schedule


def critical_path(graph: Graph, placement: np.ndarray, schedule: Schedule,
                  tolerance: float = 1e-9) -> tuple[list[int], list[tuple[int, int]]]:
  """(ops, transfers (tensor, dst)) on the chain of waits that ends with the last op."""
  ends, starts = schedule.op_end, schedule.op_start
  op = int(np.nanargmax(ends))
  ops, transfers = [op], []
  close = lambda a, b: abs(a - b) <= tolerance * max(1.0, abs(b))  # noqa: E731
  while starts[op] > 0:
    start = starts[op]
    reason = None
    for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
      if consumer != op:
        continue
      producer = graph.tensor_producer[tensor]
      arrival = (ends[producer] if placement[producer] == placement[op]
                 else schedule.transfer_end[tensor, placement[op]])
      if not np.isnan(arrival) and close(arrival, start):
        reason = ("transfer", int(tensor), int(producer)) if placement[producer] != placement[op] \
            else ("op", int(producer))
        break
    if reason is None:
      for pred in graph.control_edge_src[graph.control_edge_dst == op]:
        if close(ends[pred], start):
          reason = ("op", int(pred))
          break
    if reason is None:  # The device was busy: the previous op there.
      same = np.flatnonzero((placement == placement[op]) & np.isclose(ends, start))
      same = [o for o in same if o != op and starts[o] <= start]
      if not same:
        break
      reason = ("op", int(same[0]))
    if reason[0] == "transfer":
      transfers.append((reason[1], int(placement[op])))
      op = reason[2]
    else:
      op = reason[1]
    ops.append(op)
  return ops[::-1], transfers[::-1]


def draw(graph: Graph, placement: np.ndarray, schedule: Schedule, path: str,
         title: str = "") -> None:
  """Writes the chart to `path` (.png, .pdf or .svg, by its extension), atomically."""
  fmt = os.path.splitext(path)[1].lstrip(".").lower()
  if fmt not in atomic.CHART_EXTENSIONS:
    raise errors.ConfigError(f"{path}: a chart is written as "
                             f"{', '.join('.' + e for e in atomic.CHART_EXTENSIONS)}")
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  devices = sorted(set(int(d) for d in placement))
  sent = np.argwhere(~np.isnan(schedule.transfer_start))
  channels = sorted({(int(placement[graph.tensor_producer[t]]), int(d)) for t, d in sent})
  rows = [f"device {d}" for d in devices] + [f"link {a}->{b}" for a, b in channels]
  row_of = {name: i for i, name in enumerate(rows)}
  types = sorted(set(graph.op_types)) or [""]
  colours = plt.get_cmap("tab20")
  crit_ops, crit_transfers = critical_path(graph, placement, schedule)
  crit_ops, crit_transfers = set(crit_ops), set(crit_transfers)

  fig, ax = plt.subplots(figsize=(12, 1.0 + 0.45 * len(rows)))
  for op in range(graph.num_ops):
    row = row_of[f"device {int(placement[op])}"]
    ax.barh(row, schedule.op_end[op] - schedule.op_start[op], left=schedule.op_start[op],
            color=colours(types.index(graph.op_types[op]) % 20),
            edgecolor="black" if op in crit_ops else "none",
            linewidth=2.0 if op in crit_ops else 0)
  for tensor, dst in sent:
    src = int(placement[graph.tensor_producer[tensor]])
    row = row_of[f"link {src}->{int(dst)}"]
    critical = (int(tensor), int(dst)) in crit_transfers
    ax.barh(row, schedule.transfer_end[tensor, dst] - schedule.transfer_start[tensor, dst],
            left=schedule.transfer_start[tensor, dst], color="0.6",
            edgecolor="black" if critical else "none", linewidth=2.0 if critical else 0)
  ax.set_yticks(range(len(rows)), rows)
  ax.invert_yaxis()
  ax.set_xlabel("time")
  ax.set_title(title or f"{graph.name}: makespan {float(schedule.makespan):.6g} "
               f"(critical path outlined)")
  handles = [plt.Rectangle((0, 0), 1, 1, color=colours(i % 20)) for i in range(len(types))]
  ax.legend(handles, [t or "op" for t in types], loc="upper right", fontsize="small")
  fig.tight_layout()
  with atomic.open_for_write(path, "wb") as f:
    fig.savefig(f, format=fmt, dpi=110)
  plt.close(fig)
