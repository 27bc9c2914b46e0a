r"""Doppler episodes per second: our batched JAX episodes against the Doppler simulator.

  python -m regal_experiments.bench.doppler_episodes [--graph ../shared/graphs/doppler/transformer_block_215nodes.txt]

One run measures, on one graph with 4 devices:
* our episodes: `jit(vmap(run_episode))` over a batch of sampled episodes (SEL + PLC networks,
  delay-model bookkeeping), alone and with the batched performance model scoring every
  episode's assignment (what a REINFORCE step needs), and a whole stage-II step (sampling,
  scoring, replay gradient, Adam);
* the reference: the Doppler repository's simulator semantics on SimPy
  (`regal.scoring.doppler.reference`), one assignment per call, which is what every episode of the
  original code waits for.
It reports episodes per second for each and the ratios ours / reference. It also times the
whole policy training `--method doppler` runs (stages I and II,
`regal.doppler_policy.method.train`, `--train_episodes` episodes) on a synthetic graph of
`--train_ops` ops (`sized_graph`, seed 0; 0 skips it) with `--devices` devices, `--train_repeats`
times, against the target of 5,000 episodes on a 300-op graph in at most 20 s. The report
(Markdown and JSON) goes to `--out`.

  python -m regal_experiments.bench.doppler_episodes           # ~3 minutes on 2 cores
  python -m regal_experiments.bench.doppler_episodes --quick   # a smoke run
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import benchmarks, cli, errors  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command, report  # noqa: E402
from regal.doppler_policy import episode as episode_lib  # noqa: E402
from regal.doppler_policy import method  # noqa: E402
from regal.doppler_policy import training  # noqa: E402
from regal.scoring import performance  # noqa: E402
from regal.scoring.doppler import reference as doppler_sim  # noqa: E402

DEFAULT_GRAPH = os.path.join(benchmarks.DOPPLER_GRAPHS, "transformer_block_215nodes.txt")
_GRAPH = flags.DEFINE_string("graph", DEFAULT_GRAPH, "Graph file.")
_DEVICES = flags.DEFINE_integer("devices", 4, "Homogeneous devices.", lower_bound=1, upper_bound=64)
_BATCH = flags.DEFINE_integer("batch", 64, "Episodes per batch.", lower_bound=1, upper_bound=65_536)
_REPEATS = flags.DEFINE_integer("repeats", 10, "Timed batches.", lower_bound=1, upper_bound=1000)
_REFERENCE_CALLS = flags.DEFINE_integer("reference_calls", 40, "Timed SimPy simulator calls.",
                                        lower_bound=1, upper_bound=100_000)
_TRAIN_OPS = flags.DEFINE_integer("train_ops", 300, "Time the whole training on a synthetic "
                                  "graph of this many ops (0: skip).",
                                  lower_bound=0, upper_bound=100_000)
_TRAIN_EPISODES = flags.DEFINE_integer("train_episodes", 5000, "Episodes of that training.",
                                       lower_bound=1, upper_bound=10_000_000)
_TRAIN_REPEATS = flags.DEFINE_integer("train_repeats", 3, "Timed trainings (medians kept).",
                                      lower_bound=1, upper_bound=1000)
_TRAINING_ONLY = flags.DEFINE_bool("training_only", False, "Only time one training and print its "
                                   "figures as a JSON line (each timed training runs so, in a "
                                   "process of its own).")
_QUICK = flags.DEFINE_bool("quick", False, "Small batches and a short training (a smoke run).")
_OUT_DIR = flags.DEFINE_string("out", os.path.join(report.RESULTS_DIR, "doppler_episodes"),
                               "Where the report goes.")
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET_EPISODES, TARGET_OPS, TARGET_SECONDS = 5000, 300, 20.0  # The training-speed target.


def _rate(fn, count: int, repeats: int) -> float:
  jax.block_until_ready(fn(0))  # Compile and warm up.
  start = time.perf_counter()
  for k in range(1, repeats + 1):
    jax.block_until_ready(fn(k))
  return count * repeats / (time.perf_counter() - start)


def time_training(num_ops: int, devices, episodes: int) -> dict:
  """Seconds of `method.train` (imitation, REINFORCE over `episodes`, the greedy episode)."""
  problem = performance.Problem(sized_graph(num_ops), devices, model="doppler")
  started = time.perf_counter()
  _, _, details, _, _ = method.train(problem, episodes, seed=0)
  seconds = time.perf_counter() - started
  reinforce_seconds = details["episodes"] / details["episodes_per_second"]
  print(f"training on {problem.graph.num_ops} ops, {devices.num_devices} devices: "
        f"{details['episodes']} episodes in {reinforce_seconds:.1f} s "
        f"({details['episodes_per_second']:.0f} /s), imitation {details['imitation']['steps']} "
        f"steps, {seconds:.1f} s in all (compilation included)", flush=True)
  return {"ops": problem.graph.num_ops, "episodes": details["episodes"],
          "reinforce_seconds": reinforce_seconds, "total_seconds": seconds,
          "imitation_steps": details["imitation"]["steps"]}


def time_training_fresh(num_ops: int, num_devices: int, episodes: int) -> dict:
  """`time_training` in a new process, so that every run pays its own compilation."""
  completed = subprocess.run(
      [sys.executable, "-m", "regal_experiments.bench.doppler_episodes", "--training_only",
       f"--train_ops={num_ops}", f"--devices={num_devices}", f"--train_episodes={episodes}"],
      capture_output=True, text=True, check=False, cwd=_REPO_ROOT)
  if completed.returncode != 0:
    raise errors.RegalError(f"the timed training failed: {completed.stderr.strip()[-500:]}")
  *_, summary, figures = completed.stdout.strip().splitlines()
  print(summary, flush=True)
  return json.loads(figures)


def _training_lines(runs: list[dict], num_ops: int, episodes: int, devices: int) -> list[str]:
  reinforce = float(np.median([r["reinforce_seconds"] for r in runs]))
  total = float(np.median([r["total_seconds"] for r in runs]))
  counted = f"{len(runs)} runs, medians" if len(runs) > 1 else "1 run"
  lines = ["", f"## The whole policy training ({counted})", "",
           f"`regal.doppler_policy.method.train` on a synthetic graph of {runs[0]['ops']} ops "
           f"(`sized_graph({num_ops})`), {devices} identical devices, {episodes:,} episodes "
           f"asked ({runs[0]['episodes']:,} run: whole batches). Each run is a process of "
           "its own: REINFORCE's seconds include compiling its sampler and update; the total "
           "adds the graph's preparation, imitation (stage I) and its compilation, and the "
           "final greedy episode (not the interpreter's and JAX's start).", "",
           "| run | REINFORCE episodes | REINFORCE s | imitation steps | all s |",
           "|---|---|---|---|---|"]
  lines += [f"| {k + 1} | {r['episodes']:,} | {r['reinforce_seconds']:.1f} | "
            f"{r['imitation_steps']} | {r['total_seconds']:.1f} |" for k, r in enumerate(runs)]
  lines += ["", f"Median: **{reinforce:.1f} s** of REINFORCE for {runs[0]['episodes']:,} "
            f"episodes, {total:.1f} s in all."]
  if num_ops == TARGET_OPS and episodes == TARGET_EPISODES:
    met = "met" if reinforce <= TARGET_SECONDS else "**not met**"
    lines += [f"Target ({TARGET_EPISODES:,} episodes on a {TARGET_OPS}-op graph in at most "
              f"{TARGET_SECONDS:.0f} s): {met} by the episodes ({reinforce:.1f} s, their "
              f"compilation included); with imitation the whole training takes {total:.1f} s."]
  return lines


def main(argv: Sequence[str]) -> None:
  command.check(argv, quick_overrides=("batch", "repeats", "reference_calls", "train_ops",
                                       "train_episodes", "train_repeats"))
  quick = _QUICK.value
  batch = 16 if quick else _BATCH.value
  repeats = 2 if quick else _REPEATS.value
  reference_calls = 5 if quick else _REFERENCE_CALLS.value
  train_ops, train_episodes = (40, 128) if quick else (_TRAIN_OPS.value, _TRAIN_EPISODES.value)
  train_repeats = 1 if quick else _TRAIN_REPEATS.value
  if (batch < 1 or repeats < 1 or reference_calls < 1 or train_ops < 0
      or train_episodes < training.DopplerConfig().episodes_per_step or train_repeats < 1):
    raise errors.ConfigError("--batch, --repeats, --reference_calls and --train_repeats must be "
                             "positive, --train_ops at least 0 and --train_episodes at least one "
                             "batch of episodes")
  if _TRAINING_ONLY.value:
    if not train_ops:
      raise errors.ConfigError("--training_only needs --train_ops above 0")
    figures = time_training(train_ops, devices_lib.homogeneous(_DEVICES.value), train_episodes)
    print(json.dumps(figures), flush=True)
    return
  # The trainings first, while this process has not started JAX's runtime: an idle one
  # beside them slowed them by about 15%.
  runs = [time_training_fresh(train_ops, _DEVICES.value, train_episodes)
          for _ in range(train_repeats)] if train_ops else []
  graph = graph_io.load_graph(_GRAPH.value)
  devices = devices_lib.homogeneous(_DEVICES.value)
  problem = performance.Problem(graph, devices, model="doppler")
  config = training.DopplerConfig(episodes_per_step=batch)
  agent = training.Agent.create(problem, config)
  params = training.init_params(jax.random.key(0), agent)
  sample = jax.jit(training.episode_runner(agent, episode_lib.SAMPLE))
  dummy = jnp.zeros((batch, 1))

  def episodes(k):
    return sample(params, jax.random.split(jax.random.key(k), batch), 0.2, dummy, dummy)

  reward = training.ModelReward(problem)

  def scored(k):
    placements, orders = training.assignments(agent, episodes(k))
    return reward(placements, orders)

  step_config = training.DopplerConfig(episodes_per_step=batch, reinforce_steps=1)

  def stage_two_step(k):  # Compiled once per agent: later calls reuse it.
    return training.reinforce(params, agent, step_config, reward, jax.random.key(k))[0]

  ours = _rate(episodes, batch, repeats)
  with_model = _rate(scored, batch, repeats)
  with_update = _rate(stage_two_step, batch, max(repeats // 2, 1))

  placements, _ = training.assignments(agent, episodes(99))
  start = time.perf_counter()
  for k in range(reference_calls):
    doppler_sim.simulate_doppler(graph, devices, placements[k % batch])
  reference = reference_calls / (time.perf_counter() - start)

  figures = {"graph": graph.name, "ops": graph.num_ops, "devices": _DEVICES.value,
             "batch": batch, "episodes_per_second": ours,
             "episodes_per_second_with_model": with_model,
             "episodes_per_second_stage_two_step": with_update,
             "simpy_simulator_calls_per_second": reference,
             "ratio_episodes_vs_simulator": ours / reference,
             "ratio_stage_two_vs_simulator": with_update / reference,
             "backend": jax.default_backend()}
  print(f"{graph.name}: {graph.num_ops} ops, {_DEVICES.value} devices, batches of {batch}: "
        f"{ours:.1f} episodes/s, {with_model:.1f} scored, {with_update:.1f} with the update; "
        f"SimPy {reference:.1f}/s", flush=True)
  body = [f"## Episodes per second on {graph.name} ({graph.num_ops} ops, {_DEVICES.value} "
          f"devices, batches of {batch}, {repeats} timed batches after a warm-up)", "",
          "| what | per second | / the SimPy simulator |", "|---|---|---|",
          f"| episodes (SEL + PLC, delay-model bookkeeping) | {ours:.1f} | "
          f"{ours / reference:.1f}x |",
          f"| + the batched performance model scoring each | {with_model:.1f} | "
          f"{with_model / reference:.1f}x |",
          f"| whole stage-II step (+ replay gradient and Adam) | {with_update:.1f} | "
          f"{with_update / reference:.1f}x |",
          f"| Doppler's simulator on SimPy, one assignment per call | {reference:.1f} | 1x |"]
  if train_ops:
    figures["training"] = runs
    body += _training_lines(runs, train_ops, train_episodes, _DEVICES.value)
  lines, facts = report.header("Doppler policy episodes and training time",
                               "regal_experiments.bench.doppler_episodes",
                               "quick" if quick else "full")
  report.publish(_OUT_DIR.value, "doppler_episodes", lines, body, {**facts, **figures})


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
