"""The accelerators we cost on (issue 83): each kind's peaks, memory and wiring with their
sources (`KINDS`), the device sets a `--device_preset` of them makes (`accelerator_spec`), and
the device flags of `regal.optimize`, which resolve abstract presets and files through
`regal_datasets.devices` (a `DeviceSpec` is the representation; this module is the catalogue).

A device set names its kinds (`DeviceSpec.kinds`); an imported graph's ops are then costed on
them by `regal.parallelism.roofline.recost`. In a device JSON file, devices whose `kinds` are
given without `speed` each run at their kind's peak (the ratios a preset writes); a `speed`
beside `kinds` scales each device against its kind's peak.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from regal_datasets import devices, errors


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
NVLINK_PORT, NETWORK_PORT = 0, 1  # `DeviceSpec.ports`' classes.
PCIE_BANDWIDTH = 50e9  # PCIe 5.0 x16, each direction, as measured rather than nominal.
PCIE_LATENCY = 10e-6
MIXES = ("h100+cpu", "a100+cpu")  # `--devices` accelerators and one host.


def kinds_of(preset: str, num_devices: int | None) -> list[str]:
  """The kind of each device of `preset` (`--devices` accelerators, plus a host for a mix)."""
  if preset not in PRESETS:
    raise errors.DeviceSpecError(f"unknown accelerator preset {preset!r}; known: "
                                 f"{', '.join(PRESETS)}")
  count = 4 if num_devices is None else num_devices
  if preset in MIXES:
    accelerator, host = preset.split("+")
    return [accelerator] * count + [host]
  return [preset] * count


def accelerator_spec(kinds: list[str]) -> devices.DeviceSpec:
  """Devices of these kinds: memory in bytes, speeds by peak FLOP/s (refined per graph by
  `recost`), links in bytes per time unit and latencies in time units."""
  from regal_datasets.jax_import import NOMINAL_LINK_BYTES_PER_SECOND as units_per_second
  specs = [KINDS[k] for k in kinds]
  num = len(specs)
  bandwidth = np.empty((num, num))
  latency = np.empty((num, num))
  # Each accelerator's NVLink (or ICI) reaches every peer of its node through one port, its
  # network card every other node's through another: one transfer at a time on each, each way.
  # PCIe gives each GPU a link of its own to the host.
  ports = np.full((num, num), -1)
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
        ports[i, j] = NVLINK_PORT
      elif a.family == b.family and a.family != "host":
        bandwidth[i, j] = min(a.network_bandwidth, b.network_bandwidth)
        latency[i, j] = max(a.network_latency, b.network_latency)
        ports[i, j] = NETWORK_PORT
      else:
        bandwidth[i, j], latency[i, j] = PCIE_BANDWIDTH, PCIE_LATENCY
  counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
  name = "+".join(f"{n}x{k}" for k, n in counts.items())
  return devices.DeviceSpec(
      memory_capacity=np.array([s.memory_bytes for s in specs]),
      speed=np.array([s.peak_flops / specs[0].peak_flops for s in specs]),
      bandwidth=bandwidth / units_per_second, latency=latency * units_per_second, name=name,
      kinds=tuple(kinds), ports=ports)


ACCELERATOR_PRESETS = (*KINDS, *MIXES)
PRESETS = devices.TOPOLOGY_PRESETS + ACCELERATOR_PRESETS  # What `--device_preset` takes.


def check_kinds(spec: devices.DeviceSpec) -> devices.DeviceSpec:
  """`spec`, once every kind it names is one of `KINDS` (one-line error otherwise)."""
  unknown = sorted(set(spec.kinds) - set(KINDS))
  if unknown:
    raise errors.DeviceSpecError(f"device spec: unknown kind {unknown[0]!r}; known: "
                                 f"{', '.join(KINDS)}")
  return spec


def from_json_dict(data) -> devices.DeviceSpec:
  """`devices.from_json_dict`, where kinds given without speeds run at their peaks' ratios."""
  if isinstance(data, dict) and "speed" not in data and isinstance(data.get("kinds"), list):
    kinds = data["kinds"]
    if kinds and all(kind in KINDS for kind in kinds):
      data = {**data, "speed": [KINDS[kind].peak_flops / KINDS[kinds[0]].peak_flops
                                for kind in kinds]}
  return check_kinds(devices.from_json_dict(data))


def load(path: str) -> devices.DeviceSpec:
  """A device JSON file (`regal_datasets.devices`' form), its kinds checked."""
  data = devices.read_json(path)
  try:
    return from_json_dict(data)
  except errors.DeviceSpecError as error:
    raise errors.DeviceSpecError(f"{path}: {error}") from None


def resolve(num_devices: int | None = None, spec_path: str | None = None,
            preset: str = "homogeneous") -> devices.DeviceSpec:
  """The device set named by command-line flags: a JSON file wins over a preset."""
  if spec_path:
    return load(spec_path)
  if preset in ACCELERATOR_PRESETS:
    if num_devices is not None:
      devices.check_count(num_devices)
    return accelerator_spec(kinds_of(preset, num_devices))
  if preset not in PRESETS:
    raise errors.DeviceSpecError(f"unknown device preset {preset!r}; known: "
                                 f"{', '.join(PRESETS)}")
  return devices.resolve(num_devices, None, preset)


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
                    "(regal/parallelism/hardware.py).", flag_values=flag_values)


def from_flags(flag_values=None) -> devices.DeviceSpec:
  """The device set the flags of `define_flags` describe."""
  from absl import flags
  flag_values = flags.FLAGS if flag_values is None else flag_values
  return resolve(flag_values.devices, flag_values.device_spec, flag_values.device_preset)
