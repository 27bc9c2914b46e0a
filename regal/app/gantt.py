"""Gantt charts of a schedule: one row per device, a thinner row per used link, the critical
path outlined.

Ops are coloured by op type (the types that take the most time get their own colour, the rest
share one) and labelled with their names where the bar has room; transfers are grey bars on
their link's row, in a shorter panel below the devices. The critical path is walked back from
the op that ends last: each step goes to whatever its start waited for (a predecessor's end on
the same device, a transfer's arrival, or the previous op on the device), and those ops and
transfers get a thick outline.
"""
from __future__ import annotations

import os

import numpy as np

from regal_datasets import atomic, errors
from regal_datasets.graph import Graph
from regal.app import units
from regal.scoring.schedule import Schedule

# tab20 without its two greys, which would read as transfers.
_PALETTE_INDICES = tuple(i for i in range(20) if i not in (14, 15))
_OTHER_COLOUR = "0.88"
_TRANSFER_COLOUR = "0.6"
_MAX_LABELS = 400  # Past this many, text costs more to draw than it tells.


def _inputs_by_op(graph: Graph) -> list[list[int]]:
  """Each op's input tensors."""
  inputs: list[list[int]] = [[] for _ in range(graph.num_ops)]
  for tensor, consumer in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()):
    inputs[consumer].append(tensor)
  return inputs


def critical_chain(graph: Graph, placement: np.ndarray, schedule: Schedule,
                   tolerance: float = 1e-9) -> tuple[list[int], list[tuple[int, int]]]:
  """(ops, transfers (tensor, dst)) on the chain of waits that ends with the last op. Every op
  is visited at most once, so schedules with zero-length ops sharing a device and a start time
  (a coarsened answer has hundreds) end the walk instead of circling between them."""
  ends, starts = schedule.op_end, schedule.op_start
  op = int(np.nanargmax(ends))
  inputs = _inputs_by_op(graph)
  control_preds: list[list[int]] = [[] for _ in range(graph.num_ops)]
  for src, dst in zip(graph.control_edge_src.tolist(), graph.control_edge_dst.tolist()):
    control_preds[dst].append(src)
  ops, transfers, visited = [op], [], {op}
  close = lambda a, b: abs(a - b) <= tolerance * max(1.0, abs(b))  # noqa: E731
  while starts[op] > 0:
    start, device = starts[op], placement[op]
    reason = None
    for tensor in inputs[op]:
      producer = int(graph.tensor_producer[tensor])
      remote = placement[producer] != device
      arrival = schedule.transfer_end[tensor, device] if remote else ends[producer]
      if producer not in visited and not np.isnan(arrival) and close(arrival, start):
        reason = ("transfer", int(tensor), producer) if remote else ("op", producer)
        break
    if reason is None:
      for pred in control_preds[op]:
        if pred not in visited and close(ends[pred], start):
          reason = ("op", pred)
          break
    if reason is None:  # The device was busy: the op before it there (one with a length first).
      same = [int(o) for o in np.flatnonzero((placement == device) & np.isclose(ends, start))
              if o not in visited and starts[o] <= start]
      if not same:
        break
      reason = ("op", min(same, key=lambda o: (starts[o] >= start, o)))
    if reason[0] == "transfer":
      transfers.append((reason[1], int(device)))
      op = reason[2]
    else:
      op = reason[1]
    visited.add(op)
    ops.append(op)
  return ops[::-1], transfers[::-1]


def type_colours(graph: Graph, schedule: Schedule
                 ) -> tuple[list[tuple[str, object]], dict[str, object]]:
  """(legend entries (name, colour), {op type: colour}): the types with the most time on the
  chart get a colour of their own; with more types than colours the rest share one, "other"."""
  import matplotlib.pyplot as plt
  palette = [plt.get_cmap("tab20")(i) for i in _PALETTE_INDICES]
  duration = np.nan_to_num(schedule.op_end - schedule.op_start)
  totals: dict[str, float] = {}
  for op_type, seconds in zip(graph.op_types, duration.tolist()):
    totals[op_type] = totals.get(op_type, 0.0) + seconds
  ranked = sorted(totals, key=lambda t: (-totals[t], t))
  own = ranked if len(ranked) <= len(palette) else ranked[:len(palette) - 1]
  colours: dict[str, object] = {t: palette[i] for i, t in enumerate(own)}
  legend = [(t or "op", colours[t]) for t in own]
  if len(own) < len(ranked):
    for op_type in ranked[len(own):]:
      colours[op_type] = _OTHER_COLOUR
    legend.append((f"other ({len(ranked) - len(own)} types)", _OTHER_COLOUR))
  return legend, colours


def draw(graph: Graph, placement: np.ndarray, schedule: Schedule, path: str,
         title: str = "", model: str | None = None,
         time_unit: units.TimeUnit | None = None) -> None:
  """Writes the chart to `path` (.png, .pdf or .svg, by its extension), atomically. Times
  are in `time_unit` (a report's), else the unit `units.time_unit` gives the `model` on this
  graph (ms where its costs are times, Doppler's for the doppler model), else as given."""
  fmt = os.path.splitext(path)[1].lstrip(".").lower()
  if fmt not in atomic.CHART_EXTENSIONS:
    raise errors.ConfigError(f"{path}: a chart is written as "
                             f"{', '.join('.' + e for e in atomic.CHART_EXTENSIONS)}")
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  from matplotlib.patches import Patch

  devices = sorted(set(int(d) for d in placement))
  device_row = {d: i for i, d in enumerate(devices)}
  sent = np.argwhere(~np.isnan(schedule.transfer_start))
  channels = sorted({(int(placement[graph.tensor_producer[t]]), int(d)) for t, d in sent})
  channel_row = {c: i for i, c in enumerate(channels)}
  crit_ops, crit_transfers = critical_chain(graph, placement, schedule)
  crit_ops, crit_transfers = set(crit_ops), set(crit_transfers)
  legend, colours = type_colours(graph, schedule)
  if time_unit is None and model:
    time_unit = units.time_unit(model, graph, float(schedule.makespan))
  in_units = time_unit if time_unit is not None else (lambda times: times)  # noqa: E731
  unit_name = time_unit.name if time_unit is not None else ""
  start = in_units(schedule.op_start)
  width = in_units(schedule.op_end) - start

  device_height, link_height = 0.5, 0.2  # Inches per row: links are many and sparse.
  legend_rows = -(-(len(legend) + 2) // 6)
  heights = [device_height * len(devices) + 0.3] + (
      [link_height * len(channels) + 0.3] if channels else [])
  fig = plt.figure(figsize=(12, sum(heights) + 1.2 + 0.25 * legend_rows))
  grid = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.08)
  ax = fig.add_subplot(grid[0])
  ops = np.arange(graph.num_ops)
  outlined = np.isin(ops, list(crit_ops))
  ax.barh([device_row[int(placement[o])] for o in ops], width, left=start, height=0.8,
          color=[colours[graph.op_types[o]] for o in ops],
          edgecolor=["black" if c else "none" for c in outlined],
          linewidth=[1.2 if c else 0.0 for c in outlined])
  _label_ops(ax, fig, graph, placement, device_row, start, width)
  ax.set_yticks(range(len(devices)), [f"device {d}" for d in devices])
  ax.set_ylim(len(devices) - 0.5, -0.5)
  axis_label = f"time ({unit_name})" if unit_name else "time"
  ax.set_title(title or f"{graph.name}: makespan {float(in_units(schedule.makespan)):.6g}"
               f"{' ' + unit_name if unit_name else ''} (critical path outlined)")
  ax.ticklabel_format(axis="x", style="plain", useOffset=False)
  if channels:
    link_ax = fig.add_subplot(grid[1], sharex=ax)
    src = placement[graph.tensor_producer[sent[:, 0]]]
    critical = [(int(t), int(d)) in crit_transfers for t, d in sent]
    link_start = in_units(schedule.transfer_start[sent[:, 0], sent[:, 1]])
    link_ax.barh([channel_row[(int(a), int(d))] for a, (_, d) in zip(src, sent)],
                 in_units(schedule.transfer_end[sent[:, 0], sent[:, 1]]) - link_start,
                 left=link_start, height=0.8,
                 color=_TRANSFER_COLOUR, edgecolor=["black" if c else "none" for c in critical],
                 linewidth=[1.0 if c else 0.0 for c in critical])
    link_ax.set_yticks(range(len(channels)), [f"link {a}->{b}" for a, b in channels],
                       fontsize="x-small")
    link_ax.set_ylim(len(channels) - 0.5, -0.5)
    link_ax.set_xlabel(axis_label)
    ax.tick_params(labelbottom=False)
  else:
    ax.set_xlabel(axis_label)
  ax.set_xlim(0, max(float(in_units(schedule.makespan)), 1e-30))
  handles = [Patch(color=colour) for _, colour in legend] + [
      Patch(color=_TRANSFER_COLOUR), Patch(facecolor="white", edgecolor="black", linewidth=1.2)]
  fig.legend(handles, [name for name, _ in legend] + ["transfer", "critical path"],
             loc="lower center", ncol=6,
             fontsize="small", frameon=False)
  fig.subplots_adjust(left=0.09, right=0.98, top=1 - 0.5 / fig.get_figheight(),
                      bottom=(0.55 + 0.25 * legend_rows) / fig.get_figheight())
  with atomic.open_for_write(path, "wb") as f:
    fig.savefig(f, format=fmt, dpi=110)
  plt.close(fig)


def _label_ops(ax, fig, graph: Graph, placement, device_row, start, width) -> None:
  """Op names inside the bars wide enough for at least a few characters (cut to fit)."""
  span = float(np.nanmax(start + width)) if graph.num_ops else 0.0
  if span <= 0:
    return
  inches_per_unit = 0.87 * fig.get_figwidth() / span
  chars = np.floor(width * inches_per_unit / 0.055).astype(int)  # ~0.055 in a character.
  roomy = np.flatnonzero(chars >= 4)
  for op in roomy[np.argsort(-width[roomy])][:_MAX_LABELS]:
    name = graph.op_names[op]
    if len(name) > chars[op]:
      name = name[:chars[op] - 1] + "…"
    ax.text(start[op] + width[op] / 2, device_row[int(placement[op])], name, ha="center",
            va="center", fontsize=6, clip_on=True)
