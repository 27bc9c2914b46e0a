"""Profiled workloads with memory caps: msr-fiddle/dnn-partitioning's JSON (Tarnawski et al.,
"Efficient Algorithms for Device Placement of DNN Graph Operators", NeurIPS 2020).

One object: `maxSizePerFPGA` (bytes an accelerator holds; "FPGA" stands for any accelerator),
`maxFPGAs` and `maxCPUs` (how many of each), `nodes` and `edges`. A node has `id`,
`supportedOnFpga` (0 / 1 or a bool: 0 means only a CPU runs it), `cpuLatency` and
`fpgaLatency` (its time on a CPU core and on an accelerator), `isBackwardNode`, `size` (bytes it
holds on an accelerator) and optionally `colorClass` (nodes sharing one must share a device: a
forward op and its backward op); other keys (`name`, `layerId`, ...) are kept aside. An edge has
`sourceId`, `destId` and `cost`, the time to move the source's output between an accelerator
and CPU memory, the same on every edge leaving one node.

In the project's graph a node is an op (named by its id, in file order) whose compute cost is
its accelerator latency, with one output tensor of size `cost` read by one data edge per file
edge; the rest of the profile is the `Workload`'s arrays, which the pipeline objectives read.
A solution is `{"fpgas": [{"nodes": [ids]}, ...], "cpus": [{"nodes": [ids]}]}`
(`split_to_json` / `split_from_json`), where device -1 is the CPU side.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from typing import Any

import numpy as np

from regal_datasets import errors
from regal_datasets.devices import MAX_DEVICES, DeviceSpec
from regal_datasets.graph import Graph, GraphBuilder

FORMAT_NAME = "profiled"
PROFILE_KEY = "profiled"  # The graph metadata's key for what the graph's arrays do not hold.
CPU = -1  # The CPU side in a split's device array; accelerators are 0, 1, ...
# The published reference points of these workloads (Tarnawski et al. 2020, their code run on
# them; ../shared/graphs/profiled/README.md), by file stem: max-load of their optimal contiguous
# DP, PipeDream's partitioner and their local search; single-sample latency of their greedy
# and of their DP's split.
PUBLISHED_THROUGHPUT = {
    "layer_bert24_inference": {"dp": 17.79, "pipedream": 17.79},
    "layer_bert24_training": {"dp": 41.75, "pipedream": 187.91, "local_search": 39.94},
    "layer_gnmt_inference": {"dp": 32.91, "pipedream": 33.03, "local_search": 31.78},
    "layer_gnmt_training": {"dp": 107.00, "pipedream": 294.91, "local_search": 90.95},
    "layer_inceptionv3_inference": {"pipedream": 60.42, "local_search": 54.04},
    "layer_resnet50_inference": {"dp": 33.77, "pipedream": 39.40},
    "layer_resnet50_training": {"dp": 78.63, "pipedream": 83.67},
    "op_bert_l-3_inference": {"dp": 27.92},
    "op_bert_l-6_inference": {"dp": 29.58, "pipedream": 65.56},
    "op_bert_l-6_training": {"dp": 72.87, "pipedream": 192.92},
}
PUBLISHED_LATENCY = {
    "layer_bert24_inference": {"greedy": 100.22, "dp_split": 108.03},
    "layer_gnmt_inference": {"greedy": 268.50},
    "layer_inceptionv3_inference": {"greedy": 2485.24},
    "layer_resnet50_inference": {"greedy": 4197.06, "dp_split": 1443.79},
    "op_bert_l-3_inference": {"greedy": 416.20, "dp_split": 414.44},
    "op_bert_l-6_inference": {"greedy": 494.14, "dp_split": 444.02},
}
_TOP_KEYS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges")
_NODE_KEYS = ("id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode", "size")
_EDGE_KEYS = ("sourceId", "destId", "cost")


@dataclasses.dataclass(frozen=True, eq=False)
class Workload:
  """A profiled graph, its per-op profile and its device limits (op i is the file's i-th
  node)."""
  graph: Graph
  node_ids: np.ndarray  # [o] int64: the file's ids
  accelerator_latency: np.ndarray  # [o] float64
  cpu_latency: np.ndarray  # [o] float64
  on_accelerator: np.ndarray  # [o] bool: an accelerator can run it (else only a CPU)
  memory: np.ndarray  # [o] float64 bytes held on an accelerator
  backward: np.ndarray  # [o] bool
  colocation: np.ndarray  # [o] int64 group: ops of one group share a device (0..groups-1)
  output_cost: np.ndarray  # [o] float64 time to move the op's output to or from the CPU side
  accelerator_memory: float  # bytes one accelerator holds
  max_accelerators: int
  max_cpus: int

  @property
  def num_ops(self) -> int:
    return self.graph.num_ops

  @property
  def num_groups(self) -> int:
    return int(self.colocation.max()) + 1 if self.num_ops else 0

  def group_members(self) -> list[np.ndarray]:
    """The ops of each co-location group, in op order."""
    order = np.argsort(self.colocation, kind="stable")
    bounds = np.searchsorted(self.colocation[order], np.arange(self.num_groups + 1))
    return [order[bounds[g]:bounds[g + 1]] for g in range(self.num_groups)]


def _number(value: Any, what: str, source: str, integer: bool = False) -> float:
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    raise errors.FormatError(f"{source}: {what} must be a number, got {value!r}"[:300])
  try:
    float(value)
  except OverflowError:  # An integer past float64's range.
    raise errors.FormatError(f"{source}: {what} is {errors.brief(value)}, beyond float64's "
                             f"range") from None
  if not math.isfinite(value) or value < 0:
    raise errors.FormatError(f"{source}: {what} must be finite and non-negative, got {value!r}")
  if integer and value != int(value):
    raise errors.FormatError(f"{source}: {what} must be a whole number, got {value!r}")
  return float(value)


def _flag(value: Any, what: str, source: str) -> bool:
  if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
    return bool(value)
  raise errors.FormatError(f"{source}: {what} must be 0, 1, true or false, got {value!r}"[:300])


def _require(entry: Any, keys: tuple[str, ...], what: str, source: str) -> None:
  if not isinstance(entry, dict):
    raise errors.FormatError(f"{source}: {what} must be an object, got {type(entry).__name__}")
  missing = [k for k in keys if k not in entry]
  if missing:
    raise errors.FormatError(f"{source}: {what} lacks {', '.join(missing)}")


def _json(text: str, source: str) -> Any:
  """The file's JSON; one line for what `json` refuses, nesting past Python's stack and
  integers of more digits than Python converts included."""
  try:
    return json.loads(text)
  except json.JSONDecodeError as error:
    raise errors.FormatError(f"{source}: not valid JSON ({error.msg}, line {error.lineno})"
                             ) from None
  except RecursionError:
    raise errors.FormatError(f"{source}: not a profiled workload (nested too deeply)") from None
  except ValueError:  # An integer of more digits than Python converts.
    raise errors.FormatError(f"{source}: a number has more digits than Python reads "
                             f"({sys.get_int_max_str_digits()})") from None


def _count(value: Any, what: str, source: str) -> int:
  """A device count of the file: a whole number up to `devices.MAX_DEVICES` (the search and
  its models hold state per device: past it, memory runs out)."""
  count = _number(value, what, source, integer=True)
  if count > MAX_DEVICES:
    raise errors.FormatError(f"{source}: {what} is {errors.brief(value)}, above the "
                             f"{MAX_DEVICES} devices the models can hold")
  return int(count)


def _finite_total(values: list[float], what: str, source: str) -> None:
  """The models add these up in float64: a total past its range would be inf."""
  with np.errstate(over="ignore"):
    total = float(np.sum(values, dtype=np.float64))
  if not math.isfinite(total):
    raise errors.FormatError(f"{source}: the {what} add up to more than float64 holds "
                             f"({np.finfo(np.float64).max:.3g}); scale the units down")


def parse_workload(text: str, source: str = "<text>") -> Workload:
  """A `Workload` from the format's text; one-line `FormatError`s name what is wrong."""
  data = _json(text, source)
  _require(data, _TOP_KEYS, "the workload", source)
  cap = _number(data["maxSizePerFPGA"], "maxSizePerFPGA", source)
  accelerators, cpus = (_count(data[key], key, source) for key in ("maxFPGAs", "maxCPUs"))
  nodes, edges = data["nodes"], data["edges"]
  if not isinstance(nodes, list) or not nodes:
    raise errors.FormatError(f"{source}: nodes must be a non-empty list")
  if not isinstance(edges, list):
    raise errors.FormatError(f"{source}: edges must be a list")
  if accelerators + cpus < 1:
    raise errors.FormatError(f"{source}: maxFPGAs and maxCPUs are both 0: no device to run on")

  ids, index = [], {}
  fields = {k: [] for k in ("fpga", "cpu", "on", "size", "backward")}
  colors: list[Any] = []
  for k, node in enumerate(nodes):
    _require(node, _NODE_KEYS, f"node {k}", source)
    node_id = node["id"]
    if isinstance(node_id, bool) or not isinstance(node_id, int):
      raise errors.FormatError(f"{source}: node {k}: id must be an integer, got {node_id!r}")
    if node_id in index:
      raise errors.FormatError(f"{source}: duplicate node id {node_id}")
    index[node_id] = k
    ids.append(node_id)
    what = f"node {node_id}"
    fields["fpga"].append(_number(node["fpgaLatency"], f"{what}: fpgaLatency", source))
    fields["cpu"].append(_number(node["cpuLatency"], f"{what}: cpuLatency", source))
    fields["size"].append(_number(node["size"], f"{what}: size", source))
    fields["on"].append(_flag(node["supportedOnFpga"], f"{what}: supportedOnFpga", source))
    fields["backward"].append(_flag(node["isBackwardNode"], f"{what}: isBackwardNode", source))
    color = node.get("colorClass")
    if color is not None and (isinstance(color, bool) or not isinstance(color, int)):
      raise errors.FormatError(f"{source}: {what}: colorClass must be an integer, got "
                               f"{color!r}")
    colors.append(("own", node_id) if color is None else ("class", color))

  for field, what in (("fpga", "fpgaLatency values"), ("cpu", "cpuLatency values"),
                      ("size", "sizes")):
    _finite_total(fields[field], what, source)

  output_cost: dict[int, float] = {}
  pairs = []
  for k, edge in enumerate(edges):
    _require(edge, _EDGE_KEYS, f"edge {k}", source)
    src, dst = edge["sourceId"], edge["destId"]
    for end in (src, dst):
      if isinstance(end, bool) or not isinstance(end, int) or end not in index:
        raise errors.FormatError(f"{source}: edge {k} names unknown node {end!r}")
    if src == dst:
      raise errors.FormatError(f"{source}: edge {k} is a self-loop on node {src}")
    cost = _number(edge["cost"], f"edge {k}: cost", source)
    if output_cost.setdefault(src, cost) != cost:
      raise errors.FormatError(f"{source}: edges leaving node {src} carry different costs "
                               f"({output_cost[src]} and {cost}); the format gives one per node")
    pairs.append((index[src], index[dst]))
  _finite_total(list(output_cost.values()), "edge costs", source)

  # The profile beyond the graph rides in its metadata, so the workload survives a round trip
  # through the project's own JSON (`workload_from_graph`, `graph_to_text`).
  profile = {key: data[key] for key in ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")}
  profile["nodes"] = [{key: value for key, value in node.items() if key != "fpgaLatency"}
                      for node in nodes]
  builder = GraphBuilder(os.path.splitext(os.path.basename(source))[0] or "profiled",
                         metadata={PROFILE_KEY: profile})
  for k, node_id in enumerate(ids):
    builder.add_op(str(node_id), fields["fpga"][k], op_type="backward" if fields["backward"][k]
                   else "forward")
  tensors = [builder.add_tensor(k, output_cost.get(node_id, 0.0)) for k, node_id in
             enumerate(ids)]
  for src, dst in pairs:
    builder.add_data_edge(tensors[src], dst)
  graph = builder.build()  # Validates: a cycle is a one-line error here.

  group_of: dict[Any, int] = {}
  colocation = np.asarray([group_of.setdefault(c, len(group_of)) for c in colors], np.int64)
  workload = Workload(
      graph=graph, node_ids=np.asarray(ids, np.int64),
      accelerator_latency=np.asarray(fields["fpga"]), cpu_latency=np.asarray(fields["cpu"]),
      on_accelerator=np.asarray(fields["on"], bool), memory=np.asarray(fields["size"]),
      backward=np.asarray(fields["backward"], bool), colocation=colocation,
      output_cost=np.asarray([output_cost.get(i, 0.0) for i in ids]),
      accelerator_memory=cap, max_accelerators=accelerators, max_cpus=cpus)
  _check_groups(workload, source)
  return workload


def _check_groups(workload: Workload, source: str) -> None:
  """What no split can satisfy, and a co-location class an accelerator could run but cannot
  hold (a forward op and its backward op bigger than an accelerator: most likely sizes in the
  wrong unit, and putting the pair on the CPU side would hide it)."""
  cap, any_cpu = workload.accelerator_memory, workload.max_cpus > 0
  for members in workload.group_members():
    name = workload.node_ids[members[0]]
    cpu_only = not workload.on_accelerator[members].all()
    if cpu_only and not any_cpu:
      raise errors.FormatError(f"{source}: node {name}'s co-location class has an op only a "
                               f"CPU runs, and maxCPUs is 0")
    needed = workload.memory[members].sum()
    if not cpu_only and needed > cap:
      raise errors.FormatError(
          f"{source}: node {name}'s co-location class needs {needed:.6g} bytes, more than one "
          f"accelerator holds (maxSizePerFPGA {cap:.6g})")
  if not any_cpu:
    total = workload.memory.sum()
    required = math.ceil(total / cap) if cap > 0 else (0 if total == 0 else math.inf)
    if required > workload.max_accelerators:
      raise errors.FormatError(
          f"{source}: with no CPU the ops' {total:.6g} bytes need at least {required} "
          f"accelerators, and maxFPGAs is {workload.max_accelerators}")


def with_devices(workload: Workload, spec: DeviceSpec, source: str = "--device_spec"
                 ) -> Workload:
  """The workload on the accelerators a device spec describes, in place of the file's: their
  count (maxFPGAs), memory cap (maxSizePerFPGA; unlimited: room for every op), speed (the
  profiled accelerator latencies divided by it) and links (an output's transfer costs
  latency + cost / bandwidth). The CPU side stays as the file says. The format's accelerators
  are alike, so the spec's must be too; the result is checked as a file is."""
  off_diagonal = ~np.eye(spec.num_devices, dtype=bool)
  for field, values in (("memory_capacity", spec.memory_capacity), ("speed", spec.speed),
                        ("bandwidth", spec.bandwidth[off_diagonal]),
                        ("latency", spec.latency[off_diagonal])):
    if len(values) and not (values == values[0]).all():
      raise errors.DeviceSpecError(
          f"{source}: a profiled workload's accelerators are alike, but {field} differs "
          f"between devices ({', '.join(f'{v:g}' for v in np.unique(values)[:4])})")
  cap = float(spec.memory_capacity[0])
  if not math.isfinite(cap):
    cap = float(workload.memory.sum())  # Unlimited: every op fits on one accelerator.
  bandwidth = float(spec.bandwidth[off_diagonal][0]) if spec.num_devices > 1 else 1.0
  latency = float(spec.latency[off_diagonal][0]) if spec.num_devices > 1 else 0.0
  graph = workload.graph
  sends = np.zeros(workload.num_ops, bool)
  sends[graph.tensor_producer[graph.data_edge_tensor]] = True
  with np.errstate(over="ignore", divide="ignore"):  # Past float64: refused below.
    moved = dataclasses.replace(
        workload, accelerator_latency=workload.accelerator_latency / spec.speed[0],
        output_cost=np.where(sends, latency + workload.output_cost / bandwidth, 0.0),
        accelerator_memory=cap, max_accelerators=spec.num_devices)
  _finite_total(moved.accelerator_latency.tolist(), "accelerator latencies divided by the "
                "speed", source)
  _finite_total(moved.output_cost.tolist(), "transfer times (latency + cost / bandwidth)",
                source)
  _check_groups(moved, source)
  return moved


def graph_to_text(graph: Graph) -> str:
  """The format's JSON of a graph read from it (its profile in the metadata); fpgaLatency is
  the graph's compute cost, and the edges are its data edges (informational edge keys such as
  `size` are not kept)."""
  profile = graph.metadata.get(PROFILE_KEY)
  if not isinstance(profile, dict) or not isinstance(profile.get("nodes"), list) or \
      len(profile["nodes"]) != graph.num_ops:
    raise errors.FormatError(
        f"graph {graph.name!r} has no profile (CPU latencies, sizes, memory cap): only a "
        f"graph read from a profiled workload can be written in the {FORMAT_NAME} format")
  nodes = []
  for k, node in enumerate(profile["nodes"]):
    if not isinstance(node, dict) or "id" not in node:
      raise errors.FormatError(f"graph {graph.name!r}: profile node {k} is not a node object")
    nodes.append({**node, "fpgaLatency": float(graph.compute_cost[k])})
  ids = [node["id"] for node in nodes]
  producer = graph.tensor_producer[graph.data_edge_tensor]
  edges = [{"sourceId": ids[u], "destId": ids[v], "cost": float(graph.tensor_size[t])}
           for u, v, t in zip(producer.tolist(), graph.data_edge_consumer.tolist(),
                              graph.data_edge_tensor.tolist())]
  data = {key: profile.get(key) for key in ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")}
  return json.dumps({**data, "nodes": nodes, "edges": edges}, indent=1) + "\n"


def workload_from_graph(graph: Graph, source: str = "<graph>") -> Workload:
  """The workload of a graph that carries a profile, checked as a file of the format is."""
  return parse_workload(graph_to_text(graph), source)


def parse_graph(text: str, source: str = "<text>") -> Graph:
  """`regal_datasets.io`'s parser: the workload's graph, its profile in the metadata."""
  return parse_workload(text, source).graph


def looks_like_profiled(text: str) -> bool:
  """A JSON object with the format's top-level keys (the project's JSON of a converted
  workload holds them too, but inside its metadata)."""
  if not text.lstrip().startswith("{") or '"maxSizePerFPGA"' not in text:
    return False
  try:
    data = json.loads(text)
  except json.JSONDecodeError:
    return False
  except (ValueError, RecursionError):  # Past what Python reads: `parse_workload` says so.
    return True
  return isinstance(data, dict) and "maxSizePerFPGA" in data and "nodes" in data


def split_to_json(workload: Workload, device: np.ndarray) -> dict:
  """A split [o] (accelerator index, or CPU) in the format's own shape: one entry per
  accelerator used (in index order), node ids in op order; the CPU side as one entry."""
  device = np.asarray(device)
  used = sorted(int(d) for d in set(device.tolist()) if d != CPU)
  return {"fpgas": [{"nodes": workload.node_ids[device == d].tolist()} for d in used],
          "cpus": [{"nodes": workload.node_ids[device == CPU].tolist()}]}


def split_from_json(workload: Workload, data: Any, source: str = "<split>") -> np.ndarray:
  """The device [o] of each op in a split object; every node must appear exactly once, except
  that a training split may list forward nodes only (a backward node then goes where its
  co-location class goes, as in the human-expert splits)."""
  if not isinstance(data, dict) or not isinstance(data.get("fpgas", []), list) or \
      not isinstance(data.get("cpus", []), list):
    raise errors.FormatError(f"{source}: a split is an object with lists fpgas and cpus")
  position = {int(i): k for k, i in enumerate(workload.node_ids)}
  device = np.full(workload.num_ops, -2, np.int64)
  entries = [(d, e) for d, e in enumerate(data.get("fpgas", []))] + [
      (CPU, e) for e in data.get("cpus", [])]
  for d, entry in entries:
    if not isinstance(entry, dict) or not isinstance(entry.get("nodes"), list):
      raise errors.FormatError(f"{source}: every split entry needs a list of nodes")
    for node_id in entry["nodes"]:
      if isinstance(node_id, bool) or not isinstance(node_id, int) or node_id not in position:
        raise errors.FormatError(f"{source}: the split names unknown node {node_id!r}")
      if device[position[node_id]] != -2:
        raise errors.FormatError(f"{source}: the split lists node {node_id} twice")
      device[position[node_id]] = d
  missing = device == -2
  if missing.any():
    for members in workload.group_members():
      placed = device[members][~missing[members]]
      if len(set(placed.tolist())) == 1:
        device[members[missing[members]]] = placed[0]
    missing = device == -2
  if missing.any():
    raise errors.FormatError(f"{source}: the split leaves node "
                             f"{workload.node_ids[np.flatnonzero(missing)[0]]} unplaced")
  return device
