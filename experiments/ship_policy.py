r"""Ships a trained prior inside the package (`regal.optimize --policy default`), and reports
every shipped one.

  python -m regal_experiments.ship_policy --workdir runs/ship_wc_x2 --name wc_x2 \
      --command "python -m regal.train --config=regal/learning/configs/default.py:wc \
      --config.num_devices=2 --workdir runs/ship_wc_x2"

Copies the workdir's calibrated `prior.msgpack` to `regal/learning/policies/<name>/`, records it
in `policies/index.json` (model, device count, objective, the config's fingerprint, the command
that trained it and its wall time, its test figures from the workdir's `report.json`) and
rewrites the report of every shipped policy (`--out`). A name already shipped is replaced.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import json  # noqa: E402
import os  # noqa: E402
from typing import Any, Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import atomic, errors  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.learning import checkpoint, shipped  # noqa: E402

_WORKDIR = flags.DEFINE_string("workdir", None, "A finished regal.train workdir (the prior "
                               "learner).", required=True)
_NAME = flags.DEFINE_string("name", None, "The shipped policy's name, e.g. wc_x2.",
                            required=True)
_COMMAND = flags.DEFINE_string("command", None, "The command that trained the workdir, as "
                               "the report shows it.", required=True)
_FOLDER = flags.DEFINE_string("policies", shipped.SHIPPED_DIR, "Where shipped policies live.")
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "shipped_policies"),
                           "Folder of the report.")


def entry(workdir: str, name: str, trained_by: str) -> dict[str, Any]:
  """The index record of a finished workdir's prior (one line if it is not one)."""
  path = os.path.join(workdir, checkpoint.PRIOR_FILE)
  report_path = os.path.join(workdir, "report.json")
  if not (os.path.exists(path) and os.path.exists(report_path)):
    raise errors.ConfigError(f"{workdir}: not a finished prior training (needs "
                             f"{checkpoint.PRIOR_FILE} and report.json)")
  meta = checkpoint.read_meta(path)
  if "q" not in meta:
    raise errors.ConfigError(f"{workdir}: its prior is not calibrated yet")
  with open(report_path) as f:
    trained = json.load(f)
  values = meta["config_values"]
  test, equal_time = trained["test"], trained["test_equal_time"]
  return {"name": name, "model": values["model"], "num_devices": values["num_devices"],
          "objective": values["objective"], "fingerprint": shipped.fingerprint(values),
          "command": trained_by, "train_seconds": trained.get("seconds"),
          "evals": trained["evals"], "q": meta["q"],
          "test_graphs": trained["test_graphs"], "test_seeds": trained["test_seeds"],
          "test_improvement_pct": test["improvement_pct"],
          "test_interval_pct": test["interval_pct"],
          "equal_time_improvement_pct": equal_time["improvement_pct"],
          "equal_time_interval_pct": equal_time["interval_pct"],
          "verdict": trained["verdict"].splitlines()[-1]}


def ship(workdir: str, name: str, trained_by: str, folder: str) -> list[dict[str, Any]]:
  """Copies the prior and records it; the index after."""
  if not name.replace("_", "").isalnum():
    raise errors.ConfigError(f"--name takes letters, digits and _, got {name!r}")
  record = entry(workdir, name, trained_by)
  with open(os.path.join(workdir, checkpoint.PRIOR_FILE), "rb") as f:
    blob = f.read()
  os.makedirs(os.path.join(folder, name), exist_ok=True)
  atomic.write_bytes(os.path.join(folder, name, checkpoint.PRIOR_FILE), blob)
  policies = [e for e in shipped.index(folder) if e["name"] != name] + [record]
  policies.sort(key=lambda e: (e["model"], e["num_devices"], e["objective"]))
  atomic.write_text(os.path.join(folder, shipped.INDEX_FILE),
                    json.dumps({"policies": policies}, indent=1) + "\n")
  return policies


def markdown(policies: list[dict[str, Any]]) -> list[str]:
  rows = [[e["name"], f"{e['model']}, {e['num_devices']} devices, {e['objective']}",
           f"`{e['command']}`",
           "" if e["train_seconds"] is None else f"{e['train_seconds'] / 60:.1f} min",
           f"{e['q']:g}",
           f"{e['test_improvement_pct']:+.2f}% [{e['test_interval_pct'][0]:+.2f}, "
           f"{e['test_interval_pct'][1]:+.2f}]",
           f"{e['equal_time_improvement_pct']:+.2f}% [{e['equal_time_interval_pct'][0]:+.2f}, "
           f"{e['equal_time_interval_pct'][1]:+.2f}]"] for e in policies]
  return report.markdown_table(
      ["name", "trained for", "command", "training time", "q", "test vs unguided, same evals "
       "(95% interval)", "test vs unguided, equal wall time"], rows)


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  policies = ship(_WORKDIR.value, _NAME.value, _COMMAND.value, _FOLDER.value)
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
