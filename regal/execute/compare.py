"""`regal.optimize --execute`: the winner and the placements it was compared with, run on the
devices, measured next to what the model predicted."""
from __future__ import annotations

import numpy as np

from regal_datasets.graph import Graph
from regal.execute import calibrate_lib
from regal.execute.executor import Executor
from regal.execute.program import Program


def execute_assignments(graph: Graph, program: Program, assignments: dict, devices,
                        repeats: int = 5, mode: str = "async") -> dict:
  """{name: {predicted, measured median / p25 / p75 seconds, ops_on_named_device}} for each
  (placement, order, predicted makespan) in `assignments`, every one checked before any runs."""
  executor = Executor(graph, program, devices, mode)
  for placement, order, _ in assignments.values():
    executor.validate(placement, order)
  rows = {}
  for name, (placement, order, predicted) in assignments.items():
    measured = executor.run(placement, order, repeats=repeats, warmup=1)
    rows[name] = {"predicted": predicted, **measured.to_json_dict(),
                  "ops_on_named_device": bool((measured.op_devices == placement).all())}
  return {"program": program.kind, "devices": [str(d) for d in executor.devices],
          "facts": {k: v for k, v in program.facts.items() if k != "tensor_bytes"},
          "assignments": rows}


def summary(execution: dict, time_unit=None) -> str:
  """One line per placement; `time_unit` (`regal.app.units.TimeUnit`): predictions shown in
  its unit where the graph's costs are times, else in model units; then how well the
  predictions rank the measured times (Spearman's rho over the placements, from three)."""
  rows = execution["assignments"]
  shown = "model units" if time_unit is None or time_unit.scale == 1.0 else time_unit.name
  lines = [f"executed on {len(execution['devices'])} devices ({execution['program']} kernels): "
           f"predicted ({shown}) vs measured (ms, median [p25, p75])"]
  for name, row in rows.items():
    predicted = row["predicted"] if shown == "model units" else float(time_unit(
        row["predicted"]))
    lines.append(f"  {name:<16} predicted {predicted:<12.6g} measured "
                 f"{1e3 * row['median_seconds']:.3f} [{1e3 * row['p25_seconds']:.3f}, "
                 f"{1e3 * row['p75_seconds']:.3f}]")
  predicted = [r["predicted"] for r in rows.values()]
  measured = [r["median_seconds"] for r in rows.values()]
  if len(rows) >= 3 and np.std(predicted) > 0 and np.std(measured) > 0:
    lines.append(f"  rank correlation of predicted and measured: "
                 f"{calibrate_lib.spearman(predicted, measured):.3f} (Spearman, "
                 f"{len(rows)} placements)")
  return "\n".join(lines)
