"""What every experiment command writes: a Markdown report headed by the exact command, the
date, the mode and the hardware, the same figures as JSON, and its plots, all under one folder
of `experiments/results/` (written atomically, so a killed run leaves the previous report)."""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from typing import Any

from regal_datasets import atomic

RESULTS_DIR = os.path.join(os.path.dirname(__file__), "results")


def cpu_model() -> str:
  """The CPU's model name where the system says it (Linux), else the architecture: timings
  from two machines of one architecture can differ by 2x."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return f"{platform.machine()}, {line.split(':', 1)[1].strip()}"
  except OSError:
    pass
  return platform.machine()


def hardware() -> str:
  import jax
  devices = jax.devices()
  kinds = sorted({d.device_kind for d in devices})
  return (f"{os.cpu_count()} CPU cores ({cpu_model()}), JAX {jax.__version__} on "
          f"{devices[0].platform} ({len(devices)} device{'s' * (len(devices) > 1)}: "
          f"{', '.join(kinds)})")


def command_line(module: str) -> str:
  return f"python -m {module} " + " ".join(sys.argv[1:])


def header(title: str, module: str, mode: str) -> tuple[list[str], dict[str, Any]]:
  """(Markdown lines, JSON fields) naming how the figures below were made."""
  facts = {"command": command_line(module).strip(), "date": datetime.date.today().isoformat(),
           "mode": mode, "hardware": hardware()}
  lines = [f"# {title}", "", f"- command: `{facts['command']}`", f"- date: {facts['date']}",
           f"- mode: {mode}", f"- hardware: {facts['hardware']}", ""]
  return lines, facts


def write(out_dir: str, name: str, markdown_lines: list[str], data: dict[str, Any]) -> str:
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, name + ".md")
  atomic.write_text(path, "\n".join(markdown_lines).rstrip() + "\n")
  atomic.write_text(os.path.join(out_dir, name + ".json"),
                    json.dumps(data, indent=1, sort_keys=True) + "\n")
  return path


def publish(out_dir: str, name: str, header_lines: list[str], body: list[str],
            data: dict[str, Any]) -> str:
  """Writes the report (header + body) and its JSON, and prints the body for the terminal."""
  path = write(out_dir, name, header_lines + body, data)
  print("\n".join(body))
  print(f"wrote {path}")
  return path


def save_figure(figure, path: str) -> None:
  """Saves a matplotlib figure through a temporary file (atomic like the reports)."""
  import matplotlib.pyplot as plt
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  temporary = path + ".tmp.png"
  figure.savefig(temporary, dpi=110, bbox_inches="tight")
  plt.close(figure)
  os.replace(temporary, path)


def markdown_table(header_cells: list[str], rows: list[list[Any]]) -> list[str]:
  def cell(value):
    if value is None:
      return "-"
    if isinstance(value, float):
      return f"{value:.4g}"
    return str(value)
  return (["| " + " | ".join(header_cells) + " |", "|" + "---|" * len(header_cells)]
          + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows])
