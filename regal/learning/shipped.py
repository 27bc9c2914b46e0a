"""The trained priors that ship inside the package: `regal.optimize --policy default` picks the
one trained for the run's model, device count and objective, with no training first.

Each lives in `policies/<name>/prior.msgpack` (a workdir holding only its prior), listed in
`policies/index.json` with the fingerprint of the config it was trained with, the command
that trained it, its wall time and its test figures (`regal_experiments.ship_policy` writes
both; experiments/results/shipped_policies/ reports them). A checkpoint whose config no longer
matches its fingerprint is refused in one line: the index and the files travel together.
Read with msgpack and JSON alone, before JAX loads.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from regal_datasets import errors
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
