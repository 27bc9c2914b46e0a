"""Parameter sweeps: expand a grid or a random search, run every trial as a Ray task (or in
this process), one JSON line per finished trial, resumable.

A `Sweep` names a trial function (`"module:function"`, called as `fn(params, quick)` and
returning a JSON-able dict) and its parameter space. Trials are keyed by their parameters
(canonical JSON), so a rerun reads the results file, skips every trial already finished and
runs only the missing ones; a failed trial (an exception in it, or its worker dying) is
recorded with its error on one line and the sweep goes on; failed trials are retried when the
sweep is run again. Lines are appended and flushed one at a time: a run killed mid-write
leaves at most a partial last line, which is ignored (and its trial rerun).
"""
from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import os
import time
import traceback
from typing import Any, Callable, Sequence

import numpy as np

from regal_datasets import atomic, cli, errors


@dataclasses.dataclass(frozen=True)
class Sweep:
  name: str
  trial: str  # "module:function", fn(params: dict, quick: bool) -> dict
  grid: dict[str, Sequence[Any]] = dataclasses.field(default_factory=dict)
  # Random search: name -> ("uniform" | "log_uniform", low, high), ("int", low, high) or
  # ("choice", [values]); `samples` draws with `seed`. Grid and random combine (product).
  random: dict[str, tuple] = dataclasses.field(default_factory=dict)
  samples: int = 0
  seed: int = 0
  quick_grid: dict[str, Sequence[Any]] | None = None  # Replaces `grid` with --quick.
  quick_samples: int | None = None
  fixed: dict[str, Any] = dataclasses.field(default_factory=dict)  # Added to every trial.
  num_cpus: float = 1.0
  num_gpus: float = 0.0
  description: str = ""


def _draw(rng: np.random.Generator, spec: tuple) -> Any:
  kind = spec[0]
  if kind == "uniform":
    return float(rng.uniform(spec[1], spec[2]))
  if kind == "log_uniform":
    return float(np.exp(rng.uniform(np.log(spec[1]), np.log(spec[2]))))
  if kind == "int":
    return int(rng.integers(spec[1], spec[2] + 1))
  if kind == "choice":
    return spec[1][int(rng.integers(len(spec[1])))]
  raise errors.ConfigError(f"unknown random distribution {kind!r}")


def expand(sweep: Sweep, quick: bool = False, subsample: int = 0) -> list[dict[str, Any]]:
  """Every trial's parameters, in a fixed order; `subsample` > 0 keeps that many of them drawn
  at random (seeded by the sweep, so a rerun draws the same ones): a reduced sweep."""
  if subsample < 0:
    raise errors.ConfigError(f"--subsample must be 0 (every trial) or a positive count, got "
                             f"{subsample}")
  grid = sweep.quick_grid if quick and sweep.quick_grid is not None else sweep.grid
  names = sorted(grid)
  points = [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]
  samples = sweep.quick_samples if quick and sweep.quick_samples is not None else sweep.samples
  if sweep.random and samples:
    rng = np.random.default_rng(sweep.seed)
    draws = [{n: _draw(rng, spec) for n, spec in sorted(sweep.random.items())}
             for _ in range(samples)]
    points = [{**p, **d} for p in points for d in draws]
  if 0 < subsample < len(points):
    keep = np.random.default_rng(sweep.seed).choice(len(points), subsample, replace=False)
    points = [points[i] for i in sorted(keep)]
  return [{**sweep.fixed, **p} for p in points]


def results_path(sweep: Sweep, out_dir: str, quick: bool = False, subsample: int = 0) -> str:
  suffix = ("-quick" if quick else "") + (f"-subsample{subsample}" if subsample else "")
  return os.path.join(out_dir, f"{sweep.name}{suffix}.jsonl")


def trial_key(params: dict[str, Any]) -> str:
  return json.dumps(params, sort_keys=True)


def load(path: str) -> dict[str, dict]:
  """The latest record per trial key in a results file; unreadable lines are skipped."""
  return {record["key"]: record for record in atomic.read_json_lines(path) if "key" in record}


def resolve(trial: str) -> Callable[[dict, bool], dict]:
  module, _, name = trial.partition(":")
  try:
    return getattr(importlib.import_module(module), name)
  except (ImportError, AttributeError) as error:
    raise errors.ConfigError(f"trial function {trial!r} not found ({error})") from None


def run_trial(trial: str, params: dict[str, Any], quick: bool) -> dict:
  """One trial, never raising: its result, or its error on one line."""
  started = time.perf_counter()
  key = trial_key(params)
  try:
    result = resolve(trial)(dict(params), quick)
    record = {"key": key, "params": params, "status": "ok", "result": result}
  except Exception as error:  # pylint: disable=broad-except  # Recorded; the sweep goes on.
    last = traceback.extract_tb(error.__traceback__)[-1]
    record = {"key": key, "params": params, "status": "failed",
              "error": f"{type(error).__name__}: {error} ({os.path.basename(last.filename)}:"
                       f"{last.lineno})".replace("\n", " ")}
  record["seconds"] = time.perf_counter() - started
  return record


def _eta(done: int, total: int, elapsed: float) -> str:
  if not done:
    return "?"
  seconds = elapsed / done * (total - done)
  return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def run(sweep: Sweep, out_dir: str, quick: bool = False, local: bool = False,
        address: str | None = None, num_cpus: int | None = None,
        progress: Callable[[str], None] = print, subsample: int = 0) -> dict[str, dict]:
  """Runs the missing trials of `sweep`; returns the latest record of each of its trials."""
  os.makedirs(out_dir, exist_ok=True)
  path = results_path(sweep, out_dir, quick, subsample)
  trials = expand(sweep, quick, subsample)
  finished = load(path)
  todo = [p for p in trials if finished.get(trial_key(p), {}).get("status") != "ok"]
  progress(f"sweep {sweep.name}: {len(trials)} trials, {len(trials) - len(todo)} already "
           f"finished, {len(todo)} to run -> {path}")
  started = time.perf_counter()
  failed = 0

  def record(done: int, result: dict) -> None:
    nonlocal failed
    cli.exit_if_stopped()  # A local trial a signal cut short is not a finished trial.
    atomic.append_json_line(path, result)
    finished[result["key"]] = result
    failed += result["status"] != "ok"
    progress(f"  {done}/{len(todo)} ({result['status']}, {result['seconds']:.1f} s"
             f"{', ' + result['error'] if result['status'] != 'ok' else ''}); ETA "
             f"{_eta(done, len(todo), time.perf_counter() - started)}")

  if local or not todo:
    for done, params in enumerate(todo, 1):
      record(done, run_trial(sweep.trial, params, quick))
  else:
    import ray
    if not ray.is_initialized():
      cli.init_ray(address=address, num_cpus=num_cpus, include_dashboard=False,
                   log_to_driver=False, ignore_reinit_error=True)
    remote = ray.remote(num_cpus=sweep.num_cpus, num_gpus=sweep.num_gpus,
                        max_retries=0)(run_trial)
    pending = {remote.remote(sweep.trial, p, quick): p for p in todo}
    done = 0
    while pending:
      ready, _ = ray.wait(list(pending), num_returns=1)
      params = pending.pop(ready[0])
      try:
        result = ray.get(ready[0])
      except Exception as error:  # pylint: disable=broad-except  # A dead worker.
        result = {"key": trial_key(params), "params": params, "status": "failed",
                  "error": f"{type(error).__name__}: {str(error).splitlines()[0]}",
                  "seconds": 0.0}
      done += 1
      record(done, result)
  progress(f"sweep {sweep.name}: {len(todo) - failed} trials finished, {failed} failed, "
           f"{time.perf_counter() - started:.1f} s")
  keys = [trial_key(p) for p in trials]
  return {k: finished[k] for k in keys if k in finished}


def summary_markdown(sweep: Sweep, records: dict[str, dict], command: str, date: str,
                     results_file: str, top: int = 10, mode: str = "full") -> str:
  """The sweep's outcome for people: trial counts and, when trials report a `score` (lower is
  better), the best `top` settings."""
  ok = [r for r in records.values() if r["status"] == "ok"]
  failed = [r for r in records.values() if r["status"] != "ok"]
  lines = [f"# sweep {sweep.name}", "", f"{sweep.description}", "",
           f"- command: `{command}`", f"- date: {date}", f"- mode: {mode}", f"- trials: {len(ok)} finished, "
           f"{len(failed)} failed (one JSON line each in `{results_file}`)", ""]
  scored = sorted((r for r in ok if "score" in r["result"]), key=lambda r: r["result"]["score"])
  if scored:
    names = sorted(scored[0]["params"])
    lines += [f"Best {min(top, len(scored))} by score (lower is better):", "",
              "| rank | score | " + " | ".join(names) + " | seconds |",
              "|---" * (len(names) + 3) + "|"]
    for rank, record in enumerate(scored[:top], 1):
      lines.append(f"| {rank} | {record['result']['score']:.6g} | "
                   + " | ".join(str(record["params"][n]) for n in names)
                   + f" | {record['seconds']:.1f} |")
    if len(scored) > 1:
      lines += ["", f"Worst score {scored[-1]['result']['score']:.6g}; median "
                f"{float(np.median([r['result']['score'] for r in scored])):.6g}."]
  for record in failed[:5]:
    lines.append(f"- failed {record['params']}: {record.get('error', '')}")
  return "\n".join(lines) + "\n"
