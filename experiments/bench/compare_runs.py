r"""Whole `regal.optimize` runs of a git revision against the working tree, in turns.

  python -m regal_experiments.bench.compare_runs --baseline 214f833      # 4 rounds of each job
  python -m regal_experiments.bench.compare_runs --baseline HEAD --quick   # the default job once

The revision is checked out in a temporary git worktree and run with it first on
`PYTHONPATH`, one process per run, alternating with the working tree so both meet the same
load, and which side goes first alternates by round too (the second run of a pair measured up
to 5% slower, whichever side it was). Each job (`JOBS`: the default one, Doppler's FFNN on 4 devices, the sharded Llama layer
on 8 devices in two NVLink groups under the default 10 s limit) reports, per side, the median
compile and search seconds, evaluations per second of search, and every answer (a change that
means to keep the search the same must keep them equal).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import errors, sharded  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_experiments import command, report  # noqa: E402

_BASELINE = flags.DEFINE_string("baseline", None, "The git revision to compare with.",
                                required=True)
_QUICK = flags.DEFINE_bool("quick", False, "The default job once.")
_ROUNDS = flags.DEFINE_integer("rounds", 4, "Runs of each job on each side, alternating.",
                               lower_bound=1, upper_bound=100)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "compare_runs"),
                           "Where the report goes.")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOPPLER_FFNN = os.path.join(REPO, "..", "shared", "graphs", "doppler", "ffnn_192nodes.txt")


def jobs(scratch: str) -> dict[str, list[str]]:
  llama = os.path.join(scratch, "llama_layer_x8.json")
  graph_io.save_graph(sharded.generate("llama_layer", 8), llama)
  return {"default": [],
          "doppler ffnn, 4 devices": ["--graph", DOPPLER_FFNN, "--devices", "4", "--model",
                                      "doppler"],
          "sharded llama layer, 8 devices (10 s limit)": [
              "--graph", llama, "--device_preset", "nvlink_two_groups"]}


def run(tree: str, args: list[str], out: str) -> dict:
  # The file's object, not `Result`: a baseline tree may write another version of it.
  data, _ = command.run_optimize(args, out, env=dict(os.environ, PYTHONPATH=tree), cwd=tree)
  return {"compile": data["wall_seconds"]["compile"], "search": data["wall_seconds"]["search"],
          "evaluations": data["evaluations"], "objective": data["objective"]}


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("rounds",))
  if not os.path.isfile(DOPPLER_FFNN):
    raise errors.ConfigError(f"reference graph not found: {DOPPLER_FFNN}")
  scratch = tempfile.mkdtemp(prefix="regal-compare-runs-")
  baseline_tree = os.path.join(scratch, "baseline")
  made = subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", baseline_tree,
                         _BASELINE.value], capture_output=True, text=True)
  if made.returncode != 0:
    raise errors.ConfigError(f"--baseline {_BASELINE.value}: {made.stderr.strip()}")
  try:
    todo = jobs(scratch)
    if _QUICK.value:
      todo = {"default": todo["default"]}
    sides = {f"baseline ({_BASELINE.value})": baseline_tree, "working tree": REPO}
    rows = {job: {side: [] for side in sides} for job in todo}
    for round_ in range(1 if _QUICK.value else _ROUNDS.value):
      for job, args in todo.items():
        for side, tree in list(sides.items())[::1 if round_ % 2 == 0 else -1]:
          row = run(tree, args, os.path.join(scratch, "result.json"))
          rows[job][side].append(row)
          print(f"{job}, round {round_ + 1}, {side}: compile {row['compile']:.2f} s, search "
                f"{row['search']:.2f} s, {row['evaluations']} evaluations, objective "
                f"{row['objective']:.6g}", flush=True)
  finally:
    subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", baseline_tree],
                   capture_output=True)
    subprocess.run(["rm", "-rf", scratch])
  table = []
  baseline_side, tree_side = sides
  for job, by_side in rows.items():
    ratio = statistics.median(t["search"] / b["search"]
                              for b, t in zip(by_side[baseline_side], by_side[tree_side]))
    for side, runs in by_side.items():
      table.append([job, side, statistics.median(r["compile"] for r in runs),
                    statistics.median(r["search"] for r in runs),
                    statistics.median(r["evaluations"] / r["search"] for r in runs),
                    f"{ratio:.3f}" if side == tree_side else "",
                    ", ".join(f"{v:.6g}" for v in sorted({r["objective"] for r in runs}))])
  same = all(len({r["objective"] for side in by_side.values() for r in side}) == 1
             for by_side in rows.values())
  lines, facts = report.header("A revision's regal.optimize runs against the working tree's",
                               "regal_experiments.bench.compare_runs",
                               "quick" if _QUICK.value else "full")
  body = [f"One process per run, the two sides in turns (which goes first alternating by "
          f"round), medians of {1 if _QUICK.value else _ROUNDS.value} run(s); search ratio: "
          f"the median of each round's working tree / baseline search seconds:", ""]
  body += report.markdown_table(["job", "side", "compile s", "search s",
                                 "evaluations per search s", "search ratio", "answers"], table)
  body += ["", f"Verdict: the two sides' answers are "
           f"{'the same on every job' if same else 'NOT the same'}."]
  report.publish(_OUT.value, "compare_runs", lines, body,
                 {**facts, "baseline": _BASELINE.value, "runs": rows, "answers_agree": same})


if __name__ == "__main__":
  cli.run_cli(main)
