"""Policy checkpoints: parameters and their metadata in one file, written in one atomic step.

A checkpoint is a msgpack map (flax serialization) {format, meta, state}: `meta` is a JSON
object (what the state was trained with: config, step, history, ...), `state` the pytree's
state dict. One file replaced by one rename means a reader (or a run resumed after a kill)
sees either the previous checkpoint or the new one, never parameters of one step with the
metadata of another. REGAL's training (`regal.learning.train_lib`), `regal.optimize --policy`
(`regal.learning.policy_runner`) and the Doppler policy (`regal.doppler_policy.method`) all
read and write them here.
"""
from __future__ import annotations

import json
import os
from typing import Any

from flax import serialization

from regal_datasets import atomic, errors

FORMAT = "regal.checkpoint"
WORKDIR_FILE = "checkpoint.msgpack"  # A training workdir's checkpoint.


BEST_FILE = "best.msgpack"  # The state with the best validation score so far.
PRIOR_FILE = "prior.msgpack"  # The learned prior of a workdir (`regal.learning.prior_train`).


def in_workdir(workdir: str) -> str:
  """The checkpoint file of a REGAL training workdir."""
  return os.path.join(workdir, WORKDIR_FILE)


def best_in_workdir(workdir: str) -> str:
  """The best-validated policy of a REGAL training workdir: what inference and the final
  report use (validation graphs only choose it)."""
  return os.path.join(workdir, BEST_FILE)


def save(path: str, state: Any, meta: dict[str, Any]) -> None:
  """Writes `state` (any flax-serializable pytree) and `meta` (JSON-compatible) to `path`."""
  blob = serialization.msgpack_serialize({
      "format": FORMAT, "meta": json.dumps(meta),
      "state": serialization.to_state_dict(state)})
  atomic.write_bytes(path, blob)


def _read(path: str) -> dict[str, Any]:
  try:
    with open(path, "rb") as f:
      blob = f.read()
  except OSError as error:
    raise errors.ConfigError(f"checkpoint {path}: unreadable ({error.strerror})") from None
  try:
    contents = serialization.msgpack_restore(blob)
  except Exception as error:  # msgpack raises several unrelated types on corrupt input.
    raise errors.ConfigError(f"checkpoint {path}: corrupt ({type(error).__name__})") from None
  if not isinstance(contents, dict) or contents.get("format") != FORMAT:
    raise errors.ConfigError(f"checkpoint {path}: not a regal checkpoint")
  return contents


def read_meta(path: str) -> dict[str, Any]:
  """The metadata of the checkpoint at `path`; a one-line error if missing or unreadable."""
  try:
    meta = json.loads(_read(path)["meta"])
  except (KeyError, TypeError, json.JSONDecodeError):
    meta = None
  if not isinstance(meta, dict):
    raise errors.ConfigError(f"checkpoint {path}: its metadata is unreadable")
  return meta


def restore_raw(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
  """(state dict as saved: nested dicts of arrays, metadata), for a Flax module's `apply`
  without building a template first (what `init` would cost at inference)."""
  contents = _read(path)
  if not isinstance(contents.get("state"), dict):
    raise errors.ConfigError(f"checkpoint {path}: holds no state")
  return contents["state"], read_meta(path)


def restore(path: str, template: Any) -> tuple[Any, dict[str, Any]]:
  """(state shaped like `template`, metadata); a one-line error if the file is unreadable or
  its parameters do not fit the template."""
  contents = _read(path)
  meta = read_meta(path)
  try:
    state = serialization.from_state_dict(template, contents["state"])
  except (KeyError, ValueError, TypeError) as error:
    raise errors.ConfigError(f"checkpoint {path}: does not fit the network ({error})") from None
  return state, meta
