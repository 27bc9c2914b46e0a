"""The trained priors that ship inside the package: `regal.optimize --policy default` picks the
one trained for the run's model, device count and objective, with no training first.

Each lives in `policies/<name>/prior.msgpack` (a workdir holding only its prior), listed in
`policies/index.json` with the fingerprint of the config it was trained with, the command
that trained it, its wall time and its test figures (`ship` writes both, from
`regal_experiments.ship_policy`, whose report lists them: experiments/results/shipped_policies/). A checkpoint whose config no longer
matches its fingerprint is refused in one line: the index and the files travel together.
Read with msgpack and JSON alone, before JAX loads.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from regal_datasets import atomic, errors
from regal.learning import checkpoint

DEFAULT = "default"  # `--policy default`.
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "policies")
INDEX_FILE = "index.json"


def fingerprint(config_values: dict[str, Any]) -> str:
  """The version of a trained policy: a digest of the whole config it was trained with."""
  return hashlib.sha256(json.dumps(config_values, sort_keys=True).encode()).hexdigest()[:16]


def index(folder: str = SHIPPED_DIR) -> list[dict[str, Any]]:
  """The shipped policies' records ([] where none ships)."""
  path = os.path.join(folder, INDEX_FILE)
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return json.load(f)["policies"]


def described(entry: dict[str, Any]) -> str:
  return f"{entry['model']} x{entry['num_devices']} ({entry['objective']})"


def resolve(policy: str, model: str, num_devices: int, objective: str,
            folder: str = SHIPPED_DIR) -> str:
  """The workdir `policy` names: itself, or for `DEFAULT` the shipped prior trained for this
  model, device count and objective (the layout and the rest are checked where any workdir's
  are, `checkpoint.check_trained_for`); one line where none ships or its file does not match
  its index."""
  if policy != DEFAULT:
    return policy
  entries = index(folder)
  found = [e for e in entries if e["model"] == model and e["num_devices"] == num_devices
           and e["objective"] == objective]
  if not found:
    shipped = ", ".join(described(e) for e in entries) or "none"
    raise errors.ConfigError(
        f"--policy default: no shipped policy for the {model} model on {num_devices} devices "
        f"({objective}); shipped: {shipped} (or train one: python -m regal.train "
        f"--config.model={model} --config.num_devices={num_devices} --workdir DIR)")
  workdir = os.path.join(folder, found[0]["name"])
  meta = checkpoint.read_meta(os.path.join(workdir, checkpoint.PRIOR_FILE))
  if fingerprint(meta.get("config_values", {})) != found[0]["fingerprint"]:
    raise errors.ConfigError(f"the shipped policy {found[0]['name']} does not match its index "
                             f"(config fingerprint): reinstall regal")
  return workdir


def record(workdir: str, name: str, trained_by: str, train_seconds: float | None = None
           ) -> dict[str, Any]:
  """The index record of a finished prior training in `workdir` (one line if it is not one):
  what it serves, its fingerprint, how it was trained, its test figures."""
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
  finetune = trained.get("finetune", {}).get("test_vs_imitation", {})
  return {"name": name, "model": values["model"], "num_devices": values["num_devices"],
          "objective": values["objective"], "fingerprint": fingerprint(values),
          "command": trained_by,
          "train_seconds": trained.get("seconds") if train_seconds is None else train_seconds,
          "finetune_kept": trained.get("kept", "learned") == "finetuned",
          "finetune_test_vs_imitation_pct": finetune.get("improvement_pct"),
          "finetune_test_vs_imitation_interval_pct": finetune.get("interval_pct"),
          "evals": trained["evals"], "q": meta["q"],
          "test_graphs": trained["test_graphs"], "test_seeds": trained["test_seeds"],
          "test_improvement_pct": test["improvement_pct"],
          "test_interval_pct": test["interval_pct"],
          "equal_time_improvement_pct": equal_time["improvement_pct"],
          "equal_time_interval_pct": equal_time["interval_pct"],
          "verdict": trained["verdict"].splitlines()[-1]}


def ship(workdir: str, name: str, trained_by: str, folder: str = SHIPPED_DIR,
         train_seconds: float | None = None) -> list[dict[str, Any]]:
  """Copies the workdir's prior into `folder` as `name` and records it in the index (a name
  shipped before is replaced); the index after."""
  if not name.replace("_", "").isalnum():
    raise errors.ConfigError(f"--name takes letters, digits and _, got {name!r}")
  entry = record(workdir, name, trained_by, train_seconds)
  with open(os.path.join(workdir, checkpoint.PRIOR_FILE), "rb") as f:
    blob = f.read()
  os.makedirs(os.path.join(folder, name), exist_ok=True)
  atomic.write_bytes(os.path.join(folder, name, checkpoint.PRIOR_FILE), blob)
  policies = [e for e in index(folder) if e["name"] != name] + [entry]
  policies.sort(key=lambda e: (e["model"], e["num_devices"], e["objective"]))
  atomic.write_text(os.path.join(folder, INDEX_FILE),
                    json.dumps({"policies": policies}, indent=1) + "\n")
  return policies
