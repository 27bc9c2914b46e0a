"""Policy checkpoints: parameters and their metadata in one file, written in one atomic step.

A checkpoint is a msgpack map (flax serialization) {format, meta, state}: `meta` is a JSON
object (what the state was trained with: config, step, history, ...), `state` the pytree's
state dict. One file replaced by one rename means a reader (or a run resumed after a kill)
sees either the previous checkpoint or the new one, never parameters of one step with the
metadata of another. REGAL's training (`regal.learning.train_lib`), `regal.optimize --policy`
(`regal.learning.policy_runner`) and the Doppler policy (`regal.doppler_policy.method`) all
read and write them here. Only `save` and reading a state load flax: a command checks a
checkpoint's metadata (`check_trained_for`) before JAX loads.
"""
from __future__ import annotations

import json
import os
from typing import Any

import msgpack

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
  from flax import serialization
  blob = serialization.msgpack_serialize({
      "format": FORMAT, "meta": json.dumps(meta),
      "state": serialization.to_state_dict(state)})
  atomic.write_bytes(path, blob)


def _blob(path: str) -> bytes:
  try:
    with open(path, "rb") as f:
      return f.read()
  except OSError as error:
    raise errors.ConfigError(f"checkpoint {path}: unreadable ({error.strerror})") from None


def _checked(path: str, contents: Any) -> dict[str, Any]:
  if not isinstance(contents, dict) or contents.get("format") != FORMAT:
    raise errors.ConfigError(f"checkpoint {path}: not a regal checkpoint")
  return contents


def _read(path: str) -> dict[str, Any]:
  from flax import serialization
  blob = _blob(path)
  try:
    contents = serialization.msgpack_restore(blob)
  except Exception as error:  # msgpack raises several unrelated types on corrupt input.
    raise errors.ConfigError(f"checkpoint {path}: corrupt ({type(error).__name__})") from None
  return _checked(path, contents)


def read_meta(path: str) -> dict[str, Any]:
  """The metadata of the checkpoint at `path`; a one-line error if missing or unreadable. Read
  with msgpack alone (the state's arrays stay flax's undecoded extension records)."""
  blob = _blob(path)
  try:
    contents = msgpack.unpackb(blob, raw=False, strict_map_key=False)
  except Exception as error:  # msgpack raises several unrelated types on corrupt input.
    raise errors.ConfigError(f"checkpoint {path}: corrupt ({type(error).__name__})") from None
  return _meta_of(path, _checked(path, contents))


def _meta_of(path: str, contents: dict[str, Any]) -> dict[str, Any]:
  try:
    meta = json.loads(contents["meta"])
  except (KeyError, TypeError, json.JSONDecodeError):
    meta = None
  if not isinstance(meta, dict):
    raise errors.ConfigError(f"checkpoint {path}: its metadata is unreadable")
  return meta


def check_trained_for(meta: dict[str, Any], workdir: str, model: str, devices, objective: str
                      ) -> None:
  """A trained policy or prior serves the problems it was trained for: its model (the genes
  it learned mean what that model scores), its device layout (its heads are per device or per
  class; training runs on identical devices, one link group: `device_layout`) and the
  objective's features (memory has no runtime features); else one line. `devices`: a
  `DeviceSpec`."""
  values = meta.get("config_values")
  if not isinstance(values, dict):
    raise errors.ConfigError(f"the policy in {workdir}: checkpoint written without its config")
  trained_model = values.get("model", "sync")
  if trained_model != model:
    raise errors.ConfigError(f"the policy in {workdir} was trained on the {trained_model} model;"
                             f" this search scores with {model} (train one for it, e.g. "
                             f"--config=regal/learning/configs/default.py:wc)")
  if values.get("num_devices") != devices.num_devices:
    raise errors.ConfigError(f"the policy in {workdir} was trained for "
                             f"{values.get('num_devices')} devices, the problem has "
                             f"{devices.num_devices}")
  layout = device_layout(devices)
  if layout != TRAINED_LAYOUT:
    raise errors.ConfigError(f"the policy in {workdir} was trained on {TRAINED_LAYOUT}; these "
                             f"{devices.num_devices} devices are {layout}")
  trained_objective = values.get("objective", "runtime")
  if (trained_objective == "memory") != (objective == "memory"):
    raise errors.ConfigError(f"the policy in {workdir} was trained for objective "
                             f"{trained_objective}; its features differ from {objective}'s")


TRAINED_LAYOUT = "identical devices, every pair linked alike"  # `regal.train`'s devices.


def device_layout(devices) -> str:
  """What a policy's heads depend on in a device set, in words: `TRAINED_LAYOUT`, or how the
  devices differ (speeds, link groups, links)."""
  import numpy as np
  from regal_datasets import devices as devices_lib
  if np.ptp(devices.speed) > 0:
    return "of different speeds"
  groups = int(devices_lib.link_groups(devices).max()) + 1
  if groups > 1:
    return f"in {groups} link groups"
  distinct = ~np.eye(devices.num_devices, dtype=bool)
  if devices.num_devices > 1 and (np.ptp(devices.bandwidth[distinct]) > 0
                                  or np.ptp(devices.latency[distinct]) > 0):
    return "linked unevenly"
  return TRAINED_LAYOUT


def restore_raw(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
  """(state dict as saved: nested dicts of arrays, metadata), for a Flax module's `apply`
  without building a template first (what `init` would cost at inference)."""
  contents = _read(path)
  if not isinstance(contents.get("state"), dict):
    raise errors.ConfigError(f"checkpoint {path}: holds no state")
  return contents["state"], _meta_of(path, contents)


def restore(path: str, template: Any) -> tuple[Any, dict[str, Any]]:
  """(state shaped like `template`, metadata); a one-line error if the file is unreadable or
  its parameters do not fit the template."""
  from flax import serialization
  contents = _read(path)
  meta = _meta_of(path, contents)
  try:
    state = serialization.from_state_dict(template, contents["state"])
  except (KeyError, ValueError, TypeError) as error:
    raise errors.ConfigError(f"checkpoint {path}: does not fit the network ({error})") from None
  return state, meta
