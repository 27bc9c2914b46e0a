"""How `regal.optimize` splits an imported graph before placing it (issue 70's `--shard`), and
the plan it hands back per original op.

`--shard K` splits ops into K blocks (`regal.parallelism.shard_imported`), `--shard auto` chooses K
among the divisors of the device count (and of the count of the first accelerator kind, so a
GPU + host mix can leave the host out), or no split. For each K three strategies are measured:
`batch` (every op on its batch dimension, as data parallelism), `batch+largest` (an op
without a batch dimension that K divides, and with FLOPs, on its largest parallel dimension
instead of whole) and `greedy` (each op with FLOPs, in topological order, on the dimension
of least estimated time, its shard's roofline plus what changing layouts moves: a
weight-bound matmul splits its weight rather than its batch). Measured means: the graph split,
costed (a preset's roofline), and its blocks placed by shard index
(`baselines.data_parallel.aligned_assignment`) scored by the reference model, against the
unsplit graph on one device; the lowest objective wins (ties: the first measured, fewer
shards), and the search starts from that aligned assignment among its seeds.
`--method data_parallel` is the `batch` split with one shard per device (its choice, with
`--shard auto` or without `--shard`), or K with `--shard K`. The run reports every candidate
measured.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from regal.parallelism import hardware, roofline, shard_imported
from regal_datasets import errors, op_dims
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.baselines import data_parallel
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance

MAX_SHARDS = 1024
STRATEGIES = ("batch", "batch+largest", "greedy")


def parse(spec: str | int) -> str | int:
  """"off", "auto" or a shard count; anything else is a one-line error."""
  if isinstance(spec, int) and not isinstance(spec, bool):
    value = spec
  elif isinstance(spec, str) and spec in ("off", "auto"):
    return spec
  elif isinstance(spec, str) and spec.strip().isdigit():
    value = int(spec)
  else:
    raise errors.ConfigError(f"--shard must be auto, off or a shard count, got {spec!r}")
  if not 1 <= value <= MAX_SHARDS:
    raise errors.ConfigError(f"--shard must be between 1 and {MAX_SHARDS}, got {value}")
  return value


@dataclasses.dataclass(frozen=True)
class Plan:
  """The graph and devices a run places (split and costed), the original graph costed the
  same way (for the one-device baseline), and what was chosen (None: no split asked)."""
  graph: Graph
  devices: DeviceSpec
  original: Graph
  original_devices: DeviceSpec
  details: dict[str, Any] | None


def choice_for(graph: Graph, shards: int, strategy: str,
               devices: DeviceSpec | None = None) -> list[int | None]:
  """Per op, the label `strategy` splits it on into `shards` blocks (None: whole)."""
  choice = shard_imported.data_parallel_choice(graph, shards)
  if strategy == "batch":
    return choice
  if strategy == "greedy":
    return _greedy_choice(graph, shards, choice, devices)
  dims = op_dims.graph_dims(graph)
  flops = np.asarray(graph.metadata["op_flops"], float)
  for op, labels in enumerate(shard_imported.candidates(graph, shards)):
    parallel = [label for label in labels if label in dims[op].split] if labels else []
    if choice[op] is None and flops[op] > 0 and parallel:
      choice[op] = max(parallel, key=lambda label: dims[op].sizes[label])
  return choice


def _greedy_choice(graph: Graph, shards: int, batch: list[int | None],
                   devices: DeviceSpec | None) -> list[int | None]:
  """Ops in topological order, each (with FLOPs) on the label of least estimated time: its
  shard's own time (the roofline of the first device kind, else its cost / K) plus moving
  what it reads in another layout than its producer made (an operand split along another
  axis, or whole, crosses a link: (K - 1) / K of its bytes) and, for a contracted label, the
  partials to reduce. Ties keep the batch. What it buys: a weight-bound matmul splits its
  weight (out features, then the next matmul's contracted dimension: Megatron's pattern) where
  the batch would read the whole weight on every device."""
  kind = hardware.KINDS[devices.kinds[0]] if devices is not None and devices.kinds else None
  units = float(graph.metadata.get("link_bytes_per_second", 1.0))  # Time units per second.
  link = (float(devices.bandwidth[0, 1]), float(devices.latency[0, 1])) if (
      devices is not None and devices.num_devices > 1) else (1.0, 0.0)
  dims = op_dims.graph_dims(graph)
  flops = np.asarray(graph.metadata["op_flops"], float)
  operands = graph.metadata["operands"]
  resident = shard_imported.resident_ops(graph)
  port = graph.tensor_port
  outputs: list[list[int]] = [[] for _ in range(graph.num_ops)]
  for tensor, producer in enumerate(graph.tensor_producer.tolist()):
    outputs[producer].append(tensor)
  candidates = shard_imported.candidates(graph, shards)
  choice = list(batch)

  def split_axis(tensor: int) -> int | None:
    """The axis its producer splits `tensor` along under `choice` (None: whole)."""
    producer = int(graph.tensor_producer[tensor])
    label = choice[producer]
    if label is None or dims[producer] is None or label in dims[producer].combine:
      return None
    axes = dims[producer].outputs[int(port[tensor])]
    return axes.index(label) if label in axes else None

  def moved(bytes_: float) -> float:
    return link[1] + bytes_ * (shards - 1) / shards / link[0]

  for op in graph.topological_order.tolist():
    labels = candidates[op]
    if not labels or flops[op] <= 0:
      continue
    d = dims[op]

    def cost(label: int) -> float:
      read = transfer = 0.0
      for tensor, axes in zip(operands[op], d.inputs):
        if tensor is None:
          continue
        size = float(graph.tensor_size[tensor])
        read += size / (shards if label in axes else 1)
        if resident[int(graph.tensor_producer[tensor])]:
          continue  # A parameter copy: local.
        have = split_axis(tensor)
        want = axes.index(label) if label in axes else None
        if have != want:
          transfer += moved(size)
      written = sum(float(graph.tensor_size[t]) for t in outputs[op])
      if label in d.combine:
        transfer += moved(written)
      else:
        written /= shards
      if kind is None:
        own = float(graph.compute_cost[op]) / shards
      else:
        own = units * max(flops[op] / shards / kind.peak_flops,
                          (read + written) / kind.memory_bandwidth)
      return own + transfer
    choice[op] = min(labels, key=lambda l: (cost(l), l != batch[op]))
  return choice


def _aligned_objective(graph: Graph, devices: DeviceSpec, model: str, objective: str,
                       memory_limit: float | None) -> float:
  problem = performance.Problem(graph, devices, model=model, objective=objective,
                                memory_limit=memory_limit)
  placement, order = data_parallel.aligned_assignment(graph, devices)
  chromosome = chromosome_lib.encode(placement, order, problem.layout)
  return performance.score_reference(problem, chromosome)[0]


def _shard_counts(devices: DeviceSpec) -> list[int]:
  counts = {devices.num_devices}
  if devices.kinds:
    counts.add(devices.kinds.count(devices.kinds[0]))
  return sorted({k for n in counts for k in range(2, n + 1) if n % k == 0})


def plan(graph: Graph, devices: DeviceSpec, shard: str | int, method: str, model: str = "wc",
         objective: str = "runtime", memory_limit: float | None = None,
         shards_by_batch: bool = False) -> Plan:
  """What the run places (the module doc); `shards_by_batch`: the method splits the graph
  itself, each op on its batch (its record's field, `methods.Method.shards_by_batch`)."""
  shard = parse(shard)
  if shard == "off" and not shards_by_batch:
    original, original_devices = roofline.recost(graph, devices)
    return Plan(original, original_devices, original, original_devices, None)
  shard_imported.candidates(graph, 2)  # Refuses a graph without op shapes, in one line.
  original, original_devices = roofline.recost(
      shard_imported.without_resident_costs(graph), devices)
  if shards_by_batch:  # Its own choice ("auto", or no --shard): one per device.
    shards = devices.num_devices if shard in ("off", "auto") else shard
    shard_imported.check_shards(graph, shards)
    candidates = [(shards, "batch")]
  elif shard == "auto":
    candidates = [(1, "none")] + [(k, s) for k in _shard_counts(devices) for s in STRATEGIES
                                  if any(shard_imported.candidates(graph, k))]
  else:
    shard_imported.check_shards(graph, shard)
    candidates = [(shard, s) for s in STRATEGIES] if shard > 1 else [(1, "none")]
  measured = []
  best = None
  for shards, strategy in candidates:
    choice = None
    if strategy == "none":
      split, split_devices = original, original_devices
      value = _single_device_objective(original, original_devices, model, objective,
                                       memory_limit)
    else:
      choice = choice_for(graph, shards, strategy, devices)
      if not any(label is not None for label in choice):
        if shards_by_batch:
          raise errors.ConfigError(f"--method {method}: no op of graph {graph.name!r} "
                                   f"has a batch dimension that {shards} divides")
        continue
      split, split_devices = roofline.recost(shard_imported.shard(graph, shards, choice),
                                                 devices)
      value = _aligned_objective(split, split_devices, model, objective, memory_limit)
    row = {"shards": shards, "strategy": strategy, "ops": split.num_ops,
           "split_ops": 0 if choice is None else sum(c is not None for c in choice),
           "objective": value}
    measured.append(row)
    if best is None or value < best[0] * (1 - 1e-9):
      best = (value, split, split_devices, row)
  _, graph_out, devices_out, row = best
  details = {"mode": method if shards_by_batch else shard,
             "chosen": {"shards": row["shards"], "strategy": row["strategy"]},
             "candidates": measured, "source_ops": graph.num_ops, "ops": graph_out.num_ops,
             "resident_reads": graph_out.metadata.get("sharding", {}).get("resident_reads", 0)}
  return Plan(graph_out, devices_out, original, original_devices, details)


def _single_device_objective(graph: Graph, devices: DeviceSpec, model: str, objective: str,
                             memory_limit: float | None) -> float:
  """The unsplit graph on one device: what a split must beat."""
  from regal import search  # Local: the search package loads JAX programs.
  problem = performance.Problem(graph, devices, model=model, objective=objective,
                                memory_limit=memory_limit)
  return performance.score_reference(problem, search.single_device_seed(problem))[0]


def plan_rows(graph: Graph, placement: np.ndarray, schedule) -> list[dict[str, Any]]:
  """The plan per original op: how it was split and where each shard runs, when (a run's
  result JSON, `sharding.plan`)."""
  shard_of = graph.metadata.get("shard_of")
  if not shard_of:
    return []
  rows: dict[int, dict[str, Any]] = {}
  for op, (original, shard, role, label) in enumerate(shard_of):
    row = rows.setdefault(original, {"op": original, "label": label, "shards": []})
    row["shards"].append({"name": graph.op_names[op], "shard": shard, "role": role,
                          "device": int(placement[op]), "start": float(schedule.op_start[op]),
                          "end": float(schedule.op_end[op])})
  return [rows[k] for k in sorted(rows)]
