"""`regal.optimize --execute`: the winner and the placements it was compared with, run on the
devices, measured next to what the model predicted."""
from __future__ import annotations

from datasets.graph import Graph
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


def summary(execution: dict) -> str:
  rows = execution["assignments"]
  lines = [f"executed on {len(execution['devices'])} devices ({execution['program']} kernels): "
           f"predicted (model units) vs measured (ms, median [p25, p75])"]
  for name, row in rows.items():
    lines.append(f"  {name:<16} predicted {row['predicted']:<12.6g} measured "
                 f"{1e3 * row['median_seconds']:.3f} [{1e3 * row['p25_seconds']:.3f}, "
                 f"{1e3 * row['p75_seconds']:.3f}]")
  return "\n".join(lines)
