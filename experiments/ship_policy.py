r"""Ships a trained prior inside the package (`regal.optimize --policy default`), and reports
every shipped one.

  python -m regal_experiments.ship_policy --workdir runs/ship_wc_x2 --name wc_x2 \
      --command "python -m regal.train --config=regal/learning/configs/default.py:wc \
      --config.num_devices=2 --workdir runs/ship_wc_x2"

Copies the workdir's calibrated `prior.msgpack` to `regal/learning/policies/<name>/` and records
it in `policies/index.json` (`regal.learning.shipped.ship`: model, device count, objective, the
config's fingerprint, the command that trained it and its wall time, its test figures from the
workdir's `report.json`), then rewrites the report of every shipped policy (`--out`). A name
already shipped is replaced.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
from typing import Any, Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_experiments import command, report  # noqa: E402
from regal.learning import shipped  # noqa: E402

_WORKDIR = flags.DEFINE_string("workdir", None, "A finished regal.train workdir (the prior "
                               "learner).", required=True)
_NAME = flags.DEFINE_string("name", None, "The shipped policy's name, e.g. wc_x2.",
                            required=True)
_COMMAND = flags.DEFINE_string("command", None, "The command that trained the workdir, as "
                               "the report shows it.", required=True)
_TRAIN_SECONDS = flags.DEFINE_float("train_seconds", None, "The training's whole wall time, "
                                    "where its report's (the last process's, since it "
                                    "resumed) is not.", lower_bound=0.0, upper_bound=1e7)
_FOLDER = flags.DEFINE_string("policies", shipped.SHIPPED_DIR, "Where shipped policies live.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "shipped_policies"),
                           "Folder of the report.")


def markdown(policies: list[dict[str, Any]]) -> list[str]:
  rows = [[e["name"], f"{e['model']}, {e['num_devices']} devices, {e['objective']}",
           f"`{e['command']}`",
           "" if e["train_seconds"] is None else f"{e['train_seconds'] / 60:.1f} min",
           f"{e['q']:g}",
           f"{e['test_improvement_pct']:+.2f}% [{e['test_interval_pct'][0]:+.2f}, "
           f"{e['test_interval_pct'][1]:+.2f}]",
           f"{e['equal_time_improvement_pct']:+.2f}% [{e['equal_time_interval_pct'][0]:+.2f}, "
           f"{e['equal_time_interval_pct'][1]:+.2f}]", _finetune_cell(e)] for e in policies]
  return report.markdown_table(
      ["name", "trained for", "command", "training wall time (its last run's)", "q", "test vs unguided, same evals "
       "(95% interval)", "test vs unguided, equal wall time",
       "REINFORCE fine-tune vs imitation, test"], rows)


def _finetune_cell(e: dict[str, Any]) -> str:
  if e.get("finetune_test_vs_imitation_pct") is None:
    return "not run"
  low, high = e["finetune_test_vs_imitation_interval_pct"]
  return (f"{e['finetune_test_vs_imitation_pct']:+.2f} points [{low:+.2f}, {high:+.2f}], "
          + ("kept" if e["finetune_kept"] else "dropped (validation)"))


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  policies = shipped.ship(_WORKDIR.value, _NAME.value, _COMMAND.value, _FOLDER.value,
                          _TRAIN_SECONDS.value)
  lines, facts = report.header("The trained priors that ship with regal",
                               "regal_experiments.ship_policy", "full")
  body = [f"`regal.optimize --policy default` runs the one trained for the run's model, device "
          f"count and objective (`regal/learning/shipped.py`). Each was measured by its own "
          f"training on {policies[0]['test_graphs']} unseen test graphs x "
          f"{policies[0]['test_seeds']} paired seeds at {policies[0]['evals']:,} evaluations "
          f"(the training's budget); the equal-time column gives the unguided search the "
          f"evaluations the guide's seconds would buy.", ""]
  body += markdown(policies)
  report.publish(_OUT.value, "shipped_policies", lines, body, {**facts, "policies": policies})


if __name__ == "__main__":
  cli.run_cli(main)
