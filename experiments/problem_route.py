r"""Following `problem` through a default BRKGA run: how often the search asks the scoring
layer about the same problem (issue 71).

  python -m regal_experiments.problem_route                       # this tree, ~20 s
  python -m regal_experiments.problem_route --baseline b8e28b4    # and a git revision beside it
  python -m regal_experiments.problem_route --quick               # a 12-op graph, 400 evaluations

From `regal.app.methods`'s BRKGA method on, every call of a function of ours that receives the
problem, or an object holding it (`.problem`: the evaluator, a plan, a scorer), is a stop; the
route is the stops in call order. A *climb* is a stop in a higher layer right after one in a
lower layer (`tests/layering_test.py`'s layers: scoring 1, baselines 3, search 4, app 7): the
route came back up and went down again to ask once more. Crossings count the stops from the
search layer into scoring and back. The run is `optimize_lib.run` with `--evals` on a
synthetic graph of `--ops` ops on two identical devices (the WC model, every default).

A `--baseline` revision is checked out in a temporary git worktree and traced by this same
file in a subprocess whose imports resolve there, so both trees are measured by one tracer.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import subprocess  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import errors  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal_experiments.problem_route_lib import REPO, route_figures, trace, traced_at  # noqa: E402

_QUICK = flags.DEFINE_bool("quick", False, "A 12-op graph and 400 evaluations.")
_OPS = flags.DEFINE_integer("ops", 40, "Synthetic graph size (ops).", lower_bound=2,
                            upper_bound=2000)
_EVALS = flags.DEFINE_integer("evals", 2000, "The run's budget (evaluations).",
                              lower_bound=200, upper_bound=1_000_000)
_BASELINE = flags.DEFINE_string("baseline", "", "A git revision traced beside this tree.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "problem_route"),
                           "Report folder.")


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("ops", "evals"))
  ops, evals, baseline = _OPS.value, _EVALS.value, _BASELINE.value
  if _QUICK.value:
    ops, evals = 12, 400
  rows = {"this tree": route_figures(trace(ops, evals))}
  if baseline:
    check = subprocess.run(["git", "rev-parse", "--verify", "-q", baseline + "^{commit}"],
                           cwd=REPO, capture_output=True, text=True)
    if check.returncode:
      raise errors.ConfigError(f"--baseline {baseline!r} names no commit of this repository")
    rows[f"baseline {baseline}"] = traced_at(baseline, ops, evals)
  lines, facts = report.header("Following the problem through a default BRKGA run",
                               "regal_experiments.problem_route",
                               "quick" if _QUICK.value else "full")
  body = [f"A default `--method brkga` run (WC model, runtime) of a {ops}-op synthetic graph on "
          f"two identical devices with {evals:,} evaluations, traced from "
          f"`methods._run_brkga` on (see the module docstring for what a stop, a climb and a "
          f"crossing are). Target (issue 71): at most 5 climbs.", ""]
  body += report.markdown_table(
      ["tree", "stops", "modules", "climbs", "search -> scoring", "scoring -> search"],
      [[name, r["stops"], r["modules"], r["climbs"], r["search_to_scoring"],
        r["scoring_to_search"]] for name, r in rows.items()])
  for name, r in rows.items():
    body += ["", f"Route of {name} (consecutive stops in one layer merged, repeats dropped):",
             ""] + [f"- {line}" for line in r["route"]]
  verdict = rows["this tree"]["climbs"] <= 5
  body += ["", f"Verdict: {rows['this tree']['climbs']} climbs, "
           f"{'within' if verdict else '**above**'} the target of 5."]
  report.publish(_OUT.value, "problem_route" + "-quick" * _QUICK.value, lines, body, {**facts, "rows": rows,
                                                            "ops": ops, "evals": evals})


if __name__ == "__main__":
  cli.run_cli(main)
