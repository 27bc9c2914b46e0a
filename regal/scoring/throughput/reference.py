"""Pipeline throughput of a split (Tarnawski et al., NeurIPS 2020, the max-load objective).

A split puts each op of a profiled workload (`regal_datasets.formats.profiled.Workload`) on an
accelerator 0..maxFPGAs-1 or on the CPU side (`profiled.CPU`). In a pipeline every device works
on a different sample at once, so the time per sample is the largest load:

* an accelerator's load: its ops' accelerator latencies; plus, for each of its ops whose output
  some op off the accelerator reads, that op's output cost once (it is sent out once); plus,
  for each op elsewhere that an op of this accelerator reads, that op's output cost once (it is
  received once, however many of this accelerator's ops read it);
* the CPU side's load: its ops' CPU latencies; it pays no transfer.

A split is feasible when every accelerator holds at most `maxSizePerFPGA` bytes, the ops of a
co-location class share a device, ops only a CPU runs are on the CPU side, and the device ids
stay below maxFPGAs (and the CPU side is used only if there is a CPU).

`max_load` is the readable reference (loops over ops and edges); `loads_batch` and
`max_load_batch` score a population with numpy and equal it.
"""
from __future__ import annotations

import numpy as np

from regal_datasets.formats.profiled import CPU, Workload


def loads(workload: Workload, device: np.ndarray) -> tuple[np.ndarray, float]:
  """(each accelerator's load [maxFPGAs], the CPU side's load) of a split [o], written for
  reading."""
  graph = workload.graph
  accelerator_load = np.zeros(workload.max_accelerators)
  cpu_load = 0.0
  for op in range(graph.num_ops):
    if device[op] == CPU:
      cpu_load += workload.cpu_latency[op]
    else:
      accelerator_load[device[op]] += workload.accelerator_latency[op]
  for op in range(graph.num_ops):
    readers = {int(device[reader]) for reader in graph.successors(op)}
    elsewhere = readers - {int(device[op])}
    if device[op] != CPU and elsewhere:
      accelerator_load[device[op]] += workload.output_cost[op]  # Sent out once.
    for reader in elsewhere - {CPU}:
      accelerator_load[reader] += workload.output_cost[op]  # Received once per accelerator.
  return accelerator_load, cpu_load


def max_load(workload: Workload, device: np.ndarray) -> float:
  """The time per sample of a split [o]: its largest load (the readable reference)."""
  accelerator_load, cpu_load = loads(workload, np.asarray(device))
  return float(max(accelerator_load.max(initial=0.0), cpu_load))


def violations(workload: Workload, device: np.ndarray) -> list[str]:
  """What makes a split [o] infeasible, one line each (empty: feasible)."""
  device = np.asarray(device)
  ids = workload.node_ids
  found = []
  bad = (device != CPU) & ((device < 0) | (device >= workload.max_accelerators))
  for op in np.flatnonzero(bad):
    found.append(f"node {ids[op]} is on device {device[op]}, outside the "
                 f"{workload.max_accelerators} accelerators")
  if workload.max_cpus == 0:
    for op in np.flatnonzero(device == CPU):
      found.append(f"node {ids[op]} is on the CPU side, and there is no CPU")
  for op in np.flatnonzero(~workload.on_accelerator & (device != CPU)):
    found.append(f"node {ids[op]} runs only on a CPU, but is on accelerator {device[op]}")
  for members in workload.group_members():
    if len(set(device[members].tolist())) > 1:
      found.append(f"the co-location class of node {ids[members[0]]} is split over devices "
                   f"{sorted(set(device[members].tolist()))}")
  for accelerator in range(workload.max_accelerators):
    held = workload.memory[device == accelerator].sum()
    if held > workload.accelerator_memory:
      found.append(f"accelerator {accelerator} holds {held:.6g} bytes, more than its "
                   f"{workload.accelerator_memory:.6g}")
  return found


def loads_batch(workload: Workload, devices: np.ndarray) -> np.ndarray:
  """Loads [P, A + 1] of a population of splits [P, o]: the A accelerators', then the CPU
  side's (vectorized `loads`)."""
  devices = np.asarray(devices, np.int64)
  population, num_ops = devices.shape
  accelerators = workload.max_accelerators
  slot = np.where(devices == CPU, accelerators, devices)
  rows = np.broadcast_to(np.arange(population)[:, None], slot.shape)
  load = np.zeros((population, accelerators + 1))
  np.add.at(load, (rows, slot), np.where(devices == CPU, workload.cpu_latency,
                                         workload.accelerator_latency))
  graph = workload.graph
  src = graph.tensor_producer[graph.data_edge_tensor]
  # reads[p, v, s]: an op on slot s reads v's output, v being elsewhere (one mark per pair).
  reads = np.zeros((population, num_ops, accelerators + 1), bool)
  reads[np.arange(population)[:, None], src[None, :], slot[:, graph.data_edge_consumer]] = True
  reads[rows, np.arange(num_ops)[None, :], slot] = False
  sent = np.where(slot == accelerators, 0.0, reads.any(axis=2) * workload.output_cost)
  np.add.at(load, (rows, slot), sent)
  load[:, :accelerators] += np.einsum("pvs,v->ps", reads[:, :, :accelerators],
                                      workload.output_cost)
  return load


def max_load_batch(workload: Workload, devices: np.ndarray) -> np.ndarray:
  """`max_load` of a population of splits [P, o] (float64 [P])."""
  return loads_batch(workload, devices).max(axis=1)


def lower_bound(workload: Workload) -> float:
  """No feasible split has a smaller max-load: the CPU side holds every class with an op only a
  CPU runs; each class costs at least its cheaper side (its accelerator compute or its CPU
  time) wherever it goes; and the classes' cheaper sides spread over the devices at best
  evenly. Transfers only add."""
  has_cpu = workload.max_cpus > 0
  fixed_cpu, cheapest, total = 0.0, 0.0, 0.0
  for members in workload.group_members():
    cpu = float(workload.cpu_latency[members].sum())
    if not workload.on_accelerator[members].all():
      fixed_cpu += cpu
      total += cpu
      continue
    least = min(float(workload.accelerator_latency[members].sum()), cpu if has_cpu else np.inf)
    cheapest = max(cheapest, least)
    total += least
  return max(fixed_cpu, cheapest, total / (workload.max_accelerators + has_cpu))
