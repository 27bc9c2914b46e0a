r"""Optimizes one graph's placement and schedule (BRKGA or a baseline) and reports the result.

  python -m regal.optimize --graph ../shared/graphs/doppler/ffnn_192nodes.txt --devices 4 \
      --model doppler --evals 5000 --out result.json
  python -m regal.optimize --dataset synthetic --split test --index 3 --model sync
  python -m regal.optimize --graph ../shared/graphs/sinnen --model delay --devices 4 \
      --out_dir results/        # many graphs (a directory or a,b,c): one line each, a summary
  python -m regal.optimize          # the default synthetic dataset's first test graph
  python -m regal.optimize --method cpsat --time_limit 30   # a baseline instead of BRKGA
  python -m regal.optimize --graph g.json --time_limit 3    # BRKGA for at most ~3 s
  python -m regal.optimize --brkga_preset tuned   # BRKGA with the tuning sweep's best setting
  python -m regal.optimize --graph ffnn.txt --devices 4 --model doppler --method doppler \
      --evals 2048 --doppler_save ffnn_policy.msgpack    # Doppler's SEL/PLC policy (stages I-II)
  python -m regal.optimize --graph block.txt --devices 4 --model doppler \
      --seed_arms single_device,critical_path,doppler --doppler_checkpoint ffnn_policy.msgpack
  python -m regal.optimize --graph chain_mm.json --devices 4 --execute   # run the winner and
      # the baselines on the devices (host devices on a CPU), measured next to predicted
  python -m regal.optimize --graph ffnn.json --devices 4 --method doppler --reward measured \
      --stage3_steps 5                            # Doppler stage III on measured times

  python -m regal.optimize --graph ../shared/graphs/profiled/throughput/op_bert_l-6_training.json \
      --objective throughput --out split.json --gantt loads.png   # a profiled workload's
      # pipeline split (devices and memory cap from the file; regal/app/pipeline_lib.py;
      # --device_spec FILE.json sets the accelerators' count, memory cap, speed and links)
  python -m regal.optimize --graph ../shared/graphs/profiled/latency/op_bert_l-3_inference.json \
      --model blocks                     # its single-sample latency, contiguous blocks

Writes a summary to the terminal and, with --out, a JSON result (schema in
regal/app/optimize_lib.py). Exit codes: 0 done; 2 bad input (one `error:` line); 3 objective
runtime_under_memory found no solution within the limit, or no split of a profiled workload
fits its caps (the result is still written, with `feasible: false`); 130 / 143 SIGINT /
SIGTERM (during BRKGA the first one stops the search at a generation boundary and the best
found so far is reported and written). Compiled functions
are cached on disk, so a second run on a graph of the same size bucket starts faster.
"""
from __future__ import annotations

from datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from datasets import atomic  # noqa: E402
from datasets import dataset as dataset_lib  # noqa: E402
from datasets import devices as devices_lib  # noqa: E402
from datasets import io as graph_io  # noqa: E402
from regal.app import gantt, methods, optimize_lib, pipeline_lib  # noqa: E402
from regal.app import report as report_lib  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.doppler_policy import method as doppler_method  # noqa: E402
from regal.search import portfolio  # noqa: E402

_GRAPH = flags.DEFINE_string("graph", None, "Graph file (json, costgraph, doppler, dot or stg), "
                             "or several: comma-separated files or a directory.")
_FORMAT = flags.DEFINE_enum("format", None, list(graph_io.FORMATS), "Graph format "
                            "(default: sniffed from the content, then the extension).")
_DATASET = flags.DEFINE_enum("dataset", None, ["synthetic"], "Take the graph from a dataset "
                             "(the default when --graph is not given).")
_SPLIT = flags.DEFINE_enum("split", "test", list(dataset_lib.SPLITS), "Dataset split.")
_INDEX = flags.DEFINE_integer("index", 0, "Graph index within the split.",
                              lower_bound=0, upper_bound=2**31 - 1)
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Dataset cache folder.")
_MODEL = flags.DEFINE_enum("model", "wc", list(performance.MODELS) + [pipeline_lib.MODEL],
                           "Performance model. blocks: a profiled workload's single-sample "
                           "latency, each accelerator one contiguous block "
                           "(regal/scoring/blocks.py), devices from its file unless --device_spec.")
_OBJECTIVE = flags.DEFINE_enum("objective", "runtime",
                               list(performance.OBJECTIVES) + [pipeline_lib.OBJECTIVE],
                               "What to minimize. throughput: a profiled workload's pipeline "
                               "max-load (regal/app/pipeline_lib.py), devices from its file "
                               "unless --device_spec.")
_MEMORY_LIMIT = flags.DEFINE_float("memory_limit", None, "Per-device memory limit in bytes "
                                   "(runtime_under_memory; default: device capacities).")
_ENGINE = flags.DEFINE_enum("engine", "auto", list(performance.ENGINES), "How batched "
                            "scoring runs: native (the WC model's compiled host loop), jax, or "
                            "auto (native for the WC model on a CPU, else jax).")
_METHOD = flags.DEFINE_enum("method", "brkga", list(methods.METHODS) + [
    m for m in pipeline_lib.METHODS if m not in methods.METHODS],
    "Placement method: brkga or a baseline (regal/baselines); with --objective throughput: "
    + ", ".join(pipeline_lib.METHODS) + " (default search).")
_EVALS = flags.DEFINE_integer("evals", None, "Fitness evaluations (BRKGA, hill climb, local "
                              "and random search budget). Default: sized from the graph so "
                              "BRKGA searches up to ~10 s on a 2-core CPU (deterministic; "
                              "on a slower CPU it stops after 10 s of search).")
_TIME_LIMIT = flags.DEFINE_float("time_limit", None, "Seconds: BRKGA stops at the first "
                                 "generation boundary after them and reports the best found "
                                 "(default: 10 with the default budget, else no limit); "
                                 "the cpsat and quickp solvers' limit "
                                 "(default 10).")
_DECODER = flags.DEFINE_enum("decoder", None, ["direct", "list", "consumer"], "How BRKGA "
                             "reads chromosomes: direct (device keys' argmax), list (a list "
                             "scheduler by earliest finish time; regal/scoring/list_decoder.py) "
                             "or consumer (direct, each transfer sent in its readers' priority; "
                             "regal/scoring/consumer_transfers.py; models that order transfers). "
                             "Default: the preset's.")
_EXACT_SOLVER = flags.DEFINE_enum("exact_solver", "auto", ["auto", "off"], "auto: BRKGA runs "
                                  "CP-SAT beside it on graphs of the delay model (objective "
                                  "runtime) up to 64 ops: the solver's answer is a candidate, "
                                  "its proof ends the search and gives the lower bound; off: "
                                  "the search alone.")
_SEED = flags.DEFINE_integer("seed", 0, "Random seed (0 to 2^32 - 1).", lower_bound=0,
                             upper_bound=errors.MAX_SEED)
_COARSEN = flags.DEFINE_string("coarsen", "off", "Solve a coarsened graph, map the answer "
                               "back and (brkga) refine it on the original graph: off, auto "
                               "(graphs above 500 ops: QuickP fusion, then heavy edges to 256 "
                               "groups, keeping the critical path short) or a group count.")
_POLICY = flags.DEFINE_string("policy", None, "A regal.train workdir: its trained policy "
                              "steers the search (per-gene mutant distributions), within the "
                              "same budget.")
_COMPARE_UNGUIDED = flags.DEFINE_bool(
    "compare_unguided", False, "With --policy: also run the same search without the policy "
    "and report it in the details, with its own evaluations (the answer stays the guided "
    "search's).")
_BRKGA_PRESET = flags.DEFINE_string(
    "brkga_preset", "default", "BRKGA's parameters: default (Goncalves & Resende) or a preset "
    "saved by the tuning sweep (regal/search/brkga_presets.json, e.g. tuned).")
_SEED_ARMS = flags.DEFINE_string("seed_arms", ",".join(methods.DEFAULT_ARMS),
                                 "BRKGA's seed chromosomes, comma-separated: "
                                 + ", ".join(methods.ARMS) + ".")
_DOPPLER_CHECKPOINT = flags.DEFINE_string(
    "doppler_checkpoint", None, "A saved Doppler policy (method doppler or the doppler seed "
    "arm): start from it instead of imitating critical path; any graph (transfer).")
_DOPPLER_EVALS = flags.DEFINE_integer("doppler_evals", 1024, "Episodes the doppler seed arm "
                                      "trains for (taken from --evals).")
_DOPPLER_SAMPLES = flags.DEFINE_integer("doppler_samples", 8, "Sampled Doppler assignments "
                                        "seeded besides the greedy and the best one.",
                                        lower_bound=0, upper_bound=doppler_method.MAX_SAMPLES)
_DOPPLER_SAVE = flags.DEFINE_string("doppler_save", None, "With --method doppler: save the "
                                    "trained policy to this file (parameters and network config).")
_EXECUTE = flags.DEFINE_bool("execute", False, "Run the winner and the baselines it was "
                             "compared with on the devices (regal.execute) and report measured "
                             "times next to predicted ones.")
_EXECUTE_REPEATS = flags.DEFINE_integer("execute_repeats", 5, "Timed runs per placement.",
                                        lower_bound=1, upper_bound=10_000)
_EXECUTE_MODE = flags.DEFINE_enum("execute_mode", "async", ["async", "strict"],
                                  "Executor discipline (regal/execute/executor.py).")
_REWARD = flags.DEFINE_enum("reward", "model", ["model", "measured"], "With --method doppler: "
                            "measured adds stage III, REINFORCE on measured run times.")
_STAGE3_STEPS = flags.DEFINE_integer("stage3_steps", 5, "Stage III batches of episodes "
                                     "(--reward measured).", lower_bound=1, upper_bound=100_000)
_OUT = flags.DEFINE_string("out", None, "Write the result JSON here (atomically).")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "With several graphs: write DIR/<file stem>.json "
                               "for each (and with --gantt a chart beside it).")
_GANTT = flags.DEFINE_string("gantt", None, "Write a Gantt chart here (.png, .pdf or .svg); "
                             "with several graphs the format (png, pdf or svg) of one chart "
                             "per graph.")
devices_lib.define_flags()

FLAG_GROUPS = (
    ("Graph", ("graph", "format", "dataset", "split", "index", "data_dir")),
    ("Devices", ("devices", "device_preset", "device_spec")),
    ("Model and objective", ("model", "objective", "memory_limit", "engine")),
    ("Method and budget", ("method", "evals", "time_limit", "seed", "coarsen")),
    ("BRKGA", ("brkga_preset", "decoder", "seed_arms", "exact_solver", "policy",
               "compare_unguided")),
    ("Doppler's policy (--method doppler or the doppler seed arm)",
     ("doppler_checkpoint", "doppler_evals", "doppler_samples", "doppler_save", "reward",
      "stage3_steps")),
    ("Running on devices", ("execute", "execute_repeats", "execute_mode")),
    ("Output", ("out", "out_dir", "gantt")),
)


def load_graph():
  """--graph, or a dataset graph; with neither, the default synthetic dataset's test graph."""
  if _GRAPH.value and _DATASET.value:
    raise errors.ConfigError("give only one of --graph and --dataset")
  if _GRAPH.value:
    return graph_io.load_graph(_GRAPH.value, _FORMAT.value), _GRAPH.value
  dataset = dataset_lib.load_or_build_synthetic(data_dir=_DATA_DIR.value)
  graphs = dataset[_SPLIT.value]
  if not 0 <= _INDEX.value < len(graphs):
    raise errors.ConfigError(f"--index {_INDEX.value} is outside split {_SPLIT.value!r} "
                             f"(0..{len(graphs) - 1})")
  return graphs[_INDEX.value], f"synthetic/{_SPLIT.value}/{_INDEX.value}"


def check_outputs() -> None:
  """Output paths are refused before any search: clobbering an input, an unwritable place,
  a chart extension that is not a chart format."""
  inputs = [p for p in (_GRAPH.value or "").split(",") + [
      flags.FLAGS.device_spec, _POLICY.value, _DOPPLER_CHECKPOINT.value] if p]
  several = _OUT_DIR.value or len(inputs) > 1 or (_GRAPH.value and os.path.isdir(_GRAPH.value))
  atomic.check_outputs([("--out", _OUT.value, ()), ("--doppler_save", _DOPPLER_SAVE.value, ()),
                        ("--gantt", None if several else _GANTT.value, atomic.CHART_EXTENSIONS)],
                       inputs)


def enable_compilation_cache() -> None:
  import jax
  cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                       "regal", "jax")
  jax.config.update("jax_compilation_cache_dir", cache)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _given(name: str) -> bool:
  return flags.FLAGS[name].present > 0


def run_config(measured=None, progress=None) -> methods.RunConfig:
  """The run the flags describe (`measured`: Doppler's stage-III reward source)."""
  return methods.RunConfig(
      model=_MODEL.value, objective=_OBJECTIVE.value, memory_limit=_MEMORY_LIMIT.value,
      method=_METHOD.value, evals=_EVALS.value, seed=_SEED.value, time_limit=_TIME_LIMIT.value,
      coarsen_spec=_COARSEN.value, engine=_ENGINE.value,
      arms=methods.parse_arms(_SEED_ARMS.value), policy_dir=_POLICY.value,
      brkga_preset=_BRKGA_PRESET.value, decoder=_DECODER.value,
      compare_unguided=_COMPARE_UNGUIDED.value, exact_solver=_EXACT_SOLVER.value,
      doppler=doppler_method.DopplerOptions(checkpoint=_DOPPLER_CHECKPOINT.value,
                                            evals=_DOPPLER_EVALS.value,
                                            samples=_DOPPLER_SAMPLES.value),
      doppler_save=_DOPPLER_SAVE.value, measured=measured, stage3_steps=_STAGE3_STEPS.value,
      progress=progress)


def check_flags() -> None:
  """Values out of range, and flags that the other flags would make do nothing, refused
  before any work (absl cannot tell a flag given from one left at its default)."""
  method = _METHOD.value
  reads = {option: methods.readers(option) for option in ("evals", "time_limit", "seed", "engine")}
  if _OUT_DIR.value and (not _GRAPH.value or _DATASET.value):
    raise errors.ConfigError("--out_dir keeps the results of --graph files (a directory or "
                             "a,b,c); one graph's result goes to --out")
  for name, value in (("time_limit", _TIME_LIMIT.value), ("memory_limit", _MEMORY_LIMIT.value)):
    if value is not None and not (math.isfinite(value) and value > 0):
      raise errors.ConfigError(f"--{name} must be a positive finite number, got {value}")
  for name, value, lowest in (("evals", _EVALS.value, 1), ("doppler_evals", _DOPPLER_EVALS.value,
                                                            0)):
    if value is not None and not lowest <= value <= methods.MAX_EVALS:
      raise errors.ConfigError(f"--{name} must be between {lowest} and "
                               f"{methods.MAX_EVALS:,}, got {errors.brief(value)}")
  # The library's checks of the run (methods.RunConfig.validate), before any work.
  run_config(measured=object() if _REWARD.value == "measured" else None).validate()
  if _MEMORY_LIMIT.value is not None and _OBJECTIVE.value != "runtime_under_memory":
    raise errors.ConfigError(f"--memory_limit is read by --objective runtime_under_memory "
                             f"only; objective {_OBJECTIVE.value} would ignore it")
  doppler_arm = method == "brkga" and "doppler" in methods.parse_arms(_SEED_ARMS.value)
  measured, execute = _REWARD.value == "measured", _EXECUTE.value
  spec = flags.FLAGS.device_spec
  ignored = (
      ("evals", method not in reads["evals"],
       f"--method {method} has no evaluation budget (only {', '.join(reads['evals'])} do)"),
      ("time_limit", method not in reads["time_limit"],
       f"--method {method} has no time limit (only {', '.join(reads['time_limit'])} do)"),
      ("seed", method not in reads["seed"] and not (execute or measured),
       f"--method {method} draws no random numbers"),
      ("engine", method not in reads["engine"],
       f"--method {method} scores no batches (only {', '.join(reads['engine'])} do)"),
      ("seed_arms", method != "brkga", "seed arms seed BRKGA (--method brkga)"),
      ("exact_solver", method != "brkga" or not portfolio.model_allows(_MODEL.value,
                                                                        _OBJECTIVE.value),
       "the solver runs beside BRKGA (--method brkga) on the delay model's runtime only"),
      ("compare_unguided", not _POLICY.value, "it compares a --policy's search with the "
       "unguided one"),
      ("doppler_checkpoint", method != "doppler" and not doppler_arm,
       "it is read by --method doppler and by the doppler seed arm (--seed_arms ...,doppler)"),
      ("doppler_evals", not doppler_arm, "it is the doppler seed arm's budget (--method brkga "
       "--seed_arms ...,doppler); --method doppler takes --evals"),
      ("doppler_samples", not doppler_arm,
       "it is read by the doppler seed arm (--method brkga --seed_arms ...,doppler)"),
      ("doppler_save", method != "doppler", "it saves the policy --method doppler trains"),
      ("reward", method != "doppler", "it picks the reward of --method doppler"),
      ("stage3_steps", not measured, "stage III runs with --reward measured only"),
      ("execute_repeats", not execute, "it is read with --execute only"),
      ("execute_mode", not (execute or measured),
       "it is read with --execute or --reward measured only"),
      ("split", bool(_GRAPH.value), "--graph names the graph; --split picks a dataset's"),
      ("index", bool(_GRAPH.value), "--graph names the graph; --index picks a dataset's"),
      ("data_dir", bool(_GRAPH.value), "--graph names the graph; --data_dir holds a dataset's"),
      ("format", not _GRAPH.value, "it is the format of --graph's files"),
      ("devices", bool(spec), "--device_spec describes the devices, their count included"),
      ("device_preset", bool(spec), "--device_spec describes the devices"),
  )
  for name, does_nothing, why in ignored:
    if does_nothing and _given(name):
      raise errors.ConfigError(f"--{name} would do nothing here: {why}")
  for name, path, kind in (("doppler_checkpoint", _DOPPLER_CHECKPOINT.value, "file"),
                           ("policy", _POLICY.value, "directory")):
    if path and not (os.path.isfile(path) if kind == "file" else os.path.isdir(path)):
      raise errors.ConfigError(f"--{name} {path}: no such {kind}")


_SPLIT_FLAGS = ("graph", "format", "objective", "model", "method", "evals", "time_limit", "seed",
                "out", "gantt", "device_spec")


def split_config() -> pipeline_lib.SplitConfig:
  """--objective throughput or --model blocks: the flags they read, checked; every other flag
  given is refused."""
  latency = _MODEL.value == pipeline_lib.MODEL
  how = f"--model {pipeline_lib.MODEL}" if latency else f"--objective {pipeline_lib.OBJECTIVE}"
  if latency and _given("objective"):
    raise errors.ConfigError(f"--model {pipeline_lib.MODEL} minimizes a profiled workload's "
                             f"single-sample latency: --objective {_OBJECTIVE.value} would do "
                             f"nothing (--objective throughput is the pipeline's max-load)")
  if not latency and _given("model"):
    raise errors.ConfigError(f"--model would do nothing with --objective "
                             f"{pipeline_lib.OBJECTIVE}: its max-load is its own model")
  for name in flags.FLAGS:
    if flags.FLAGS[name].present and name not in _SPLIT_FLAGS and \
        any(name in names for _, names in FLAG_GROUPS):
      raise errors.ConfigError(f"--{name} would do nothing with {how}: the workload's file "
                               f"gives its devices and memory cap (--device_spec overrides "
                               f"the accelerators)")
  if not _GRAPH.value:
    raise errors.ConfigError(f"{how} needs --graph: a profiled workload "
                             f"(msr-fiddle/dnn-partitioning's JSON)")
  if "," in _GRAPH.value or os.path.isdir(_GRAPH.value):
    raise errors.ConfigError(f"{how} takes one --graph file")
  method = _METHOD.value if _given("method") else "search"
  config = pipeline_lib.SplitConfig(method=method, objective="latency" if latency else
                                    "throughput", evals=_EVALS.value, seed=_SEED.value,
                                    time_limit=_TIME_LIMIT.value)
  pipeline_lib.check_config(config)
  reads = pipeline_lib.METHODS[method].reads
  if _TIME_LIMIT.value is not None and not (math.isfinite(_TIME_LIMIT.value) and
                                           _TIME_LIMIT.value > 0):
    raise errors.ConfigError(f"--time_limit must be a positive finite number, got "
                             f"{_TIME_LIMIT.value}")
  if _EVALS.value is not None and not 1 <= _EVALS.value <= methods.MAX_EVALS:
    raise errors.ConfigError(f"--evals must be between 1 and {methods.MAX_EVALS:,}, got "
                             f"{errors.brief(_EVALS.value)}")
  for name in ("evals", "time_limit", "seed"):
    if _given(name) and name not in reads:
      readers = [m for m, spec in pipeline_lib.METHODS.items() if name in spec.reads]
      raise errors.ConfigError(f"--{name} would do nothing here: --method {method} does not "
                               f"read it (only {', '.join(readers)} do)")
  if method == "cpsat" and latency:
    raise errors.ConfigError("--method cpsat models the pipeline max-load only (--objective "
                             "throughput), not --model blocks")
  return config


def main_split() -> None:
  """A profiled workload's split: report, write, exit 3 if infeasible."""
  from datasets.formats import profiled
  from regal.app import split_chart
  config = split_config()
  check_outputs()
  workload = profiled.load_workload(_GRAPH.value, _FORMAT.value)
  spec = flags.FLAGS.device_spec
  if spec:
    workload = profiled.with_devices(workload, devices_lib.load(spec), f"--device_spec {spec}")
  data = pipeline_lib.run(workload, config, source=_GRAPH.value, device_spec=spec)
  print(pipeline_lib.summary(data))
  if _GANTT.value:
    split_chart.draw(workload, data, _GANTT.value)
    print(f"wrote {_GANTT.value}")
  if _OUT.value:
    atomic.write_text(_OUT.value, json.dumps(data, indent=1, allow_nan=False) + "\n")
    print(f"wrote {_OUT.value}")
  if not data["feasible"]:
    cli.exit_infeasible("no split found fits the memory caps, co-location and (latency) "
                        "contiguity (the result says feasible: false, with the violations)")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  if _OBJECTIVE.value == pipeline_lib.OBJECTIVE or _MODEL.value == pipeline_lib.MODEL:
    return main_split()
  if _METHOD.value not in methods.METHODS:
    raise errors.ConfigError(f"--method {_METHOD.value} splits a profiled workload: it needs "
                             f"--objective {pipeline_lib.OBJECTIVE} or --model "
                             f"{pipeline_lib.MODEL}")
  check_flags()
  check_outputs()
  devices = devices_lib.from_flags()
  on_devices = _EXECUTE.value or _REWARD.value == "measured"
  if on_devices:
    from regal.scoring import parallel as parallel_lib
    parallel_lib.use_host_devices(devices.num_devices)  # Before JAX starts.
  if _GRAPH.value and not _DATASET.value:
    paths = optimize_lib.graph_paths(_GRAPH.value)
    if len(paths) > 1 or _OUT_DIR.value:
      return run_many(paths, devices)
  graph, source = load_graph()
  enable_compilation_cache()
  program = measured = None
  if on_devices:
    from regal.execute import choose_program, executor
    device_list = executor.available_devices(devices.num_devices)
    program = choose_program.program_for(graph, seed=_SEED.value)
    if _REWARD.value == "measured":
      from regal.execute.measured import MeasuredReward
      measured = MeasuredReward(graph, program, device_list, _EXECUTE_MODE.value)
  report = optimize_lib.run(graph, devices,
                            run_config(measured, progress=lambda line: print(line, flush=True)),
                            source=source)
  print(report_lib.summary(report))
  if _EXECUTE.value:
    from regal.execute import compare
    report.data["execution"] = compare.execute_assignments(
        graph, program, report.assignments, device_list, _EXECUTE_REPEATS.value,
        _EXECUTE_MODE.value)
    print(compare.summary(report.data["execution"]))
  if _GANTT.value:  # First: a chart that fails leaves no result file behind either.
    gantt.draw(graph, report.placement, report.schedule, _GANTT.value, model=_MODEL.value)
    print(f"wrote {_GANTT.value}")
  if _OUT.value:
    report_lib.write_json(report, _OUT.value)
    print(f"wrote {_OUT.value}")
  if not (_OUT.value or _GANTT.value):
    print("nothing saved: --out result.json keeps the result, --gantt chart.png its chart")
  if not report.data["feasible"]:
    cli.exit_infeasible("no solution found fits the memory limit (the result says "
                           "feasible: false, with the excess per device)")


def run_many(paths, devices) -> None:
  if _OUT.value:
    raise errors.ConfigError("--out names one result: with several graphs give --out_dir")
  if _EXECUTE.value or _REWARD.value == "measured" or _POLICY.value or _DOPPLER_SAVE.value:
    raise errors.ConfigError("--execute, --reward measured, --policy and --doppler_save take "
                             "one graph")
  chart = None
  if _GANTT.value:
    chart = _GANTT.value.rsplit(".", 1)[-1].lower()
    if chart not in atomic.CHART_EXTENSIONS:
      raise errors.ConfigError(f"--gantt {_GANTT.value!r}: with several graphs give the "
                               f"chart format: {', '.join(atomic.CHART_EXTENSIONS)}")
  enable_compilation_cache()
  failures = optimize_lib.run_many(paths, devices, run_config(), _OUT_DIR.value, chart,
                                   _FORMAT.value)
  if failures and not cli.stop_requested():  # Interrupted: run_cli says so, exit 130/143.
    raise errors.RegalError(f"{failures} of {len(paths)} graphs failed (their errors are above)")


if __name__ == "__main__":
  cli.run_cli(main)
