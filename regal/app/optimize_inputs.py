"""What `python -m regal.optimize` reads and checks before JAX, numba, Ray or the search load:
the flags' values, the devices, the output paths and the graph itself (read and validated),
so that every mistake in them is one line within half a second. `regal.app.optimize_cli`
(the heavy half) takes the `Inputs` from here; the checks that need the method registry
(a flag the chosen method would not read) stay with it.

Only `regal_datasets` and the standard library load here (`tests/optimize_inputs_test.py`
runs each mistake and finds no JAX, numba or Ray in the process)."""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np
from absl import flags

from regal_datasets import atomic, errors
from regal_datasets import dataset as dataset_lib
from regal_datasets import io as graph_io
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.app import choices
from regal.learning import checkpoint, learners, shipped
from regal.learning import registries as learner_registries
from regal.parallelism import hardware

FLAGS = flags.FLAGS
# A profiled workload's split: `--objective throughput` or `--model blocks`.
SPLIT_OBJECTIVE, SPLIT_MODEL = choices.SPLIT_OBJECTIVE, choices.SPLIT_MODEL


@dataclasses.dataclass(frozen=True)
class Inputs:
  """What the flags name, read and checked: one graph (`graph`, from `source`), several
  (`paths`, read one at a time as they run) or a profiled workload (`workload`), and the
  devices (None for a workload: its file gives them)."""
  devices: DeviceSpec | None = None
  graph: Graph | None = None
  source: str = ""
  paths: tuple[str, ...] = ()
  workload: Any = None


def splits_a_workload() -> bool:
  return FLAGS.objective == SPLIT_OBJECTIVE or FLAGS.model == SPLIT_MODEL


def check_files() -> None:
  """The graph and device files the flags name exist: each of --graph's (a file, a,b,c or a
  folder) and --device_spec; a --policy directory and a --doppler_checkpoint file."""
  named = [path.strip() for path in (FLAGS.graph or "").split(",") if path.strip()]
  for path in named + [p for p in [FLAGS.device_spec] if p]:
    if not os.path.exists(path):
      raise errors.ConfigError(f"{path}: no such file")
  policy = None if FLAGS.policy == shipped.DEFAULT else FLAGS.policy  # Resolved with devices.
  for name, path, kind in (("doppler_checkpoint", FLAGS.doppler_checkpoint, "file"),
                           ("policy", policy, "directory")):
    if path and not (os.path.isfile(path) if kind == "file" else os.path.isdir(path)):
      raise errors.ConfigError(f"--{name} {path}: no such {kind}")


def check_values() -> None:
  """Values out of range (absl cannot bound a float away from NaN, nor tell a flag given from
  one left at its default)."""
  if FLAGS.out_dir and (not FLAGS.graph or FLAGS.dataset):
    raise errors.ConfigError("--out_dir keeps the results of --graph files (a directory or "
                             "a,b,c); one graph's result goes to --out")
  for name, value in (("time_limit", FLAGS.time_limit), ("memory_limit", FLAGS.memory_limit)):
    if value is not None and not (math.isfinite(value) and value > 0):
      raise errors.ConfigError(f"--{name} must be a positive finite number, got {value}")
  for name, value, lowest in (("evals", FLAGS.evals, 1), ("doppler_evals", FLAGS.doppler_evals,
                                                            0)):
    if value is not None and not lowest <= value <= choices.MAX_EVALS:
      raise errors.ConfigError(f"--{name} must be between {lowest} and "
                               f"{choices.MAX_EVALS:,}, got {errors.brief(value)}")


def resolve_objective(devices: DeviceSpec) -> None:
  """`--objective`'s default (issue 83): on accelerators (devices naming their kinds, each with
  its memory) and a model that tracks memory, the makespan under that memory, so a plan that
  does not fit is infeasible (exit 3); the makespan otherwise."""
  if FLAGS.objective is not None:
    return
  from regal.scoring import models  # Loads no JAX: the record's fields alone.
  binds = (bool(devices.kinds) and models.get(FLAGS.model).memory
           and bool(np.isfinite(devices.memory_capacity).all()))
  FLAGS.objective = "runtime_under_memory" if binds else "runtime"


def check_policy(devices: DeviceSpec) -> None:
  """A --policy workdir holds a trained policy or prior made for this run: its model, device
  layout and objective (read from the checkpoint's metadata alone). `--policy default` becomes
  the shipped prior for the run's model, device count and objective (`shipped.resolve`)."""
  if not FLAGS.policy:
    return
  FLAGS.policy = shipped.resolve(FLAGS.policy, FLAGS.model, devices.num_devices,
                                 FLAGS.objective)
  found = learners.trained_in(FLAGS.policy)
  if found is None:
    files = dict.fromkeys(learner.policy_file for learner in learner_registries.LEARNERS.values()
                          if learner.policy_file)
    raise errors.ConfigError(f"no trained policy in {FLAGS.policy} (none of "
                             f"{', '.join(files)})")
  checkpoint.check_trained_for(checkpoint.read_meta(found[1]), FLAGS.policy, FLAGS.model,
                               devices, FLAGS.objective)


def check_outputs() -> None:
  """Output paths are refused before any search: clobbering an input, an unwritable place,
  a chart extension that is not a chart format."""
  inputs = [p for p in (FLAGS.graph or "").split(",") + [
      FLAGS.device_spec, FLAGS.policy, FLAGS.doppler_checkpoint] if p]
  several = FLAGS.out_dir or len(inputs) > 1 or (FLAGS.graph and os.path.isdir(FLAGS.graph))
  atomic.check_outputs([("--out", FLAGS.out, ()),
                        ("--doppler_save", FLAGS.doppler_save, ()),
                        ("--gantt", None if several else FLAGS.gantt, atomic.CHART_EXTENSIONS)],
                       inputs)


def graph_paths(spec: str) -> list[str]:
  """The graph files of `--graph`: a comma-separated list of files, or a directory (its files
  of a known graph extension, sorted; other files such as an optima table are skipped)."""
  paths = []
  for item in (part.strip() for part in spec.split(",")):
    if not item:
      continue
    if os.path.isdir(item):
      paths.extend(graph_io.graph_files(item))
    else:
      paths.append(item)
  if not paths:
    raise errors.ConfigError("--graph names no file")
  return paths


def load_graph() -> tuple[Graph, str]:
  """--graph, or a dataset graph; with neither, the default synthetic dataset's test graph."""
  if FLAGS.graph and FLAGS.dataset:
    raise errors.ConfigError("give only one of --graph and --dataset")
  if FLAGS.graph:
    return graph_io.load_graph(FLAGS.graph, FLAGS.format), FLAGS.graph
  graph = dataset_lib.synthetic_graph(FLAGS.split, FLAGS.index, FLAGS.data_dir)
  return graph, f"synthetic/{FLAGS.split}/{FLAGS.index}"


def read(argv) -> Inputs:
  """Every check here, then what the flags name, read: the workload, the graphs' paths or the
  one graph, and the devices."""
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  check_files()
  check_values()
  if splits_a_workload():
    FLAGS.objective = FLAGS.objective or "runtime"
    if not FLAGS.graph or "," in FLAGS.graph or os.path.isdir(FLAGS.graph):
      return Inputs()  # The split's own checks say what it needs (`optimize_cli.split_config`).
    check_outputs()
    return Inputs(workload=graph_io.load_workload(FLAGS.graph, FLAGS.format))
  check_outputs()
  devices = hardware.from_flags()
  resolve_objective(devices)
  check_policy(devices)
  if FLAGS.graph and not FLAGS.dataset:
    paths = graph_paths(FLAGS.graph)
    if len(paths) > 1 or FLAGS.out_dir:
      return Inputs(devices=devices, paths=tuple(paths))
  graph, source = load_graph()
  return Inputs(devices=devices, graph=graph, source=source)
