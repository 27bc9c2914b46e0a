"""Device-set descriptions: how many devices, how fast, how much memory, how they connect.

Units are the graph's: a device of speed s runs an op of compute cost c in c / s, and a tensor
of b bytes crosses from device i to j in latency[i, j] + b / bandwidth[i, j]. With the default
(speed 1, bandwidth 1, latency 0) a tensor's size is its transfer time, which is how REGAL's
synthetic costs and the Doppler files' communication costs are meant.

JSON form (all keys but `num_devices` optional; scalars broadcast to every device or pair):

    {"name": "4xgpu", "num_devices": 4, "memory_capacity": 16e9 | [..] | null,
     "speed": 1.0 | [..], "bandwidth": 1.0 | [[..]], "latency": 0.0 | [[..]]}

`memory_capacity: null` means unlimited. The diagonal of bandwidth and latency is ignored: a
tensor already on its device moves for free. An optional `"ports": [[..]]` says which of its
ports a transfer from device i to j takes (`ports[i][j] = k`: i's sending port k and j's
receiving port k, one transfer at a time each, as a GPU's NVLink is shared by all its peers
behind an NVSwitch); -1 (the default) gives the pair a channel of its own. An optional `"kinds": ["h100", ...]` names each
device's accelerator (`regal.parallelism.hardware.KINDS`, which checks the names and, where
`speed` is absent, runs each at its kind's peak): an imported graph's ops are then costed on
those kinds (`regal.parallelism.roofline.recost`), in the importers' time unit. A `speed`
beside `kinds` scales each device against its kind's peak (the peak FLOP/s ratios a preset
writes are scale 1: `[1.0, 0.1]` on two H100s makes the second ten times slower).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from typing import Any

import numpy as np

from regal_datasets import errors

TOPOLOGY_PRESETS = ("homogeneous", "nvlink_two_groups")  # Abstract units.
# Accelerator presets (h100, a100, ...) are `regal.parallelism.hardware`'s.


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceSpec:
  """An immutable, validated description of a set of devices."""
  memory_capacity: np.ndarray  # [D] bytes; inf = unlimited.
  speed: np.ndarray  # [D] relative compute speed, > 0.
  bandwidth: np.ndarray  # [D, D] bytes per time unit, > 0 off the diagonal.
  latency: np.ndarray  # [D, D] time units, >= 0 off the diagonal.
  name: str = "devices"
  kinds: tuple[str, ...] = ()  # Each device's accelerator kind, or () for abstract units.
  ports: Any = None  # [D, D] int: the port class a transfer i -> j takes; -1 (None): its own.

  def __post_init__(self):
    if np.ndim(self.speed) != 1:
      raise errors.DeviceSpecError("device spec: speed must list one value per device")
    num = len(self.speed)
    check_count(num)
    set_field = functools.partial(object.__setattr__, self)
    set_field("memory_capacity", _vector(self.memory_capacity, num, "memory_capacity"))
    set_field("speed", _vector(self.speed, num, "speed"))
    set_field("bandwidth", _matrix(self.bandwidth, num, "bandwidth"))
    set_field("latency", _matrix(self.latency, num, "latency"))
    set_field("kinds", tuple(str(k) for k in self.kinds))
    set_field("ports", _ports(self.ports, num))
    if self.kinds and len(self.kinds) != num:
      raise errors.DeviceSpecError(f"device spec: kinds lists {len(self.kinds)} devices, "
                                   f"expected {num}")
    _validate(self)

  @property
  def num_devices(self) -> int:
    return len(self.speed)

  @property
  def shares_ports(self) -> bool:
    """Whether some transfers wait for a port another transfer holds (`ports`)."""
    return bool((self.ports >= 0).any())

  def compute_time(self, cost: np.ndarray | float, device: np.ndarray | int) -> np.ndarray:
    return np.asarray(cost) / self.speed[device]

  def to_json_dict(self) -> dict[str, Any]:
    memory = self.memory_capacity
    return {
        "name": self.name,
        "num_devices": self.num_devices,
        "memory_capacity": None if np.isinf(memory).all() else
                           [None if np.isinf(m) else float(m) for m in memory],
        "speed": self.speed.tolist(),
        "bandwidth": np.where(np.eye(self.num_devices, dtype=bool), 0.0,
                              self.bandwidth).tolist(),
        "latency": self.latency.tolist(),
        **({"kinds": list(self.kinds)} if self.kinds else {}),
        **({"ports": self.ports.tolist()} if self.shares_ports else {}),
    }

  def __eq__(self, other: object) -> bool:
    if not isinstance(other, DeviceSpec):
      return NotImplemented
    return self.name == other.name and self.kinds == other.kinds and all(
        np.array_equal(getattr(self, f), getattr(other, f))
        for f in ("memory_capacity", "speed", "bandwidth", "latency", "ports"))

  __hash__ = None


def _vector(value: Any, num: int, field: str) -> np.ndarray:
  if value is None:
    value = np.inf
  array = np.array(value, dtype=np.float64)
  if array.ndim == 0:
    array = np.full(num, float(array))
  if array.shape != (num,):
    raise errors.DeviceSpecError(f"device spec: {field} has shape {array.shape}, "
                                 f"expected ({num},)")
  array.flags.writeable = False
  return array


def _ports(value: Any, num: int) -> np.ndarray:
  """[D, D] int32 port classes, -1 on the diagonal and where a pair has its own channel."""
  try:
    array = np.full((num, num), -1, np.int64) if value is None else np.array(value)
  except (TypeError, ValueError):
    raise errors.DeviceSpecError("device spec: ports must be a matrix of integers") from None
  if array.ndim == 0:
    array = np.full((num, num), array)
  if array.shape != (num, num) or not (np.issubdtype(array.dtype, np.integer) or (
      np.issubdtype(array.dtype, np.floating) and np.all(array == np.round(array)))):
    raise errors.DeviceSpecError(f"device spec: ports must be a {num} x {num} matrix of "
                                 f"integers, got shape {array.shape}")
  if (array < -1).any() or (array > 255).any():
    raise errors.DeviceSpecError("device spec: ports must be -1 (a channel of its own) or a "
                                 "port class from 0 to 255")
  array = array.astype(np.int32)
  np.fill_diagonal(array, -1)
  array.flags.writeable = False
  return array


def _matrix(value: Any, num: int, field: str) -> np.ndarray:
  array = np.array(value, dtype=np.float64)
  if array.ndim == 0:
    array = np.full((num, num), float(array))
  if array.shape != (num, num):
    raise errors.DeviceSpecError(f"device spec: {field} has shape {array.shape}, "
                                 f"expected ({num}, {num})")
  array = array.copy()
  np.fill_diagonal(array, np.inf if field == "bandwidth" else 0.0)
  array.flags.writeable = False
  return array


def _validate(spec: DeviceSpec) -> None:
  checks = (("memory_capacity", spec.memory_capacity, lambda v: ~np.isnan(v) & (v > 0)),
            ("speed", spec.speed, lambda v: np.isfinite(v) & (v > 0)),
            ("bandwidth", spec.bandwidth, lambda v: ~np.isnan(v) & (v > 0)),
            ("latency", spec.latency, lambda v: np.isfinite(v) & (v >= 0)))
  for field, values, is_valid in checks:
    bad = np.argwhere(~is_valid(values))
    if len(bad):
      where = ", ".join(str(int(i)) for i in bad[0])
      raise errors.DeviceSpecError(
          f"device spec: {field}[{where}] = {float(values[tuple(bad[0])])} is invalid "
          f"({'must be finite and non-negative' if field == 'latency' else 'must be positive'}"
          f"{' and finite' if field == 'speed' else ''})")


def homogeneous(num_devices: int, memory_capacity: float | None = None, speed: float = 1.0,
                bandwidth: float = 1.0, latency: float = 0.0) -> DeviceSpec:
  """`num_devices` identical devices, every pair linked alike."""
  check_count(num_devices)
  return DeviceSpec(memory_capacity=np.full(num_devices, np.inf if memory_capacity is None
                                            else memory_capacity),
                    speed=np.full(num_devices, speed), bandwidth=bandwidth, latency=latency,
                    name=f"homogeneous{num_devices}")


def nvlink_two_groups(group_size: int = 4, memory_capacity: float | None = None,
                      intra_bandwidth: float = 1.0, inter_bandwidth: float = 0.25,
                      intra_latency: float = 0.0, inter_latency: float = 0.0) -> DeviceSpec:
  """Two NVLink groups of `group_size` devices, slower links between the groups.

  The shape of the Doppler paper's 8 x V100 server: inside a group the GPUs talk over NVLink;
  across groups traffic takes a slower path. Bandwidths are relative to the intra-group link.
  """
  check_count(group_size)
  num = 2 * group_size
  group = np.arange(num) // group_size
  same = group[:, None] == group[None, :]
  return DeviceSpec(
      memory_capacity=np.full(num, np.inf if memory_capacity is None else memory_capacity),
      speed=np.ones(num), bandwidth=np.where(same, intra_bandwidth, inter_bandwidth),
      latency=np.where(same, intra_latency, inter_latency), name=f"nvlink_two_groups{num}")


def link_groups(spec: DeviceSpec) -> np.ndarray:
  """Each device's group [num_devices], numbered by first device: devices joined, directly or
  through others, by the fastest links (the highest bandwidth between two distinct devices,
  at the lowest latency any such link has). One group where every link is alike; the two
  groups of `nvlink_two_groups`."""
  num = spec.num_devices
  if num == 1:
    return np.zeros(1, int)
  distinct = ~np.eye(num, dtype=bool)
  group = np.full(num, -1)
  fastest = distinct & (spec.bandwidth == spec.bandwidth[distinct].max())
  fast = fastest & (spec.latency == spec.latency[fastest].min())
  fast = fast | fast.T  # A group is what a fast link joins, either way round.
  for first in range(num):
    if group[first] >= 0:
      continue
    group[first] = label = group.max() + 1
    frontier = [first]
    while frontier:
      device = frontier.pop()
      for other in np.flatnonzero(fast[device] & (group < 0)):
        group[other] = label
        frontier.append(int(other))
  return group


MAX_DEVICES = 1024  # Candidates hold D x D link and channel state: past this, memory runs out.


def check_count(num_devices: Any) -> None:
  """A device count the models hold (one-line error otherwise)."""
  shown = errors.brief(num_devices)
  if not isinstance(num_devices, (int, np.integer)) or isinstance(num_devices, bool) or (
      num_devices < 1):
    raise errors.DeviceSpecError(f"device count must be an integer >= 1, got {shown}")
  if num_devices > MAX_DEVICES:
    raise errors.DeviceSpecError(f"device count {shown} is above {MAX_DEVICES}, the most "
                                 f"the performance models hold")


def from_json_dict(data: Any) -> DeviceSpec:
  if not isinstance(data, dict):
    raise errors.DeviceSpecError("device spec JSON must be an object")
  unknown = set(data) - {"name", "num_devices", "memory_capacity", "speed", "bandwidth",
                         "latency", "kinds", "ports"}
  if unknown:
    raise errors.DeviceSpecError(f"device spec: unknown keys {sorted(unknown)}")
  num = data.get("num_devices")
  if num is None:
    speed = data.get("speed")
    num = len(speed) if isinstance(speed, list) else None
  check_count(num)
  memory = data.get("memory_capacity")
  if isinstance(memory, list):
    memory = [np.inf if m is None else m for m in memory]
  kinds = _kinds(data.get("kinds", ()))
  speed = data.get("speed", 1.0)
  try:
    return DeviceSpec(memory_capacity=np.inf if memory is None else memory,
                      speed=_broadcast(speed, num),
                      bandwidth=data.get("bandwidth", 1.0), latency=data.get("latency", 0.0),
                      name=str(data.get("name", f"devices{num}")), kinds=kinds,
                      ports=data.get("ports"))
  except OverflowError:  # An integer past float64's range.
    raise errors.DeviceSpecError("device spec: a number is beyond float64's range") from None
  except (TypeError, ValueError) as error:
    if isinstance(error, errors.RegalError):
      raise
    raise errors.DeviceSpecError(f"device spec: {error}") from None


def _kinds(value: Any) -> tuple[str, ...]:
  if not isinstance(value, (list, tuple)) or not all(isinstance(k, str) for k in value):
    raise errors.DeviceSpecError("device spec: kinds must be a list of accelerator names")
  return tuple(value)


def _broadcast(value: Any, num: int) -> np.ndarray:
  array = np.array(value, dtype=np.float64)
  if array.ndim == 0:
    return np.full(num, float(array))
  if array.shape != (num,):
    raise errors.DeviceSpecError(f"device spec: speed has shape {array.shape}, "
                                 f"expected ({num},)")
  return array


def read_json(path: str) -> Any:
  """The JSON value in `path`, or a one-line error saying why it is not one."""
  if os.path.isdir(path):
    raise errors.DeviceSpecError(f"{path}: is a directory, expected a device description")
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    raise errors.DeviceSpecError(f"{path}: no such file") from None
  except UnicodeDecodeError:
    raise errors.DeviceSpecError(f"{path}: not a text file (binary content)") from None
  except json.JSONDecodeError as error:
    raise errors.DeviceSpecError(f"{path}: not valid JSON ({error.msg} at line "
                                 f"{error.lineno})") from None
  except RecursionError:
    raise errors.DeviceSpecError(f"{path}: not a device description (nested too "
                                 f"deeply)") from None
  except ValueError:  # An integer of more digits than Python converts.
    raise errors.DeviceSpecError(f"{path}: a number has more digits than Python reads "
                                 f"({sys.get_int_max_str_digits()})") from None


def load(path: str) -> DeviceSpec:
  data = read_json(path)
  try:
    return from_json_dict(data)
  except errors.DeviceSpecError as error:
    raise errors.DeviceSpecError(f"{path}: {error}") from None


def save(spec: DeviceSpec, path: str) -> None:
  from regal_datasets import atomic  # Local: keeps this module import-light.
  atomic.write_text(path, json.dumps(spec.to_json_dict(), indent=2) + "\n")


def resolve(num_devices: int | None = None, spec_path: str | None = None,
            preset: str = "homogeneous") -> DeviceSpec:
  """The device set named by command-line flags: a JSON file wins over a preset."""
  if spec_path:
    return load(spec_path)
  if preset == "homogeneous":
    return homogeneous(2 if num_devices is None else num_devices)
  if preset == "nvlink_two_groups":
    if num_devices is not None and (num_devices < 2 or num_devices % 2):
      raise errors.DeviceSpecError(
          f"preset nvlink_two_groups needs an even device count >= 2, got {num_devices}")
    return nvlink_two_groups(4 if num_devices is None else num_devices // 2)
  raise errors.DeviceSpecError(f"unknown device preset {preset!r}; known: "
                               f"{', '.join(TOPOLOGY_PRESETS)} (accelerators: "
                               f"regal.parallelism.hardware)")
