r"""The headline numbers: one table computed from the committed reports, quoted verbatim.

  python -m regal_experiments.headlines            # print the table
  python -m regal_experiments.headlines --write    # put it into README.md and experiments/README.md

The table is built from `results/task_graph_table/task_graph_table.json` and
`results/search_targets/search_targets.json` only, and sits in both READMEs between
`<!-- headlines -->` and `<!-- /headlines -->`; `tests/headlines_test.py` fails when either
README says anything else, so the numbers change only when a report is regenerated.
"""
from __future__ import annotations

import json
import os
from typing import Any, Sequence

from regal_datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from absl import flags  # noqa: E402

from regal_datasets import atomic  # noqa: E402
from regal_experiments import report  # noqa: E402

_WRITE = flags.DEFINE_bool("write", False, "Write the table into README.md and "
                           "experiments/README.md instead of printing it.")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READMES = (os.path.join(REPO_ROOT, "README.md"),
           os.path.join(REPO_ROOT, "experiments", "README.md"))
BEGIN, END = "<!-- headlines -->", "<!-- /headlines -->"
SOURCES = ("task_graph_table", "search_targets")
EQUAL_PCT = 0.05  # A gain this small is a tie.
_DOPPLER_NAMES = {"full_transformer_layer_261nodes": "Doppler transformer layer",
                  "transformer_block_215nodes": "Doppler transformer block"}
_SEED_NAMES = {"gp_dfs": "GP + DFS", "critical_path": "critical path",
               "critical_path_doppler": "critical path (Doppler's)", "heft": "HEFT",
               "single_device": "one device"}


def load_reports(results_dir: str = report.RESULTS_DIR) -> dict[str, dict[str, Any]]:
  reports = {}
  for name in SOURCES:
    path = os.path.join(results_dir, name, f"{name}.json")
    try:
      with open(path) as f:
        reports[name] = json.load(f)
    except (OSError, ValueError) as error:
      raise errors.ConfigError(f"{path}: cannot read the report ({error})") from None
  return reports


def _sinnen_row(table: dict) -> str:
  overall = table["summary"]["sinnen"]["overall"]
  ours, cpsat, heft, climb = (overall[m] for m in ("brkga", "cpsat", "heft", "hill_climb"))
  count = ours["instances"]
  cell = lambda row: f"{row['mean_gap_pct']:.2f}% / {100 * row['optimal_share']:.1f}%"  # noqa: E731
  return (f"| Sinnen's {count:,} task graphs, delay model: mean gap to the proven optimum / "
          f"optimal share / s per graph | **{cell(ours)} / {ours['seconds_per_instance']:.2f} s** "
          f"| CP-SAT (2 s per graph) {cell(cpsat)}; HEFT {cell(heft)} | {cell(climb)} (same "
          f"budget) |")


def _doppler_rows(targets: dict) -> list[str]:
  rows = {row["graph"]: row for row in targets["doppler"]}
  lines = []
  for graph, title in _DOPPLER_NAMES.items():
    row = rows[graph]
    seed = row["default"]
    lines.append(f"| {title}, Doppler model, 4 devices | **{seed['objective']:.2f}** | best "
                 f"heuristic ({_SEED_NAMES.get(seed['best_seed_name'], seed['best_seed_name'])})"
                 f" {seed['best_seed']:.2f} | {row['hill_climb_20k']:.2f} (20K evaluations) |")
  small = [rows["ffnn_192nodes"], rows["chain_mm_112nodes"]]
  at_bound = all(r["default"]["objective"] <= r["lower_bound"] * (1 + 1e-6) for r in small)
  lines.append(
      "| Doppler FFNN / ChainMM | " + " / ".join(f"{r['default']['objective']:.2f}" for r in small)
      + (" (both the lower bound)" if at_bound else "") + " | "
      + " / ".join(f"{r['default']['best_seed']:.2f}" for r in small) + " | "
      + " / ".join(f"{r['hill_climb_20k']:.2f}" for r in small) + " |")
  return lines


def _wc_row(targets: dict) -> str:
  rows = targets["wc"]
  gains = [row["gain_vs_hill_climb_pct"] for row in rows]
  equal = [row for row, gain in zip(rows, gains) if abs(gain) < EQUAL_PCT]
  at_bound = sum(row["objective"] <= row["lower_bound"] * (1 + 1e-4) for row in equal)
  worse = sum(gain <= -EQUAL_PCT for gain in gains)
  devices = sorted({int(row["graph"].rsplit("x", 1)[1]) for row in rows})
  return (f"| WC model, Doppler graphs + sharded workloads, "
          f"{' and '.join(str(d) for d in devices)} devices ({len(rows)} graphs) | mean "
          f"**{sum(gains) / len(gains):.1f}% better** than the hill climb; 5% or more on "
          f"{sum(gain >= 5 for gain in gains)}, "
          f"{'never worse' if not worse else f'worse on {worse}'} (equal on {len(equal)}, "
          f"{at_bound} of them at the lower bound) | | 20K evaluations |")


def _synthetic_row(targets: dict) -> str:
  rows = targets["synthetic"]
  ratios = [row["ratio"] for row in rows]
  better = sum(ratio < 1 for ratio in ratios)
  return (f"| REGAL's synthetic test split, sync model, 2 devices, 5K evaluations | "
          f"**{100 * (1 - sum(ratios) / len(ratios)):.1f}% better** than REGAL's local search "
          f"on average, better on {better} of {len(rows)} | | |")


def headline_table(reports: dict[str, dict[str, Any]] | None = None) -> str:
  """The table (with the line naming its sources and their dates), as the READMEs quote it."""
  reports = reports or load_reports()
  table, targets = reports["task_graph_table"], reports["search_targets"]
  dates = sorted({table["date"], targets["date"]})
  lines = [
      f"Default settings, this 2-core CPU, {' and '.join(dates)}; \"ours\" is what "
      f"`regal.optimize` returns with no budget flag. Generated by `python -m "
      f"regal_experiments.headlines` from `experiments/results/task_graph_table/` "
      f"({table['mode']} run) and `experiments/results/search_targets/` ({targets['mode']} "
      f"run).",
      "",
      "| benchmark | ours | best baseline | hill climb (exact model, from the best seed) |",
      "|---|---|---|---|",
      _sinnen_row(table),
      *_doppler_rows(targets),
      _wc_row(targets),
      _synthetic_row(targets),
  ]
  return "\n".join(lines)


def quoted(text: str) -> str | None:
  """What a README holds between the headline markers, None without them."""
  start, end = text.find(BEGIN), text.find(END)
  if start < 0 or end < start:
    return None
  return text[start + len(BEGIN):end].strip("\n")


def with_table(text: str, table: str, path: str) -> str:
  if quoted(text) is None:
    raise errors.ConfigError(f"{path}: no {BEGIN} ... {END} markers to put the table between")
  start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
  return text[:start] + "\n" + table + "\n" + text[end:]


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  table = headline_table()
  if not _WRITE.value:
    print(table)
    return
  # Every target checked before any is written: a README without its markers (or one that
  # cannot be read) leaves every README as it was.
  texts = {}
  for path in READMES:
    with open(path) as f:
      texts[path] = f.read()
  updates = {path: with_table(text, table, path) for path, text in texts.items()}
  for path in READMES:
    atomic.check_output(path, "--write")
  for path, updated in updates.items():
    if updated != texts[path]:
      atomic.write_text(path, updated)
      print(f"wrote {path}")
    else:
      print(f"{path}: already quotes the reports")


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
