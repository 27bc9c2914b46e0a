"""Device-set descriptions: how many devices, how fast, how much memory, how they connect.

Units are the graph's: a device of speed s runs an op of compute cost c in c / s, and a tensor
of b bytes crosses from device i to j in latency[i, j] + b / bandwidth[i, j]. With the default
(speed 1, bandwidth 1, latency 0) a tensor's size is its transfer time, which is how REGAL's
synthetic costs and the Doppler files' communication costs are meant.

JSON form (all keys but `num_devices` optional; scalars broadcast to every device or pair):

    {"name": "4xgpu", "num_devices": 4, "memory_capacity": 16e9 | [..] | null,
     "speed": 1.0 | [..], "bandwidth": 1.0 | [[..]], "latency": 0.0 | [[..]]}

`memory_capacity: null` means unlimited. The diagonal of bandwidth and latency is ignored: a
tensor already on its device moves for free. An optional `"kinds": ["h100", ...]` names each
device's accelerator (`regal_datasets.accelerators`): an imported graph's ops are then costed by
their roofline on those kinds (`accelerators.recost`), in the importers' time unit. Without
`speed`, each runs at its kind's; a `speed` beside `kinds` scales each device against its
kind's peak (the peak FLOP/s ratios a preset writes are scale 1: `[1.0, 0.1]` on two H100s
makes the second ten times slower).
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
ACCELERATOR_PRESETS = ("h100", "a100", "v100", "tpu_v5e", "cpu", "h100+cpu",
                       "a100+cpu")  # `KINDS` and `MIXES` below (a test holds them equal).
PRESETS = TOPOLOGY_PRESETS + ACCELERATOR_PRESETS


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceSpec:
  """An immutable, validated description of a set of devices."""
  memory_capacity: np.ndarray  # [D] bytes; inf = unlimited.
  speed: np.ndarray  # [D] relative compute speed, > 0.
  bandwidth: np.ndarray  # [D, D] bytes per time unit, > 0 off the diagonal.
  latency: np.ndarray  # [D, D] time units, >= 0 off the diagonal.
  name: str = "devices"
  kinds: tuple[str, ...] = ()  # Each device's accelerator kind, or () for abstract units.

  def __post_init__(self):
    if np.ndim(self.speed) != 1:
      raise errors.DeviceSpecError("device spec: speed must list one value per device")
    num = len(self.speed)
    _check_count(num)
    set_field = functools.partial(object.__setattr__, self)
    set_field("memory_capacity", _vector(self.memory_capacity, num, "memory_capacity"))
    set_field("speed", _vector(self.speed, num, "speed"))
    set_field("bandwidth", _matrix(self.bandwidth, num, "bandwidth"))
    set_field("latency", _matrix(self.latency, num, "latency"))
    set_field("kinds", tuple(str(k) for k in self.kinds))
    if self.kinds:
      if len(self.kinds) != num:
        raise errors.DeviceSpecError(f"device spec: kinds lists {len(self.kinds)} devices, "
                                     f"expected {num}")
      unknown = sorted(set(self.kinds) - set(KINDS))
      if unknown:
        raise errors.DeviceSpecError(f"device spec: unknown kind {unknown[0]!r}; known: "
                                     f"{', '.join(KINDS)}")
    _validate(self)

  @property
  def num_devices(self) -> int:
    return len(self.speed)

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
    }

  def __eq__(self, other: object) -> bool:
    if not isinstance(other, DeviceSpec):
      return NotImplemented
    return self.name == other.name and self.kinds == other.kinds and all(
        np.array_equal(getattr(self, f), getattr(other, f))
        for f in ("memory_capacity", "speed", "bandwidth", "latency"))

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
  _check_count(num_devices)
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
  _check_count(group_size)
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


# ----- real accelerators (costed by `regal_datasets.accelerators`' roofline) -------------------------
@dataclasses.dataclass(frozen=True)
class Accelerator:
  """One device kind (SI units: FLOP/s, bytes/s, bytes, seconds). `peak_flops`: dense 32-bit
  math as XLA runs it by default (TF32 tensor cores where there are); `half_peak_flops`: dense
  16-bit math (BF16, or FP16 where there is no BF16), what an op computing in 16 bits runs at."""
  name: str
  peak_flops: float
  memory_bandwidth: float
  memory_bytes: float
  link_bandwidth: float  # To a peer of the same kind, each direction.
  link_latency: float
  family: str  # Accelerators of one family share the fast link; others meet over PCIe.
  half_peak_flops: float
  node_size: int = 8  # Accelerators behind one switch (a DGX / HGX node, a TPU slice).
  network_bandwidth: float = 0.0  # Per accelerator between nodes (its NIC), each direction.
  network_latency: float = 10e-6


# Sources (dense figures, no sparsity): NVIDIA H100 Tensor Core GPU datasheet (SXM: TF32 494.7,
# BF16 989.4 TFLOP/s, 3.35 TB/s, NVLink 900 GB/s both ways); NVIDIA A100 datasheet (SXM 80GB:
# TF32 156, BF16 312 TFLOP/s, 2.039 TB/s, NVLink 600 GB/s); NVIDIA V100 datasheet (SXM2: FP32
# 15.7, FP16 tensor 125 TFLOP/s, 900 GB/s, NVLink 300 GB/s); Google Cloud TPU v5e (BF16 197
# TFLOP/s, 819 GB/s HBM, 16 GB; 32-bit math runs as BF16 passes); the host: a 2-socket AVX-512
# server, an estimate with no 16-bit speed-up claimed. Nodes: NVIDIA DGX H100 / DGX A100 user
# guides (8 GPUs behind NVSwitches; one ConnectX-7 400 Gb/s / ConnectX-6 200 Gb/s NIC per GPU:
# 50 / 25 GB/s); DGX-1 V100 (8 GPUs, 4 x 100 Gb/s EDR: 6.25 GB/s per GPU); TPU v5e (a 16-chip
# slice here, 25 GB/s of data-center network per host of 4 chips: 6.25 GB/s per chip).
KINDS = {
    "h100": Accelerator("H100-SXM-80GB", 494.7e12, 3.35e12, 80e9, 450e9, 3e-6, "nvidia",
                        989.4e12, 8, 50e9),
    "a100": Accelerator("A100-SXM-80GB", 156e12, 2.039e12, 80e9, 300e9, 3e-6, "nvidia",
                        312e12, 8, 25e9),
    "v100": Accelerator("V100-SXM2-32GB", 15.7e12, 0.9e12, 32e9, 150e9, 3e-6, "nvidia",
                        125e12, 8, 6.25e9),
    "tpu_v5e": Accelerator("TPU-v5e", 197e12, 0.819e12, 16e9, 200e9, 2e-6, "tpu", 197e12, 16,
                           6.25e9),
    "cpu": Accelerator("CPU-host (2-socket, AVX-512)", 3e12, 0.3e12, 512e9, 0.3e12, 1e-6,
                       "host", 3e12, 1, 0.0),
}
PCIE_BANDWIDTH = 50e9  # PCIe 5.0 x16, each direction, as measured rather than nominal.
PCIE_LATENCY = 10e-6
MIXES = ("h100+cpu", "a100+cpu")


def kinds_of(preset: str, num_devices: int | None) -> list[str]:
  """The kind of each device of `preset` (`--devices` accelerators, plus a host for a mix)."""
  if preset not in ACCELERATOR_PRESETS:
    raise errors.DeviceSpecError(f"unknown accelerator preset {preset!r}; known: "
                                 f"{', '.join(ACCELERATOR_PRESETS)}")
  count = 4 if num_devices is None else num_devices
  if preset in MIXES:
    accelerator, host = preset.split("+")
    return [accelerator] * count + [host]
  return [preset] * count


def accelerator_spec(kinds: list[str]) -> DeviceSpec:
  """Devices of these kinds: memory in bytes, speeds by peak FLOP/s (refined per graph by
  `recost`), links in bytes per time unit and latencies in time units."""
  from regal_datasets.jax_import import NOMINAL_LINK_BYTES_PER_SECOND as units_per_second
  specs = [KINDS[k] for k in kinds]
  num = len(specs)
  bandwidth = np.empty((num, num))
  latency = np.empty((num, num))
  # The k-th accelerator of a kind sits in node k // node_size: nodes meet over the network.
  seen: dict[str, int] = {}
  node = []
  for kind in kinds:
    node.append((kind, seen.get(kind, 0) // KINDS[kind].node_size))
    seen[kind] = seen.get(kind, 0) + 1
  for i, a in enumerate(specs):
    for j, b in enumerate(specs):
      if a.family == b.family and a.family != "host" and node[i][1] == node[j][1]:
        bandwidth[i, j] = min(a.link_bandwidth, b.link_bandwidth)
        latency[i, j] = max(a.link_latency, b.link_latency)
      elif a.family == b.family and a.family != "host":
        bandwidth[i, j] = min(a.network_bandwidth, b.network_bandwidth)
        latency[i, j] = max(a.network_latency, b.network_latency)
      else:
        bandwidth[i, j], latency[i, j] = PCIE_BANDWIDTH, PCIE_LATENCY
  counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
  name = "+".join(f"{n}x{k}" for k, n in counts.items())
  return DeviceSpec(
      memory_capacity=np.array([s.memory_bytes for s in specs]),
      speed=np.array([s.peak_flops / specs[0].peak_flops for s in specs]),
      bandwidth=bandwidth / units_per_second, latency=latency * units_per_second, name=name,
      kinds=tuple(kinds))


MAX_DEVICES = 1024  # Candidates hold D x D link and channel state: past this, memory runs out.


def _check_count(num_devices: Any) -> None:
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
                         "latency", "kinds"}
  if unknown:
    raise errors.DeviceSpecError(f"device spec: unknown keys {sorted(unknown)}")
  num = data.get("num_devices")
  if num is None:
    speed = data.get("speed")
    num = len(speed) if isinstance(speed, list) else None
  _check_count(num)
  memory = data.get("memory_capacity")
  if isinstance(memory, list):
    memory = [np.inf if m is None else m for m in memory]
  kinds = _kinds(data.get("kinds", ()))
  speed = data.get("speed", 1.0)
  if "speed" not in data and kinds and all(kind in KINDS for kind in kinds):
    # The kinds' peak ratios, as a preset writes them (`accelerator_spec`): scale 1 each.
    speed = [KINDS[kind].peak_flops / KINDS[kinds[0]].peak_flops for kind in kinds]
  try:
    return DeviceSpec(memory_capacity=np.inf if memory is None else memory,
                      speed=_broadcast(speed, num),
                      bandwidth=data.get("bandwidth", 1.0), latency=data.get("latency", 0.0),
                      name=str(data.get("name", f"devices{num}")), kinds=kinds)
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


def load(path: str) -> DeviceSpec:
  if os.path.isdir(path):
    raise errors.DeviceSpecError(f"{path}: is a directory, expected a device description")
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
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
  if preset in ACCELERATOR_PRESETS:
    return accelerator_spec(kinds_of(preset, num_devices))
  raise errors.DeviceSpecError(f"unknown device preset {preset!r}; known: {', '.join(PRESETS)}")



def define_flags(flag_values=None) -> None:
  """Defines --devices, --device_spec and --device_preset for an absl binary."""
  from absl import flags  # Deferred: library users need not import absl.
  flag_values = flags.FLAGS if flag_values is None else flag_values
  flags.DEFINE_integer("devices", None, "Number of devices for the preset (default 2 for "
                       "homogeneous, 8 for nvlink_two_groups, 4 accelerators for h100 and the "
                       "other accelerator presets; a +cpu mix adds one host).",
                       flag_values=flag_values)
  flags.DEFINE_string("device_spec", None, "Device description JSON file (overrides "
                      "--devices and --device_preset).", flag_values=flag_values)
  flags.DEFINE_enum("device_preset", "homogeneous", list(PRESETS), "Device set preset: "
                    "abstract units (homogeneous, nvlink_two_groups) or real accelerators "
                    "whose roofline costs an imported graph's ops in seconds "
                    "(datasets/accelerators.py).", flag_values=flag_values)


def from_flags(flag_values=None) -> DeviceSpec:
  """The device set the flags of `define_flags` describe."""
  from absl import flags
  flag_values = flags.FLAGS if flag_values is None else flag_values
  return resolve(flag_values.devices, flag_values.device_spec, flag_values.device_preset)
