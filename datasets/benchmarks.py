"""The shared task-graph benchmarks with known optima (`../shared/graphs/README.md`): their
instances as dicts (file, path, processors, optimum, lower bound, proven, tasks, CCR class,
family), and a deterministic stratified sample of them."""
from __future__ import annotations

import csv
import math
import os
from typing import Any

import numpy as np

from regal_datasets import devices as devices_lib
from regal_datasets.graph import Graph

# `../shared/graphs` beside the repository: the reference graphs in other projects' formats
# (read from there, never copied in). Every experiment finds them here.
SHARED_GRAPHS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                              "..", "shared", "graphs"))
DOPPLER_GRAPHS = os.path.join(SHARED_GRAPHS, "doppler")


def _ccr_class(row: dict[str, str]) -> float:
  """0.1, 1 or 10 (the table's ratio, rounded); 0 for graphs without edges (Independent)."""
  if not row["ccr"]:
    return 0.0
  return min((0.1, 1.0, 10.0), key=lambda c: abs(math.log(float(row["ccr"]) / c)))


def sinnen_instances(root: str) -> list[dict[str, Any]]:
  with open(os.path.join(root, "sinnen", "optimal.csv")) as f:
    rows = list(csv.DictReader(f))
  return [{"set": "sinnen", "file": row["file"], "path": os.path.join(root, "sinnen", row["file"]),
           "processors": int(row["processors"]), "optimum": float(row["optimal_length"]),
           "lower": float(row["optimal_length"]), "proven": True, "tasks": int(row["tasks"]),
           "ccr": _ccr_class(row),
           "family": row["family"]} for row in rows]


def stg_instances(root: str) -> list[dict[str, Any]]:
  instances = []
  folder = os.path.join(root, "stg", "optimal")
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name)) as f:
      for row in csv.reader(f):
        if not row:
          continue
        proven = len(row) == 3
        instances.append({
            "set": "stg", "file": row[0], "path": os.path.join(root, "stg", row[0]),
            "processors": int(row[1]), "optimum": float(row[2] if proven else row[3]),
            "lower": float(row[2]), "proven": proven, "tasks": 50, "ccr": 0.0,
            "family": "random"})
  return sorted(instances, key=lambda i: (i["file"], i["processors"]))


# Constructed-optimum task graphs (`regal_datasets.constructed`): the benchmark family, and the
# generator seed of each split (train: where settings may be tuned; test: never tuned on).
CONSTRUCTED_TASKS = (50, 100, 200, 300, 500)
CONSTRUCTED_PROCESSORS = (2, 4, 8, 16)
CONSTRUCTED_CCRS = (0.5, 1.0, 2.0)
CONSTRUCTED_SPLITS = {"constructed_train": 0, "constructed_test": 1000}


def constructed_instances(folder: str, split: str) -> list[dict[str, Any]]:
  """The split's 60 constructed instances (every size x processors x ratio, each with its edge
  recipe drawn from the widened family: `constructed.widened`), their DOT files written into
  `folder` (regenerated: they are deterministic), optimum proven by the work bound."""
  from regal_datasets import atomic, constructed  # Only this family needs the generator.
  os.makedirs(folder, exist_ok=True)
  instances = []
  for tasks in CONSTRUCTED_TASKS:
    for processors in CONSTRUCTED_PROCESSORS:
      for ccr in CONSTRUCTED_CCRS:
        instance = constructed.widened(tasks, processors, ccr, CONSTRUCTED_SPLITS[split])
        path = os.path.join(folder, instance.name + ".dot")
        atomic.write_text(path, instance.dot_text())
        instances.append({"set": split, "file": instance.name + ".dot", "path": path,
                          "processors": processors, "optimum": float(instance.optimum),
                          "lower": float(instance.optimum), "proven": True, "tasks": tasks,
                          "ccr": ccr, "family": "constructed"})
  return instances


def stratified(instances: list[dict], count: int, seed: int = 0) -> list[dict]:
  """`count` instances spread over (tasks, ccr, processors) strata, deterministically."""
  if count <= 0 or count >= len(instances):
    return instances
  rng = np.random.default_rng(seed)
  strata: dict[tuple, list[dict]] = {}
  for instance in instances:
    strata.setdefault((instance["tasks"], instance["ccr"], instance["processors"]),
                      []).append(instance)
  for members in strata.values():
    rng.shuffle(members)
  chosen, round_index = [], 0
  keys = [key for _, key in sorted((rng.random(), key) for key in sorted(strata))]
  while len(chosen) < count:
    for key in keys:
      if round_index < len(strata[key]) and len(chosen) < count:
        chosen.append(strata[key][round_index])
    round_index += 1
  return sorted(chosen, key=lambda i: (i["file"], i["processors"]))


def devices_at_ccr(graph: Graph, num_devices: int, ccr: float) -> devices_lib.DeviceSpec:
  """Identical devices whose links make the mean tensor's transfer `ccr` times the mean op's
  time, as task-graph benchmarks state their communication-to-computation ratio (0: free
  transfers)."""
  if ccr == 0:
    return devices_lib.homogeneous(num_devices, bandwidth=np.inf)
  bandwidth = float(np.mean(graph.tensor_size)) / (ccr * float(np.mean(graph.compute_cost)))
  return devices_lib.homogeneous(num_devices, bandwidth=bandwidth)
