"""What `python -m regal.optimize` does once `regal.app.optimize_inputs` read and checked its
inputs (before this module, and with it JAX and the scorers, loads): the checks that need the
method registry, then one graph, many graphs or a profiled workload's split, reported and
written."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable

from absl import flags

from regal_datasets import atomic, cli, errors
from regal.parallelism import hardware
from regal.app import methods, optimize_inputs, optimize_lib, units
from regal.app import report as report_lib
from regal.doppler_policy.options import DopplerOptions
from regal.search.options import BrkgaOptions
from regal.scoring import models
from regal.search import portfolio
from regal.search import progress as search_progress

FLAGS = flags.FLAGS


def _given(name: str) -> bool:
  return FLAGS[name].present > 0


def run_config(measured=None, progress=None) -> methods.RunConfig:
  """The run the flags describe (`measured`: Doppler's stage-III reward source)."""
  return methods.RunConfig(
      model=FLAGS.model, objective=FLAGS.objective, memory_limit=FLAGS.memory_limit,
      method=FLAGS.method, evals=FLAGS.evals, seed=FLAGS.seed, time_limit=FLAGS.time_limit,
      setup=methods.Setup(shard=FLAGS.shard, coarsen=FLAGS.coarsen, engine=FLAGS.engine),
      brkga=BrkgaOptions(arms=methods.parse_arms(FLAGS.seed_arms), policy_dir=FLAGS.policy,
                         prior=FLAGS.prior, preset=FLAGS.brkga_preset, decoder=FLAGS.decoder,
                         compare_unguided=FLAGS.compare_unguided,
                         exact_solver=FLAGS.exact_solver, progress=progress),
      doppler=DopplerOptions(checkpoint=FLAGS.doppler_checkpoint, evals=FLAGS.doppler_evals,
                             samples=FLAGS.doppler_samples, save=FLAGS.doppler_save,
                             stage3_steps=FLAGS.stage3_steps, measured=measured))


@dataclasses.dataclass(frozen=True)
class Reader:
  """What a run may do that reads options (flag names): a method, an objective, a seed arm,
  --execute, a dataset graph, ... `active()`: whether this run does it. A flag given that no
  active reader reads would do nothing, and is refused naming what reads it."""
  name: str
  reads: frozenset[str]
  active: Callable[[], bool]


def readers() -> list[Reader]:
  """Every reader of an option: each schedule method (its record's `reads`), then what the
  other flags switch on."""
  # The guided search (what reads a search preset: brkga) switches the readers below on.
  brkga = lambda: "brkga_preset" in methods.get(FLAGS.method).reads  # noqa: E731
  execute = lambda: FLAGS.execute or FLAGS.reward == "measured"  # noqa: E731
  found = [Reader(f"--method {name}", methods.get(name).reads,
                  lambda name=name: FLAGS.method == name) for name in methods.schedule_names()]
  return found + [
      Reader("--objective runtime_under_memory", frozenset({"memory_limit"}),
             lambda: FLAGS.objective == "runtime_under_memory"),
      Reader("--method brkga with the doppler seed arm (--seed_arms ...,doppler)",
             frozenset({"doppler_checkpoint", "doppler_evals", "doppler_samples"}),
             lambda: brkga() and "doppler" in methods.parse_arms(FLAGS.seed_arms)),
      Reader("--method brkga with --policy", frozenset({"compare_unguided"}),
             lambda: brkga() and bool(FLAGS.policy)),
      Reader("--method brkga on the delay model's runtime (CP-SAT beside it)",
             frozenset({"exact_solver"}),
             lambda: brkga() and portfolio.model_allows(FLAGS.model, FLAGS.objective)),
      Reader("--reward measured", frozenset({"stage3_steps"}),
             lambda: FLAGS.reward == "measured"),
      Reader("--execute or --reward measured", frozenset({"seed", "execute_mode"}), execute),
      Reader("--execute", frozenset({"execute_repeats"}), lambda: FLAGS.execute),
      Reader("a dataset's graph (no --graph)", frozenset({"split", "index", "data_dir"}),
             lambda: not FLAGS.graph),
      Reader("--graph", frozenset({"format"}), lambda: bool(FLAGS.graph)),
      Reader("devices described by flags (no --device_spec)",
             frozenset({"devices", "device_preset"}), lambda: not FLAGS.device_spec),
  ]


def _unread(every: list[Reader]) -> tuple[str, list[str]] | None:
  """The first flag given that no active reader reads, and what reads it."""
  active = [reader for reader in every if reader.active()]
  for name in sorted(frozenset().union(*(reader.reads for reader in every))):
    if _given(name) and not any(name in reader.reads for reader in active):
      return name, [reader.name for reader in every if name in reader.reads]
  return None


def _named(readers_of: list[str]) -> str:
  """Readers as one phrase, the methods among them as one '--method a, b or c'."""
  methods_of = [name.removeprefix("--method ") for name in readers_of
                if name.startswith("--method ") and " " not in name.removeprefix("--method ")]
  others = [name for name in readers_of if name.removeprefix("--method ") not in methods_of]
  phrases = ([f"--method {', '.join(methods_of)}"] if methods_of else []) + others
  return " or ".join(phrases)


def check_flags() -> None:
  """Flags that the other flags would make do nothing, refused before any work (absl cannot
  tell a flag given from one left at its default; values out of range were refused by
  `optimize_inputs`)."""
  # The library's checks of the run (methods.RunConfig.validate), before any work.
  run_config(measured=object() if FLAGS.reward == "measured" else None).validate()
  unread = _unread(readers())
  if unread is not None:
    name, readers_of = unread
    here = (f" (here: --method {FLAGS.method})"
            if any(reader.startswith("--method ") for reader in readers_of) else "")
    raise errors.ConfigError(f"--{name} would do nothing here: only {_named(readers_of)} "
                             f"{'reads' if len(readers_of) == 1 else 'read'} it{here}")
  if _given("shard") and FLAGS.reward == "measured":
    raise errors.ConfigError("--shard would do nothing here: --reward measured trains on the "
                             "graph as given (drop --shard)")


_SPLIT_FLAGS = ("graph", "format", "objective", "model", "method", "evals", "time_limit", "seed",
                "out", "gantt", "device_spec")


def split_config(flag_groups):
  """--objective throughput or --model blocks: the flags they read, checked; every other flag
  given is refused (a `pipeline_methods.SplitConfig`)."""
  from regal.app import pipeline_lib
  from regal.baselines import pipeline_methods
  latency = FLAGS.model in models.split_names()  # --model blocks
  how = f"--model {pipeline_lib.MODEL}" if latency else f"--objective {pipeline_lib.OBJECTIVE}"
  if latency and _given("objective"):
    raise errors.ConfigError(f"--model {pipeline_lib.MODEL} minimizes a profiled workload's "
                             f"single-sample latency: --objective {FLAGS.objective} would do "
                             f"nothing (--objective throughput is the pipeline's max-load)")
  if not latency and _given("model"):
    raise errors.ConfigError(f"--model would do nothing with --objective "
                             f"{pipeline_lib.OBJECTIVE}: its max-load is its own model")
  for name in FLAGS:
    if FLAGS[name].present and name not in _SPLIT_FLAGS and \
        any(name in names for _, names in flag_groups):
      raise errors.ConfigError(f"--{name} would do nothing with {how}: the workload's file "
                               f"gives its devices and memory cap (--device_spec overrides "
                               f"the accelerators)")
  if not FLAGS.graph:
    raise errors.ConfigError(f"{how} needs --graph: a profiled workload "
                             f"(msr-fiddle/dnn-partitioning's JSON)")
  if "," in FLAGS.graph or os.path.isdir(FLAGS.graph):
    raise errors.ConfigError(f"{how} takes one --graph file")
  method = FLAGS.method if _given("method") else "search"
  config = pipeline_methods.SplitConfig(method=method, objective="latency" if latency else
                                        "throughput", evals=FLAGS.evals, seed=FLAGS.seed,
                                        time_limit=FLAGS.time_limit)
  reads = methods.get_split(method, config.objective).reads
  for name in ("evals", "time_limit", "seed"):
    if _given(name) and name not in reads:
      readers = [m for m in methods.split_names() if name in methods.get(m).reads]
      raise errors.ConfigError(f"--{name} would do nothing here: --method {method} does not "
                               f"read it (only {', '.join(readers)} do)")
  return config


def main_split(inputs: optimize_inputs.Inputs, flag_groups) -> None:
  """A profiled workload's split: report, write, exit 3 if infeasible."""
  from regal_datasets.formats import profiled
  from regal.app import pipeline_lib, split_chart
  config = split_config(flag_groups)
  workload = inputs.workload
  spec = FLAGS.device_spec
  if spec:
    workload = profiled.with_devices(workload, hardware.load(spec), f"--device_spec {spec}")
  result = pipeline_lib.run(workload, config, source=FLAGS.graph, device_spec=spec)
  print(pipeline_lib.summary(result))
  if FLAGS.gantt:
    split_chart.draw(workload, result, FLAGS.gantt)
    print(f"wrote {FLAGS.gantt}")
  if FLAGS.out:
    atomic.write_text(FLAGS.out, json.dumps(result.to_json(), indent=1, allow_nan=False) + "\n")
    print(f"wrote {FLAGS.out}")
  if not result.feasible:
    cli.exit_infeasible("no split found fits the memory caps, co-location and (latency) "
                        "contiguity (the result says feasible: false, with the violations)")


def main_training(inputs: optimize_inputs.Inputs, flag_groups) -> None:
  """A training step's mesh plan (`training_lib`): report, write, exit 3 if it does not fit."""
  from regal.app import training_lib
  given = [name for name in FLAGS if FLAGS[name].present
           and any(name in names for _, names in flag_groups)]
  configuration = training_lib.check(inputs.devices.kinds, FLAGS.shard, FLAGS.method,
                                     _given("method"), given)
  result = training_lib.run(inputs.graph, inputs.devices.num_devices, inputs.devices.kinds[0],
                            configuration, source=inputs.source)
  print(training_lib.summary(result))
  if FLAGS.out:
    atomic.write_text(FLAGS.out, json.dumps(result, indent=1, allow_nan=False) + "\n")
    print(f"wrote {FLAGS.out}")
  if not result["feasible"]:
    cli.exit_infeasible("the plan does not fit in the devices' memory (the result says "
                        "feasible: false, with what overflowed)")


def run(inputs: optimize_inputs.Inputs, flag_groups) -> None:
  """`regal.optimize`'s main once `optimize_inputs` read its inputs (`flag_groups`: its --help
  groups)."""
  if optimize_inputs.splits_a_workload():
    return main_split(inputs, flag_groups)
  from regal.app import training_lib
  if training_lib.wanted(inputs.graph, FLAGS.method, FLAGS.shard, _given("method")):
    return main_training(inputs, flag_groups)
  methods.get_schedule(FLAGS.method)  # A split method needs a profiled workload.
  check_flags()
  devices = inputs.devices
  on_devices = FLAGS.execute or FLAGS.reward == "measured"
  if on_devices:
    from regal.scoring import parallel as parallel_lib
    parallel_lib.use_host_devices(devices.num_devices)  # Before JAX starts.
  if inputs.paths:
    return run_many(list(inputs.paths), devices)
  graph, source = inputs.graph, inputs.source
  program = measured = None
  if on_devices:
    from regal.execute import choose_program, executor
    device_list = executor.available_devices(devices.num_devices)
    if FLAGS.reward == "measured" or (FLAGS.shard == "off"
                                      and not methods.get(FLAGS.method).shards_by_batch):
      program = choose_program.program_for(graph, seed=FLAGS.seed)
    if FLAGS.reward == "measured":
      from regal.execute.measured import MeasuredReward
      measured = MeasuredReward(graph, program, device_list, FLAGS.execute_mode)
  report = optimize_lib.run(graph, devices,
                            run_config(measured, progress=search_progress.Reporter()),
                            source=source)
  report.result.wall_seconds["total"] = cli.process_seconds()  # The command's, start to here.
  print(report_lib.summary(report))
  if FLAGS.execute:
    from regal.execute import compare
    if report.graph is not graph:  # Split (--shard): its shards run.
      program = choose_program.program_for(report.graph, seed=FLAGS.seed)
    report.result.execution = compare.execute_assignments(
        report.graph, program, report.assignments, device_list, FLAGS.execute_repeats,
        FLAGS.execute_mode)
    print(compare.summary(report.result.execution, units.TimeUnit(
        FLAGS.model, **report.result.time_units)))
  if FLAGS.gantt:  # First: a chart that fails leaves no result file behind either.
    from regal.app import gantt
    gantt.draw(graph, report.placement, report.schedule, FLAGS.gantt,
                time_unit=units.TimeUnit(FLAGS.model, **report.result.time_units))
    print(f"wrote {FLAGS.gantt}")
  if FLAGS.out:
    report_lib.write_json(report, FLAGS.out)
    print(f"wrote {FLAGS.out}")
  if not (FLAGS.out or FLAGS.gantt):
    print("nothing saved: --out result.json keeps the result, --gantt chart.png its chart")
  if not report.result.feasible:
    cli.exit_infeasible("no solution found fits the memory limit (the result says "
                           "feasible: false, with the excess per device)")


def run_many(paths, devices) -> None:
  if FLAGS.out:
    raise errors.ConfigError("--out names one result: with several graphs give --out_dir")
  if FLAGS.execute or FLAGS.reward == "measured" or FLAGS.policy or FLAGS.doppler_save:
    raise errors.ConfigError("--execute, --reward measured, --policy and --doppler_save take "
                             "one graph")
  chart = None
  if FLAGS.gantt:
    chart = FLAGS.gantt.rsplit(".", 1)[-1].lower()
    if chart not in atomic.CHART_EXTENSIONS:
      raise errors.ConfigError(f"--gantt {FLAGS.gantt!r}: with several graphs give the "
                               f"chart format: {', '.join(atomic.CHART_EXTENSIONS)}")
  failures = optimize_lib.run_many(paths, devices, run_config(), FLAGS.out_dir, chart,
                                   FLAGS.format)
  if failures and not cli.stop_requested():  # Interrupted: run_cli says so, exit 130/143.
    raise errors.RegalError(f"{failures} of {len(paths)} graphs failed (their errors are above)")
