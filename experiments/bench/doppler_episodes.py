r"""Doppler episodes per second: our batched JAX episodes against the Doppler simulator.

  python -m experiments.bench.doppler_episodes [--graph ../shared/graphs/doppler/transformer_block_215nodes.txt]

One run measures, on one graph with 4 devices:
* our episodes: `jit(vmap(run_episode))` over a batch of sampled episodes (SEL + PLC networks,
  delay-model bookkeeping), alone and with the batched performance model scoring every
  episode's assignment (what a REINFORCE step needs), and a whole stage-II step (sampling,
  scoring, replay gradient, Adam);
* the reference: the Doppler repository's simulator semantics on SimPy
  (`regal.scoring.doppler_sim`), one assignment per call, which is what every episode of the
  original code waits for.
It prints episodes per second for each and the ratios ours / reference. With
`--train_ops N` it also times the whole policy training `--method doppler` runs (stages I and
II, `regal.doppler_policy.method.train`, `--train_episodes` episodes, compilation included) on a
synthetic graph of N ops (`sized_graph`, seed 0) with `--devices` devices.
"""
from __future__ import annotations

from regal.scoring import parallel

parallel.use_all_cpu_cores()  # Before JAX starts.

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from absl import app, flags  # noqa: E402

from datasets import atomic, benchmarks  # noqa: E402
from datasets import devices as devices_lib  # noqa: E402
from datasets import io as graph_io  # noqa: E402
from datasets.synthetic import sized_graph  # noqa: E402
from regal.doppler_policy import episode as episode_lib  # noqa: E402
from regal.doppler_policy import method  # noqa: E402
from regal.doppler_policy import training  # noqa: E402
from regal.scoring import doppler_sim, performance  # noqa: E402

DEFAULT_GRAPH = os.path.join(benchmarks.DOPPLER_GRAPHS, "transformer_block_215nodes.txt")
_GRAPH = flags.DEFINE_string("graph", DEFAULT_GRAPH, "Graph file.")
_DEVICES = flags.DEFINE_integer("devices", 4, "Homogeneous devices.")
_BATCH = flags.DEFINE_integer("batch", 64, "Episodes per batch.")
_REPEATS = flags.DEFINE_integer("repeats", 10, "Timed batches.")
_REFERENCE_CALLS = flags.DEFINE_integer("reference_calls", 40, "Timed SimPy simulator calls.")
_TRAIN_OPS = flags.DEFINE_integer("train_ops", 0, "Also time the whole training on a synthetic "
                                  "graph of this many ops (0: skip).")
_TRAIN_EPISODES = flags.DEFINE_integer("train_episodes", 5000, "Episodes of that training.")
_JSON = flags.DEFINE_string("json", None, "Also write the figures here as JSON.")


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
        f"steps, {seconds:.1f} s in all (compilation included)")
  return {"ops": problem.graph.num_ops, "episodes": details["episodes"],
          "reinforce_seconds": reinforce_seconds, "total_seconds": seconds,
          "imitation_steps": details["imitation"]["steps"]}


def main(argv: Sequence[str]) -> None:
  del argv
  graph = graph_io.load_graph(_GRAPH.value)
  devices = devices_lib.homogeneous(_DEVICES.value)
  problem = performance.Problem(graph, devices, model="doppler")
  config = training.DopplerConfig(episodes_per_step=_BATCH.value)
  agent = training.Agent.create(problem, config)
  params = training.init_params(jax.random.key(0), agent)
  batch = _BATCH.value
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

  ours = _rate(episodes, batch, _REPEATS.value)
  with_model = _rate(scored, batch, _REPEATS.value)
  with_update = _rate(stage_two_step, batch, max(_REPEATS.value // 2, 1))

  placements, _ = training.assignments(agent, episodes(99))
  start = time.perf_counter()
  for k in range(_REFERENCE_CALLS.value):
    doppler_sim.simulate_doppler(graph, devices, placements[k % batch])
  reference = _REFERENCE_CALLS.value / (time.perf_counter() - start)

  figures = {"graph": graph.name, "ops": graph.num_ops, "devices": _DEVICES.value,
             "batch": batch, "episodes_per_second": ours,
             "episodes_per_second_with_model": with_model,
             "episodes_per_second_stage_two_step": with_update,
             "simpy_simulator_calls_per_second": reference,
             "ratio_episodes_vs_simulator": ours / reference,
             "ratio_stage_two_vs_simulator": with_update / reference,
             "backend": jax.default_backend()}
  print(f"{graph.name}: {graph.num_ops} ops, {_DEVICES.value} devices, batches of {batch}")
  print(f"  episodes (SEL + PLC, delay model):    {ours:10.1f} /s")
  print(f"  + batched performance model:          {with_model:10.1f} /s")
  print(f"  whole stage-II step (+ gradient):     {with_update:10.1f} /s")
  print(f"  Doppler simulator on SimPy, 1 / call: {reference:10.1f} /s")
  print(f"  ratio ours / simulator: {ours / reference:.1f}x episodes, "
        f"{with_update / reference:.1f}x training episodes")
  if _TRAIN_OPS.value:
    figures["training"] = time_training(_TRAIN_OPS.value, devices, _TRAIN_EPISODES.value)
  if _JSON.value:
    atomic.write_text(_JSON.value, json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
  app.run(main)
