r"""Doppler's Table 2 and its transfer table: every method at equal evaluations on the Doppler
graphs and our sharded workloads, simulated and (where the executor can run them) measured.

  python -m regal_experiments.doppler_table            # full: ~8 minutes on 2 cores
  python -m regal_experiments.doppler_table --quick    # ~4 minutes: 2 small sharded graphs, measured
  python -m regal_experiments.doppler_table --regal_policy runs/regal4   # adds REGAL's column

Suites (one table each):
  doppler_files  the four Doppler graphs (`../shared/graphs/doppler`, skipped with a note when
                 absent), 4 homogeneous devices, the Doppler-compatible model, Doppler's units
  sharded4       our sharded ChainMM, FFNN, Llama block, Llama layer at the Doppler paper's
                 sizes, 4 homogeneous devices, the work-conserving (WC) model
  sharded8       the same on 8 devices in two NVLink groups (`nvlink_two_groups`)
  measured4      the four at sizes this machine can run (ChainMM 1024, FFNN 4096x4096, Llama
                 512 tokens x 512), 4 devices: simulated and measured (median of
                 `--repeats` runs of each method's winner on JAX devices; host devices on a CPU)
Columns (each spends at most `--evals` model evaluations):
  critical_path_doppler  the Doppler repository's critical path (the papers' anchor; none)
  critical_path          our critical path (none)
  enumerative            Doppler's Enumerative Optimizer over meta-op groups
  doppler                Doppler's SEL/PLC policy, stages I + II, `--evals` episodes
  brkga                  BRKGA seeded with the single-device assignment only
  brkga_cp               BRKGA seeded with single device + critical path (the default)
  brkga_doppler          BRKGA seeded by Doppler too (trained on `--doppler_evals` episodes,
                         taken from the same budget)
  regal                  with `--regal_policy` trained for the suite's device count: REGAL
                         (the policy's mutant distributions; left out otherwise)
Transfer table (Doppler section 5): a Doppler policy trained on FFNN or ChainMM
(`--evals` episodes), applied to the Llama graphs zero-shot (its greedy assignment) and
few-shot (`--few_shot` more episodes), against Doppler trained from scratch with the few-shot
budget and against critical path. Writes `doppler_table.md`, `.json` under `--out`.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402

from regal_datasets import analysis  # noqa: E402
from regal_datasets import benchmarks  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import cli, errors  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_datasets import sharded  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.app import methods, optimize_lib  # noqa: E402
from regal.scoring import models, performance  # noqa: E402
from regal.doppler_policy import method as doppler_method  # noqa: E402

DOPPLER_DIR = benchmarks.DOPPLER_GRAPHS
DOPPLER_FILES = {"chain_mm": "chain_mm_112nodes", "ffnn": "ffnn_192nodes",
                 "llama_block": "transformer_block_215nodes",
                 "llama_layer": "full_transformer_layer_261nodes"}
COLUMNS = ("critical_path_doppler", "critical_path", "enumerative", "doppler", "brkga",
           "brkga_cp", "brkga_doppler", "regal")
SMALL_SIZES = dict(size=1024, ffnn_batch=2 ** 12, ffnn_width=2 ** 12, seq_len=512, hidden=512,
                   heads=8, mlp=1376)
SUITES = ("doppler_files", "sharded4", "sharded8", "measured4")

_QUICK = flags.DEFINE_bool("quick", False, "measured4 on ChainMM and FFNN only, 1000 "
                           "evaluations, 256 Doppler episodes, transfer FFNN -> Llama block.")
_SUITES = flags.DEFINE_list("suites", list(SUITES), "Suites to run.")
_DOPPLER_DIR = flags.DEFINE_string("doppler_dir", DOPPLER_DIR, "Folder of the Doppler graphs.")
_EVALS = flags.DEFINE_integer("evals", 5000, "Evaluations per method and graph.",
                              lower_bound=1, upper_bound=1_000_000_000)
_DOPPLER_EVALS = flags.DEFINE_integer("doppler_evals", 1024, "Episodes of the Doppler seed arm.",
                                      lower_bound=1, upper_bound=1_000_000_000)
_FEW_SHOT = flags.DEFINE_integer("few_shot", 512, "Episodes of few-shot transfer.",
                                 lower_bound=1, upper_bound=1_000_000_000)
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed runs per executed assignment.",
                                lower_bound=1, upper_bound=1000)
_REGAL_POLICY = flags.DEFINE_string("regal_policy", None, "A regal.train workdir for the REGAL "
                                    "column (suites with its device count).")
_SEED = flags.DEFINE_integer("seed", 0, "Random seed.", lower_bound=0, upper_bound=errors.MAX_SEED)
_OUT = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "doppler_table"),
                           "Folder of the report.")


def suite_workloads(suite: str, quick: bool, doppler_dir: str):
  """(label, graph, devices, model, executable) of a suite's graphs."""
  workloads = ("chain_mm", "ffnn") if quick else sharded.WORKLOADS
  if suite == "doppler_files":
    rows = []
    for label, name in DOPPLER_FILES.items():
      path = os.path.join(doppler_dir, name + ".txt")
      if os.path.exists(path):
        rows.append((name, graph_io.load_graph(path), devices_lib.homogeneous(4), "doppler",
                     False))
    return rows
  if suite in ("sharded4", "sharded8"):
    count = int(suite[-1])
    devices = (devices_lib.homogeneous(4) if count == 4 else devices_lib.nvlink_two_groups(4))
    return [(w, sharded.generate(w, count), devices, "wc", False) for w in workloads]
  if suite == "measured4":
    return [(w, sharded.generate(w, 4, **SMALL_SIZES), devices_lib.homogeneous(4), "wc", True)
            for w in workloads]
  raise errors.ConfigError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")


def run_column(column: str, graph, devices, model: str, evals: int, doppler_evals: int,
               seed: int, regal_policy: str | None):
  common = dict(model=model, evals=evals, seed=seed)
  if column in ("critical_path_doppler", "critical_path", "doppler", "enumerative"):
    return optimize_lib.run(graph, devices, methods.RunConfig(method=column, **common))
  if column == "regal":
    return optimize_lib.run(graph, devices, methods.RunConfig(
        brkga=methods.BrkgaOptions(policy_dir=regal_policy), **common))
  arms = {"brkga": ("single_device",), "brkga_cp": ("single_device", "critical_path"),
          "brkga_doppler": ("single_device", "critical_path", "doppler")}[column]
  return optimize_lib.run(
      graph, devices,
      methods.RunConfig(doppler=doppler_method.DopplerOptions(evals=doppler_evals),
                        brkga=methods.BrkgaOptions(arms=arms), **common))


def _regal_fits(policy_dir: str | None, num_devices: int) -> bool:
  if not policy_dir:
    return False
  from regal.learning import train_lib
  return int(train_lib.workdir_config(policy_dir).num_devices) == num_devices


def run_suite(suite: str, quick: bool, evals: int, doppler_evals: int, seed: int,
              repeats: int, regal_policy: str | None, progress=print) -> dict:
  rows = []
  for label, graph, devices, model, executable in suite_workloads(suite, quick,
                                                                 _DOPPLER_DIR.value):
    units = lambda v: float(models.get(model).in_units(v))  # noqa: E731
    row = {"graph": label, "ops": graph.num_ops, "devices": devices.name,
           "model": model, "lower_bound": units(analysis.makespan_lower_bound(graph, devices)),
           "simulated": {}, "evaluations": {}, "seconds": {}}
    assignments = {}
    columns = [c for c in COLUMNS if c != "regal"
               or _regal_fits(regal_policy, devices.num_devices)]
    for column in columns:
      started = time.perf_counter()
      result = run_column(column, graph, devices, model, evals, doppler_evals, seed,
                          regal_policy)
      row["simulated"][column] = units(result.result.objective)
      row["evaluations"][column] = result.result.evaluations
      row["seconds"][column] = time.perf_counter() - started
      if column == "brkga_doppler":
        row["brkga_doppler_winner_origin"] = result.result.details["winner_origin"]
      assignments[column] = result.assignments["best"]
      progress(f"{suite} {label} {column}: {row['simulated'][column]:.6g} "
               f"({row['evaluations'][column]} evaluations, {row['seconds'][column]:.1f} s)")
    if executable:
      from regal.execute import choose_program, compare, executor
      program = choose_program.program_for(graph, seed=seed)
      execution = compare.execute_assignments(
          graph, program, assignments, executor.available_devices(devices.num_devices),
          repeats=repeats)
      row["measured_ms"] = {c: 1e3 * r["median_seconds"]
                            for c, r in execution["assignments"].items()}
      row["measured_devices"] = execution["devices"]
      progress(f"{suite} {label} measured (ms): "
               + ", ".join(f"{c} {v:.3f}" for c, v in row["measured_ms"].items()))
    rows.append(row)
  return {"suite": suite, "rows": rows}


def transfer_table(quick: bool, evals: int, few_shot: int, seed: int, progress=print) -> dict:
  """Zero- and few-shot transfer of a Doppler policy from FFNN / ChainMM to the Llama graphs."""
  from regal.doppler_policy import method as doppler_method
  files = os.path.isdir(_DOPPLER_DIR.value) and not quick
  if files:
    load = lambda w: graph_io.load_graph(os.path.join(_DOPPLER_DIR.value,
                                                      DOPPLER_FILES[w] + ".txt"))
    devices, model, where = devices_lib.homogeneous(4), "doppler", "the Doppler graphs"
  else:
    load = lambda w: sharded.generate(w, 4, **SMALL_SIZES)
    devices, model, where = devices_lib.homogeneous(4), "wc", "our sharded graphs (small)"
  units = lambda v: float(models.get(model).in_units(v))  # noqa: E731
  sources = ("ffnn",) if quick else ("ffnn", "chain_mm")
  targets = ("llama_block",) if quick else ("llama_block", "llama_layer")
  rows = []
  with tempfile.TemporaryDirectory() as scratch:
    for source in sources:
      checkpoint = os.path.join(scratch, source)
      doppler_method.doppler(performance.Problem(load(source), devices, model=model), evals,
                             seed, save=checkpoint)
      for target in targets:
        problem = performance.Problem(load(target), devices, model=model)
        zero = doppler_method.doppler(problem, 0, seed, checkpoint=checkpoint)
        few = doppler_method.doppler(problem, few_shot, seed, checkpoint=checkpoint)
        scratch_run = doppler_method.doppler(problem, few_shot, seed)
        critical = optimize_lib.run(problem.graph, devices,
                                    methods.RunConfig(model=model, method="critical_path"))
        rows.append({"source": source, "target": target,
                     "critical_path": units(critical.result.objective),
                     "zero_shot": units(zero.objective), "few_shot": units(few.objective),
                     "scratch_same_budget": units(scratch_run.objective)})
        progress(f"transfer {source} -> {target}: " + ", ".join(
            f"{k} {v:.6g}" for k, v in rows[-1].items() if isinstance(v, float)))
  return {"graphs": where, "model": model, "few_shot_episodes": few_shot,
          "source_episodes": evals, "rows": rows}


def markdown(suites: list[dict], transfer: dict | None, settings: dict) -> list[str]:
  lines = []
  for suite in suites:
    if not suite["rows"]:
      lines += [f"## {suite['suite']}", "", "no graphs (the Doppler files are missing)", ""]
      continue
    first = suite["rows"][0]
    unit = "Doppler's units (clock / 1e10)" if first[
        "model"] == "doppler" else "the model's time units"
    lines += [f"## {suite['suite']}: {first['devices']}, {first['model']} model, simulated "
              f"makespan in {unit}", ""]
    columns = [c for c in COLUMNS if c in first["simulated"]]
    lines += report.markdown_table(
        ["graph", "ops", "bound"] + columns + ["best / critical path", "winner from"],
        [[r["graph"], r["ops"], r["lower_bound"]] + [r["simulated"][c] for c in columns]
         + [f"{min(r['simulated'].values()) / r['simulated']['critical_path']:.3f}",
            r.get("brkga_doppler_winner_origin") or "no seed"] for r in suite["rows"]])
    if "measured_ms" in first:
      lines += ["", f"Measured on {len(first['measured_devices'])} devices "
                f"({', '.join(first['measured_devices'][:2])}, ...), median ms of "
                f"{settings['repeats']} runs:", ""]
      lines += report.markdown_table(
          ["graph"] + columns, [[r["graph"]] + [r["measured_ms"][c] for c in columns]
                                for r in suite["rows"]])
    lines.append("")
  if transfer:
    lines += [f"## Transfer ({transfer['graphs']}, {transfer['model']} model, 4 devices)", "",
              f"Policy trained on the source with {transfer['source_episodes']} episodes; "
              f"few-shot and scratch: {transfer['few_shot_episodes']} episodes on the target.",
              ""]
    lines += report.markdown_table(
        ["source", "target", "critical path", "zero-shot", "few-shot",
         "scratch (same budget)"],
        [[r["source"], r["target"], r["critical_path"], r["zero_shot"], r["few_shot"],
          r["scratch_same_budget"]] for r in transfer["rows"]])
  return lines


def main(argv: Sequence[str]) -> None:
  command.check(argv)
  quick = _QUICK.value
  present = lambda name: flags.FLAGS[name].present
  suites = ["measured4"] if quick and not present("suites") else _SUITES.value
  unknown = [s for s in suites if s not in SUITES]
  if unknown:
    raise errors.ConfigError(f"unknown suite {unknown[0]!r}; known: {', '.join(SUITES)}")
  evals = 1000 if quick and not present("evals") else _EVALS.value
  doppler_evals = 256 if quick and not present("doppler_evals") else _DOPPLER_EVALS.value
  few_shot = 256 if quick and not present("few_shot") else _FEW_SHOT.value
  repeats = 3 if quick and not present("repeats") else _REPEATS.value
  if min(evals, doppler_evals, few_shot, repeats) < 1:
    raise errors.ConfigError("--evals, --doppler_evals, --few_shot and --repeats must be >= 1")
  if "measured4" in suites:
    parallel.use_host_devices(4)  # The executor's devices on a CPU (before JAX starts).
  started = time.perf_counter()
  results = [run_suite(s, quick, evals, doppler_evals, _SEED.value, repeats,
                       _REGAL_POLICY.value) for s in suites]
  transfer = transfer_table(quick, evals, few_shot, _SEED.value)
  settings = {"evals": evals, "doppler_evals": doppler_evals, "few_shot": few_shot,
              "repeats": repeats, "regal_policy": _REGAL_POLICY.value}
  mode = ("quick (measured4 on ChainMM and FFNN, 1000 evaluations, 256 Doppler episodes, "
          "transfer FFNN -> Llama block)" if quick else "full")
  lines, facts = report.header("Doppler Table 2 and transfer", "regal_experiments.doppler_table",
                               mode)
  regal_note = (f"`{_REGAL_POLICY.value}`" if _REGAL_POLICY.value
                else "none (no --regal_policy given)")
  lines += [f"- budget: {evals} evaluations per method; Doppler seed arm {doppler_evals} "
            f"episodes; wall time {time.perf_counter() - started:.0f} s",
            f"- REGAL column: {regal_note}", ""]
  report.publish(_OUT.value, "doppler_table", lines, markdown(results, transfer, settings),
                 {**facts, "settings": settings, "suites": results, "transfer": transfer})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
