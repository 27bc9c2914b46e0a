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
regal/app/report.py). Exit codes: 0 done; 2 bad input (one `error:` line); 3 objective
runtime_under_memory found no solution within the limit, or no split of a profiled workload
fits its caps (the result is still written, with `feasible: false`); 130 / 143 SIGINT /
SIGTERM (during BRKGA the first one stops the search at a generation boundary and the best
found so far is reported and written). Compiled functions
are cached on disk, so a second run on a graph of the same size bucket starts faster.
"""
from __future__ import annotations

from regal_datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

# Only what the flags need loads before they are checked: a mistyped flag or a missing file is
# refused at once; JAX, numba and the scorers load with `regal.app.optimize_cli`.
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import dataset as dataset_lib  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal import startup  # noqa: E402
from regal.parallelism import hardware  # noqa: E402
from regal.app import choices, optimize_inputs  # noqa: E402

startup.use_all_cpu_cores()  # Before JAX starts.

flags.DEFINE_string("graph", None, "Graph file (json, costgraph, doppler, dot or stg), "
                    "or several: comma-separated files or a directory.")
flags.DEFINE_enum("format", None, list(graph_io.FORMATS), "Graph format "
                  "(default: sniffed from the content, then the extension).")
flags.DEFINE_enum("dataset", None, ["synthetic"], "Take the graph from a dataset "
                  "(the default when --graph is not given).")
flags.DEFINE_enum("split", "test", list(dataset_lib.SPLITS), "Dataset split.")
flags.DEFINE_integer("index", 0, "Graph index within the split.",
                     lower_bound=0, upper_bound=2**31 - 1)
flags.DEFINE_string("data_dir", None, "Dataset cache folder.")
cli.define_registered("model", "wc", choices.MODEL_REGISTRY,
                      "Performance model. blocks: a profiled workload's single-sample "
                      "latency, each accelerator one contiguous block "
                      "(regal/scoring/blocks/), devices from its file unless --device_spec.",
                      also=(choices.SPLIT_MODEL,))
flags.DEFINE_enum("objective", None,
                  [*choices.OBJECTIVES, choices.SPLIT_OBJECTIVE],
                  "What to minimize (default: runtime_under_memory on accelerators, "
                  "whose memory binds, with a model that tracks memory; else runtime). "
                  "throughput: a profiled workload's pipeline "
                  "max-load (regal/app/pipeline_lib.py), devices from its file "
                  "unless --device_spec.")
flags.DEFINE_float("memory_limit", None, "Per-device memory limit in bytes "
                   "(runtime_under_memory; default: device capacities).")
flags.DEFINE_enum("engine", "auto", list(choices.ENGINES), "How batched "
                  "scoring runs: native (the WC model's compiled host loop), jax, or "
                  "auto (native for the WC model on a CPU, else jax).")
cli.define_registered(
    "method", "brkga", choices.METHOD_REGISTRY,
    "Placement method: brkga or a baseline (regal/baselines); with --objective throughput: "
    + ", ".join(choices.SPLIT_METHODS) + " (default search); on a training step (zoo "
    "--step train) with --device_preset, a configuration: "
    + ", ".join(n for n in choices.CONFIGURATION_REGISTRY.names() if n != "auto")
    + " (regal/parallelism/configurations.py).",
    also=choices.Registries(choices.SPLIT_METHOD_REGISTRY, choices.CONFIGURATION_REGISTRY))
flags.DEFINE_integer("evals", None, "Fitness evaluations (BRKGA, hill climb, local "
                     "and random search budget). Default: sized from the graph so "
                     "BRKGA searches up to ~10 s on a 2-core CPU (deterministic; "
                     "on a slower CPU it stops after 10 s of search).")
flags.DEFINE_float("time_limit", None, "Seconds: BRKGA stops at the first "
                   "generation boundary after them and reports the best found "
                   "(default: 10 with the default budget, else no limit); "
                   "the cpsat and quickp solvers' limit "
                   "(default 10).")
cli.define_registered("decoder", None, choices.DECODER_REGISTRY, "How BRKGA "
                      "reads chromosomes: direct (device keys' argmax), list (a list "
                      "scheduler by earliest finish time; regal/scoring/list_decoder.py) "
                      "or consumer (direct, each transfer sent in its readers' priority; "
                      "regal/scoring/consumer_transfers.py; models that order transfers). "
                      "Default: the preset's.")
flags.DEFINE_enum("exact_solver", "auto", ["auto", "off"], "auto: BRKGA runs "
                  "CP-SAT beside it on graphs of the delay model (objective "
                  "runtime) up to 64 ops: the solver's answer is a candidate, "
                  "its proof ends the search and gives the lower bound; off: "
                  "the search alone.")
flags.DEFINE_integer("seed", 0, "Random seed (0 to 2^32 - 1).", lower_bound=0,
                     upper_bound=errors.MAX_SEED)
flags.DEFINE_string("shard", "off", "Split an imported graph's ops (JAX or ONNX) into "
                    "blocks before placing them (regal/parallelism/shard_imported.py): off, a shard "
                    "count K (each op on its batch, or another dimension K divides) or auto "
                    "(K among the device count's divisors, or no split, by measured benefit; "
                    "regal/app/sharding.py). With --method data_parallel: K shards instead "
                    "of one per device (auto: one per device). On a training step (zoo "
                    "--step train) with --device_preset, auto searches its meshes: data x "
                    "tensor x pipeline, ZeRO, micro-batches (regal/app/training_lib.py).")
flags.DEFINE_string("coarsen", "off", "Solve a coarsened graph, map the answer "
                    "back and (brkga) refine it on the original graph: off, auto "
                    "(graphs above 500 ops: QuickP fusion, then heavy edges to 256 "
                    "groups, keeping the critical path short) or a group count.")
cli.define_registered("prior", "none", choices.PRIOR_REGISTRY, "A parameter-free prior over "
                      "BRKGA's fresh keys: none (the unguided search), bottom_level (each "
                      "priority gene, with probability 0.3, drawn around the op's bottom-level "
                      "rank; the others as unguided) or group_island (devices in link groups "
                      "only: islands confined to stage-balanced splits of the ops among the "
                      "groups, and a free run, seed the search; all within the budget).")
flags.DEFINE_string("policy", None, "A regal.train workdir, or 'default' (the prior shipped "
                    "for this model and device count): its trained prior (the default learner: "
                    "per op, a key around where long runs schedule it and its device or link "
                    "group, for a share q of fresh keys, and a seed) or mutant policy (per-gene "
                    "Beta mutants) steers the search, within the same budget.")
flags.DEFINE_bool(
    "compare_unguided", False, "With --policy: also run the same search without the policy "
    "and report it in the details, with its own evaluations (the answer stays the guided "
    "search's).")
flags.DEFINE_string(
    "brkga_preset", "default", "BRKGA's parameters: default (Goncalves & Resende) or a preset "
    "saved by the tuning sweep (regal/search/brkga_presets.json, e.g. tuned).")
flags.DEFINE_string("seed_arms", ",".join(choices.DEFAULT_ARMS),
                    "BRKGA's seed chromosomes, comma-separated: "
                    + ", ".join(choices.ARMS) + ".")
flags.DEFINE_string(
    "doppler_checkpoint", None, "A saved Doppler policy (method doppler or the doppler seed "
    "arm): start from it instead of imitating critical path; any graph (transfer).")
flags.DEFINE_integer("doppler_evals", 1024, "Episodes the doppler seed arm "
                     "trains for (taken from --evals).")
flags.DEFINE_integer("doppler_samples", 8, "Sampled Doppler assignments "
                     "seeded besides the greedy and the best one.",
                     lower_bound=0, upper_bound=choices.MAX_DOPPLER_SAMPLES)
flags.DEFINE_string("doppler_save", None, "With --method doppler: save the "
                    "trained policy to this file (parameters and network config).")
flags.DEFINE_bool("execute", False, "Run the winner and the baselines it was "
                  "compared with on the devices (regal.execute) and report measured "
                  "times next to predicted ones.")
flags.DEFINE_integer("execute_repeats", 5, "Timed runs per placement.",
                     lower_bound=1, upper_bound=10_000)
flags.DEFINE_enum("execute_mode", "async", ["async", "strict"],
                  "Executor discipline (regal/execute/executor.py).")
flags.DEFINE_enum("reward", "model", ["model", "measured"], "With --method doppler: "
                  "measured adds stage III, REINFORCE on measured run times.")
flags.DEFINE_integer("stage3_steps", 5, "Stage III batches of episodes "
                     "(--reward measured).", lower_bound=1, upper_bound=100_000)
flags.DEFINE_string("out", None, "Write the result JSON here (atomically).")
flags.DEFINE_string("out_dir", None, "With several graphs: write DIR/<file stem>.json "
                    "for each (and with --gantt a chart beside it).")
flags.DEFINE_string("gantt", None, "Write a Gantt chart here (.png, .pdf or .svg); "
                    "with several graphs the format (png, pdf or svg) of one chart "
                    "per graph.")
hardware.define_flags()

FLAG_GROUPS = (
    ("Graph", ("graph", "format", "dataset", "split", "index", "data_dir")),
    ("Devices", ("devices", "device_preset", "device_spec")),
    ("Model and objective", ("model", "objective", "memory_limit", "engine")),
    ("Method and budget", ("method", "evals", "time_limit", "seed", "shard", "coarsen")),
    ("BRKGA", ("brkga_preset", "decoder", "seed_arms", "exact_solver", "prior", "policy",
               "compare_unguided")),
    ("Doppler's policy (--method doppler or the doppler seed arm)",
     ("doppler_checkpoint", "doppler_evals", "doppler_samples", "doppler_save", "reward",
      "stage3_steps")),
    ("Running on devices", ("execute", "execute_repeats", "execute_mode")),
    ("Output", ("out", "out_dir", "gantt")),
)


def main(argv: Sequence[str]) -> None:
  # The flags' values, the devices and the graph, read and checked before the libraries load.
  inputs = optimize_inputs.read(argv)
  from regal.app import optimize_cli  # Deferred: see the imports above.
  optimize_cli.run(inputs, FLAG_GROUPS)


if __name__ == "__main__":
  cli.run_cli(main)
