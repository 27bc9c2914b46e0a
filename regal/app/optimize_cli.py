"""What `python -m regal.optimize` does once its flags parsed and its input files exist
(`regal/optimize.py` defines the flags and checks those before this module, and with it JAX
and the scorers, loads): the remaining checks, then one graph, many graphs or a profiled
workload's split, reported and written."""
from __future__ import annotations

import json
import math
import os
from typing import Sequence

from absl import flags

from datasets import atomic, cli, errors
from datasets import dataset as dataset_lib
from datasets import devices as devices_lib
from datasets import io as graph_io
from regal.app import gantt, methods, optimize_lib, pipeline_lib, units
from regal.app import report as report_lib
from regal.doppler_policy import method as doppler_method
from regal.search import portfolio

FLAGS = flags.FLAGS


def load_graph():
  """--graph, or a dataset graph; with neither, the default synthetic dataset's test graph."""
  if FLAGS.graph and FLAGS.dataset:
    raise errors.ConfigError("give only one of --graph and --dataset")
  if FLAGS.graph:
    return graph_io.load_graph(FLAGS.graph, FLAGS.format), FLAGS.graph
  dataset = dataset_lib.load_or_build_synthetic(data_dir=FLAGS.data_dir)
  graphs = dataset[FLAGS.split]
  if not 0 <= FLAGS.index < len(graphs):
    raise errors.ConfigError(f"--index {FLAGS.index} is outside split {FLAGS.split!r} "
                             f"(0..{len(graphs) - 1})")
  return graphs[FLAGS.index], f"synthetic/{FLAGS.split}/{FLAGS.index}"


def check_outputs() -> None:
  """Output paths are refused before any search: clobbering an input, an unwritable place,
  a chart extension that is not a chart format."""
  inputs = [p for p in (FLAGS.graph or "").split(",") + [
      FLAGS.device_spec, FLAGS.policy, FLAGS.doppler_checkpoint] if p]
  several = FLAGS.out_dir or len(inputs) > 1 or (FLAGS.graph and os.path.isdir(FLAGS.graph))
  atomic.check_outputs([("--out", FLAGS.out, ()), ("--doppler_save", FLAGS.doppler_save, ()),
                        ("--gantt", None if several else FLAGS.gantt, atomic.CHART_EXTENSIONS)],
                       inputs)


def _given(name: str) -> bool:
  return FLAGS[name].present > 0


def run_config(measured=None, progress=None) -> methods.RunConfig:
  """The run the flags describe (`measured`: Doppler's stage-III reward source)."""
  return methods.RunConfig(
      model=FLAGS.model, objective=FLAGS.objective, memory_limit=FLAGS.memory_limit,
      method=FLAGS.method, evals=FLAGS.evals, seed=FLAGS.seed, time_limit=FLAGS.time_limit,
      coarsen_spec=FLAGS.coarsen, engine=FLAGS.engine, shard=FLAGS.shard,
      arms=methods.parse_arms(FLAGS.seed_arms), policy_dir=FLAGS.policy, prior=FLAGS.prior,
      brkga_preset=FLAGS.brkga_preset, decoder=FLAGS.decoder,
      compare_unguided=FLAGS.compare_unguided, exact_solver=FLAGS.exact_solver,
      doppler=doppler_method.DopplerOptions(checkpoint=FLAGS.doppler_checkpoint,
                                            evals=FLAGS.doppler_evals,
                                            samples=FLAGS.doppler_samples),
      doppler_save=FLAGS.doppler_save, measured=measured, stage3_steps=FLAGS.stage3_steps,
      progress=progress)


def check_flags() -> None:
  """Values out of range, and flags that the other flags would make do nothing, refused
  before any work (absl cannot tell a flag given from one left at its default)."""
  method = FLAGS.method
  reads = {option: methods.readers(option) for option in ("evals", "time_limit", "seed", "engine")}
  if FLAGS.out_dir and (not FLAGS.graph or FLAGS.dataset):
    raise errors.ConfigError("--out_dir keeps the results of --graph files (a directory or "
                             "a,b,c); one graph's result goes to --out")
  for name, value in (("time_limit", FLAGS.time_limit), ("memory_limit", FLAGS.memory_limit)):
    if value is not None and not (math.isfinite(value) and value > 0):
      raise errors.ConfigError(f"--{name} must be a positive finite number, got {value}")
  for name, value, lowest in (("evals", FLAGS.evals, 1), ("doppler_evals", FLAGS.doppler_evals,
                                                            0)):
    if value is not None and not lowest <= value <= methods.MAX_EVALS:
      raise errors.ConfigError(f"--{name} must be between {lowest} and "
                               f"{methods.MAX_EVALS:,}, got {errors.brief(value)}")
  # The library's checks of the run (methods.RunConfig.validate), before any work.
  run_config(measured=object() if FLAGS.reward == "measured" else None).validate()
  if FLAGS.memory_limit is not None and FLAGS.objective != "runtime_under_memory":
    raise errors.ConfigError(f"--memory_limit is read by --objective runtime_under_memory "
                             f"only; objective {FLAGS.objective} would ignore it")
  doppler_arm = method == "brkga" and "doppler" in methods.parse_arms(FLAGS.seed_arms)
  measured, execute = FLAGS.reward == "measured", FLAGS.execute
  spec = FLAGS.device_spec
  ignored = (
      ("evals", method not in reads["evals"],
       f"--method {method} has no evaluation budget (only {', '.join(reads['evals'])} do)"),
      ("time_limit", method not in reads["time_limit"],
       f"--method {method} has no time limit (only {', '.join(reads['time_limit'])} do)"),
      ("seed", method not in reads["seed"] and not (execute or measured),
       f"--method {method} draws no random numbers"),
      ("engine", method not in reads["engine"],
       f"--method {method} scores no batches (only {', '.join(reads['engine'])} do)"),
      # What the method reads, it reads only in these circumstances.
      ("exact_solver", not portfolio.model_allows(FLAGS.model, FLAGS.objective),
       "the solver runs beside BRKGA on the delay model's runtime only"),
      ("compare_unguided", not FLAGS.policy, "it compares a --policy's search with the "
       "unguided one"),
      ("doppler_checkpoint", method == "brkga" and not doppler_arm,
       "BRKGA reads it for the doppler seed arm only (--seed_arms ...,doppler)"),
      ("doppler_evals", method == "brkga" and not doppler_arm,
       "it is the doppler seed arm's budget (--seed_arms ...,doppler)"),
      ("doppler_samples", method == "brkga" and not doppler_arm,
       "it is read by the doppler seed arm (--seed_arms ...,doppler)"),
      ("stage3_steps", not measured, "stage III runs with --reward measured only"),
      ("execute_repeats", not execute, "it is read with --execute only"),
      ("execute_mode", not (execute or measured),
       "it is read with --execute or --reward measured only"),
      ("shard", measured, "--reward measured trains on the graph as given (drop --shard)"),
      ("split", bool(FLAGS.graph), "--graph names the graph; --split picks a dataset's"),
      ("index", bool(FLAGS.graph), "--graph names the graph; --index picks a dataset's"),
      ("data_dir", bool(FLAGS.graph), "--graph names the graph; --data_dir holds a dataset's"),
      ("format", not FLAGS.graph, "it is the format of --graph's files"),
      ("devices", bool(spec), "--device_spec describes the devices, their count included"),
      ("device_preset", bool(spec), "--device_spec describes the devices"),
  )
  # An option the method's record does not read (`methods.Method.reads`), then the table.
  for name in sorted(methods.options() - set(reads)):
    if _given(name) and name not in methods.get(method).reads:
      readers = methods.readers(name)
      raise errors.ConfigError(f"--{name} would do nothing here: --method {method} does not "
                               f"read it (only {', '.join(readers)} "
                               f"{'does' if len(readers) == 1 else 'do'})")
  for name, does_nothing, why in ignored:
    if does_nothing and _given(name):
      raise errors.ConfigError(f"--{name} would do nothing here: {why}")
  for name, path, kind in (("doppler_checkpoint", FLAGS.doppler_checkpoint, "file"),
                           ("policy", FLAGS.policy, "directory")):
    if path and not (os.path.isfile(path) if kind == "file" else os.path.isdir(path)):
      raise errors.ConfigError(f"--{name} {path}: no such {kind}")


_SPLIT_FLAGS = ("graph", "format", "objective", "model", "method", "evals", "time_limit", "seed",
                "out", "gantt", "device_spec")


def split_config(flag_groups) -> pipeline_lib.SplitConfig:
  """--objective throughput or --model blocks: the flags they read, checked; every other flag
  given is refused."""
  latency = FLAGS.model == pipeline_lib.MODEL
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
  config = pipeline_lib.SplitConfig(method=method, objective="latency" if latency else
                                    "throughput", evals=FLAGS.evals, seed=FLAGS.seed,
                                    time_limit=FLAGS.time_limit)
  pipeline_lib.check_config(config)
  reads = pipeline_lib.METHODS[method].reads
  if FLAGS.time_limit is not None and not (math.isfinite(FLAGS.time_limit) and
                                           FLAGS.time_limit > 0):
    raise errors.ConfigError(f"--time_limit must be a positive finite number, got "
                             f"{FLAGS.time_limit}")
  if FLAGS.evals is not None and not 1 <= FLAGS.evals <= methods.MAX_EVALS:
    raise errors.ConfigError(f"--evals must be between 1 and {methods.MAX_EVALS:,}, got "
                             f"{errors.brief(FLAGS.evals)}")
  for name in ("evals", "time_limit", "seed"):
    if _given(name) and name not in reads:
      readers = [m for m, spec in pipeline_lib.METHODS.items() if name in spec.reads]
      raise errors.ConfigError(f"--{name} would do nothing here: --method {method} does not "
                               f"read it (only {', '.join(readers)} do)")
  if method == "cpsat" and latency:
    raise errors.ConfigError("--method cpsat models the pipeline max-load only (--objective "
                             "throughput), not --model blocks")
  return config


def main_split(flag_groups) -> None:
  """A profiled workload's split: report, write, exit 3 if infeasible."""
  from datasets.formats import profiled
  from regal.app import split_chart
  config = split_config(flag_groups)
  check_outputs()
  workload = graph_io.load_workload(FLAGS.graph, FLAGS.format)
  spec = FLAGS.device_spec
  if spec:
    workload = profiled.with_devices(workload, devices_lib.load(spec), f"--device_spec {spec}")
  data = pipeline_lib.run(workload, config, source=FLAGS.graph, device_spec=spec)
  print(pipeline_lib.summary(data))
  if FLAGS.gantt:
    split_chart.draw(workload, data, FLAGS.gantt)
    print(f"wrote {FLAGS.gantt}")
  if FLAGS.out:
    atomic.write_text(FLAGS.out, json.dumps(data, indent=1, allow_nan=False) + "\n")
    print(f"wrote {FLAGS.out}")
  if not data["feasible"]:
    cli.exit_infeasible("no split found fits the memory caps, co-location and (latency) "
                        "contiguity (the result says feasible: false, with the violations)")


def run(argv: Sequence[str], flag_groups) -> None:
  """`regal.optimize`'s main once its inputs exist (`flag_groups`: its --help groups)."""
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  if FLAGS.objective == pipeline_lib.OBJECTIVE or FLAGS.model == pipeline_lib.MODEL:
    return main_split(flag_groups)
  if FLAGS.method not in methods.METHODS:
    raise errors.ConfigError(f"--method {FLAGS.method} splits a profiled workload: it needs "
                             f"--objective {pipeline_lib.OBJECTIVE} or --model "
                             f"{pipeline_lib.MODEL}")
  check_flags()
  check_outputs()
  devices = devices_lib.from_flags()
  on_devices = FLAGS.execute or FLAGS.reward == "measured"
  if on_devices:
    from regal.scoring import parallel as parallel_lib
    parallel_lib.use_host_devices(devices.num_devices)  # Before JAX starts.
  if FLAGS.graph and not FLAGS.dataset:
    paths = optimize_lib.graph_paths(FLAGS.graph)
    if len(paths) > 1 or FLAGS.out_dir:
      return run_many(paths, devices)
  graph, source = load_graph()
  program = measured = None
  if on_devices:
    from regal.execute import choose_program, executor
    device_list = executor.available_devices(devices.num_devices)
    if FLAGS.reward == "measured" or FLAGS.shard == "off" and FLAGS.method != "data_parallel":
      program = choose_program.program_for(graph, seed=FLAGS.seed)
    if FLAGS.reward == "measured":
      from regal.execute.measured import MeasuredReward
      measured = MeasuredReward(graph, program, device_list, FLAGS.execute_mode)
  report = optimize_lib.run(graph, devices,
                            run_config(measured, progress=lambda line: print(line, flush=True)),
                            source=source)
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
