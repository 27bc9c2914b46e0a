"""A `regal.optimize` run's result, typed (issue 71): one field per key of the result JSON,
each with what it holds. `Result` is a schedule's (`format: "regal.result"`, version 1),
`SplitResult` a profiled workload's split (`format: "regal.split_result"`, version 1). `to_json`
writes the file's object (keys in field order; an optional key only when present), `from_json`
reads it back, and `schema_markdown` is the schema as documented (`docs/reference.md`, held
equal to it by a test).
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

FORMAT = "regal.result"
SPLIT_FORMAT = "regal.split_result"
VERSION = 1


def _field(doc: str, **kwargs):
  return dataclasses.field(metadata={"doc": doc}, **kwargs)


class _ResultFile:
  """What both results share: the file's object and back, and the schema."""
  FORMAT: ClassVar[str]
  OMITTED_WHEN_NONE: ClassVar[tuple[str, ...]] = ()

  def to_json(self) -> dict[str, Any]:
    """The result file's object: its format and version, then every field in order."""
    data: dict[str, Any] = {"format": self.FORMAT, "version": VERSION}
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if not (field.name in self.OMITTED_WHEN_NONE and value is None):
        data[field.name] = value
    return data

  @classmethod
  def from_json(cls, data: dict[str, Any]):
    """A result file's object read back (its format and version checked)."""
    if data.get("format") != cls.FORMAT or data.get("version") != VERSION:
      raise ValueError(f"not a {cls.FORMAT} version {VERSION} result: format "
                       f"{data.get('format')!r}, version {data.get('version')!r}")
    names = {field.name for field in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})

  @classmethod
  def schema_markdown(cls) -> list[str]:
    """The result JSON's schema as a Markdown table: each key and what it holds."""
    rows = ["| key | what it holds |", "|---|---|",
            f"| `format`, `version` | \"{cls.FORMAT}\", {VERSION} |"]
    for field in dataclasses.fields(cls):
      rows.append(f"| `{field.name}` | {field.metadata['doc']} |")
    return rows


@dataclasses.dataclass(kw_only=True)
class Result(_ResultFile):
  """One run's result (the module doc); `display` and `execution` are filled in after the
  rest (the figures as the summary prints them; measurements with `--execute`)."""
  FORMAT: ClassVar[str] = FORMAT
  OMITTED_WHEN_NONE: ClassVar[tuple[str, ...]] = ("memory_excess", "execution")
  graph: dict = _field("{name, num_ops, num_tensors, source}")
  devices: dict = _field("the device description (regal_datasets.devices JSON form)")
  settings: dict = _field(
      "method, model, search_model (what batched search scored), engine (how: native or jax), "
      "objective, memory_limit, evals, seed, BRKGA parameters and their preset name (for brkga), "
      "time_limit (for cpsat / quickp)")
  details: dict = _field(
      "method-specific facts: for brkga seed_arms {arm: best objective of its seeds}, "
      "arm_evaluations, winner_origin, stopped {reason, evaluations, budget, time_limit}, and "
      "the polish's or the solver's facts; for doppler its training; with --policy, "
      "--compare_unguided or --coarsen their facts")
  sharding: dict | None = _field(
      "null, or (--shard, --method data_parallel) {mode, chosen {shards, strategy}, candidates "
      "[{shards, strategy, ops, split_ops, objective}], resident_parameter_bytes [D], plan "
      "[{op, label, shards [{name, shard, role, device, start, end}]}], ...}: the fields below "
      "are the split graph's")
  objective: float = _field("the best solution's objective value")
  lower_bound: float = _field(
      "no solution's objective is below this (regal.scoring.bounds: the structural bound of the "
      "model and objective, or an exact solver's proven bound where one ran on this graph)")
  bound_source: str = _field("where the lower bound comes from: \"structure\" or \"solver\"")
  gap: float | None = _field(
      "(objective - lower_bound) / lower_bound: at most this far from optimal (0: proven optimal; "
      "null: a zero bound under a positive objective)")
  proven_optimal: bool = _field(
      "the objective is within 0.01% of the lower bound (regal.scoring.bounds.PROVEN_TOLERANCE, "
      "one rule for every method and model; a search stops there)")
  feasible: bool = _field(
      "false when objective runtime_under_memory found no solution within the limit (the "
      "objective is then the penalty score; `regal.optimize` exits 3)")
  memory_excess: list | None = _field(
      "bytes over each device's memory (its capacity, or --memory_limit) per device [D], "
      "present when a device is over (runtime_under_memory: always; the answer is then "
      "infeasible; runtime and memory: the plan does not fit, and the summary warns)",
      default=None)
  interrupted: bool = _field(
      "true when SIGINT or SIGTERM stopped the search early (exit 130 or 143)")
  makespan: float = _field("the best solution's makespan")
  peak_memory: list = _field("[D] per device, a split graph's resident parameters included (null for the doppler model)")
  placement: list = _field("[{op, name, device}] in the input file's op order")
  schedule: list = _field("op names in priority order (first runs first when ready)")
  ops: list = _field("[{op, name, device, start, end}]")
  transfers: list = _field(
      "[{tensor, producer, src, dst, start, end}] for the models that time transfers")
  baselines: dict = _field("{single_device: {objective, makespan}, best_seed: {...}}")
  chosen: str = _field(
      "the candidate reported (the method's own answer, or a seed that was better, or the one on "
      "the fewest devices among equals)")
  simplest_among_equals: dict | None = _field(
      "null, or when a candidate on fewer devices is within `tolerance` (1e-4, relative) of the "
      "best found and reported instead: {chosen, best, devices_used {chosen, best}, objective "
      "{chosen, best}, tolerance}")
  search_objective: float | None = _field(
      "the method's own answer's objective (what the search found, seeds aside)")
  improvement_pct: float = _field("over the single-device objective")
  why_no_gain: str | None = _field(
      "(objective runtime, less than 1% better than one device) why, from the graph's structure: "
      "its longest chain, or transfers that cost more than the parallelism they buy; otherwise "
      "null")
  time_units: dict = _field(
      "{scale, name, note}: a person reads the times above times scale, in name: ms (or s, us, "
      "ns) where the graph's costs are times (note: the device that makes them so), Doppler "
      "units for the doppler model, else cost units")
  memory_units: dict = _field("{scale, name}: bytes times scale, in name (GB, MB, kB or bytes)")
  evaluations: int = _field("fitness evaluations the method spent")
  wall_seconds: dict = _field(
      "{compile, compile_jax, compile_numba, search, run, total}: compile_jax JAX's programs "
      "compiled or loaded, compile_numba the kernels compiled (`regal.startup`); run the "
      "optimization's own seconds; total the process's since it started (`regal.optimize`; "
      "called as a library: run's)")
  versions: dict = _field("{python, jax, numpy, numba, regal}")
  display: dict = _field(
      "every figure the summary prints, in those units: objective, makespan, lower_bound, "
      "peak_memory, single_device {objective, makespan}, search_objective, best_seed {objective}, "
      "seed_arms, memory_limit, memory_excess (as present)", default_factory=dict)
  execution: dict | None = _field(
      "(with --execute) {program, devices, facts, assignments {name: {predicted, median_seconds, "
      "p25_seconds, p75_seconds, repeats, seconds, mode, ops_on_named_device}}} for best, "
      "single_device and the other candidates", default=None)


@dataclasses.dataclass(kw_only=True)
class SplitResult(_ResultFile):
  """A profiled workload's split (`regal.app.pipeline_lib.run`: `--objective throughput`,
  `--model blocks`). Times are the workload file's own latency units."""
  FORMAT: ClassVar[str] = SPLIT_FORMAT
  OMITTED_WHEN_NONE: ClassVar[tuple[str, ...]] = ("blocks",)
  graph: dict = _field("{name, num_ops, num_edges, colocation_classes, source}")
  devices: dict = _field(
      "{accelerators, cpus, memory_per_accelerator, from (the workload's file or a "
      "--device_spec)}")
  settings: dict = _field(
      "{method, objective (throughput or latency), model (blocks under latency, else null), "
      "evals, seed (null where the method reads none), time_limit}")
  details: dict = _field(
      "the method's facts: the search's start, budget, rounds, moves and seconds; CP-SAT's "
      "status, lower_bound, hint and answer; the DP's ideals and blocks")
  objective: float | None = _field(
      "the split's pipeline max-load (throughput) or single-sample latency; null when not finite")
  lower_bound: float = _field(
      "no split's objective is below this: the structural bound, or CP-SAT's proven one")
  bound_source: str = _field("\"structure\" or \"solver\"")
  gap: float | None = _field("(objective - lower_bound) / lower_bound (0: proven optimal); "
                             "null if infeasible")
  proven_optimal: bool = _field(
      "the objective is within 0.01% of the lower bound (regal.scoring.bounds.PROVEN_TOLERANCE, "
      "as every result's)")
  blocks: list | None = _field(
      "(latency only) each accelerator's block: {accelerator, start, finish, receive, compute, "
      "send}", default=None)
  feasible: bool = _field(
      "false when the split breaks the memory caps, co-location, CPU-only ops or (latency) "
      "contiguity (`regal.optimize` exits 3)")
  violations: list = _field("one line per broken rule; empty when feasible")
  interrupted: bool = _field("true when SIGINT or SIGTERM stopped the search early")
  loads: dict = _field("{accelerators [A], cpu}: each side's pipeline load")
  memory: dict = _field("{accelerators [A] bytes used, cap}")
  split: dict = _field("the split in the workload format's own shape")
  placement: list = _field("[{node, device: an accelerator's index or \"cpu\"}]")
  baselines: dict = _field(
      "{one_accelerator, pipedream}: {objective, feasible, violations} of our own baselines")
  improvement_pct: dict = _field("{baseline: % below its objective}")
  evaluations: int = _field("moves the method scored")
  wall_seconds: dict = _field("{total}")
  versions: dict = _field("{python, numpy, regal}")
  published: dict = _field(
      "Tarnawski et al.'s figures for this workload and objective, by method (empty for "
      "other workloads)")
  memory_units: dict = _field("{scale, name}: bytes times scale, in name (GB, MB, kB or bytes)")
  display: dict = _field("{memory_per_accelerator, memory [A]}: in those units")
