"""Doppler as a placement method and as a seeding arm for BRKGA; policy checkpoints.

`doppler(problem, evals, seed, checkpoint)`: without a checkpoint, stage I (imitating critical
path; no performance-model evaluations) then stage II with `evals` episodes scored by the
problem's batched model; with one, its policy is the start (zero-shot when `evals` is below
one batch of episodes, few-shot fine-tuning otherwise: Doppler section 6.2). The answer is the
best assignment seen (the greedy one, every sampled one, and the critical-path teacher's):
the few best by the batched model are re-scored by the reference model, which picks the
answer.

Stage III (`measured`: a reward source of measured run times, `regal.execute.measured`):
`stage3_steps` more REINFORCE steps rewarded by execution on the devices; the answer is then
the assignment with the best measured time (the critical path's included).

Checkpoints (`regal.learning.checkpoint`): one file holding the parameters and the network
config, written atomically; loading refuses a checkpoint whose network config differs from the
one asked for.
"""
from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from regal_datasets import errors
from regal.baselines.common import MethodResult, finish, score
from regal.doppler_policy import training
from regal.doppler_policy.options import MAX_SAMPLES, DopplerOptions  # noqa: F401  (re-exported)
from regal.learning import checkpoint
from regal.scoring import performance
from regal.scoring.schedule import Schedule

POLICY_KIND = "doppler"  # The checkpoint metadata's "policy".


def save_checkpoint(path: str, params, config: training.DopplerConfig, num_devices: int
                    ) -> None:
  checkpoint.save(path, params, {"policy": POLICY_KIND, "hidden": config.hidden,
                                 "rounds": config.rounds, "trained_on_devices": num_devices})


def load_checkpoint(path: str, template, config: training.DopplerConfig):
  """Parameters shaped like `template`; a one-line error if missing, unreadable or of another
  network config."""
  meta = checkpoint.read_meta(path)
  if meta.get("policy") != POLICY_KIND:
    raise errors.ConfigError(f"doppler checkpoint {path}: not a Doppler policy")
  if (meta.get("hidden"), meta.get("rounds")) != (config.hidden, config.rounds):
    raise errors.ConfigError(
        f"doppler checkpoint {path} has hidden={meta.get('hidden')}, rounds="
        f"{meta.get('rounds')}; this run asks for hidden={config.hidden}, rounds={config.rounds}")
  params, _ = checkpoint.restore(path, template)
  return params


def planned_evaluations(evals: int, config: training.DopplerConfig | None = None) -> int:
  """What `train` spends: the critical-path teacher scored once, whole batches of episodes
  (`evals` rounded down) and the greedy assignment."""
  batch = (config or training.DopplerConfig()).episodes_per_step
  return 1 + evals // batch * batch + 1


def train(problem: performance.Problem, evals: int, seed: int = 0,
          config: training.DopplerConfig | None = None, checkpoint: str | None = None):
  """(params, best assignment, details, reward source, agent): stages I-II, or a checkpoint's
  policy fine-tuned with `evals` episodes (rounded down to whole batches)."""
  config = config or training.DopplerConfig()
  agent = training.Agent.create(problem, config)
  key = jax.random.key(seed)
  params = training.init_params(key, agent)
  details = {}
  if checkpoint:
    params = load_checkpoint(checkpoint, params, config)
    details["checkpoint"] = checkpoint
  else:
    params, details["imitation"] = training.imitate(params, [agent], config)
  steps = evals // config.episodes_per_step
  reward = training.ModelReward(problem)
  params, best, summary = training.reinforce(
      params, agent, dataclasses.replace(config, reinforce_steps=steps), reward,
      jax.random.fold_in(key, 1))
  placements, orders = training.greedy_and_sampled(params, agent, jax.random.fold_in(key, 2), 0)
  greedy_makespan = reward(placements, orders)
  best.offer(greedy_makespan, placements, orders)
  details.update({"episodes": summary["episodes"],
                  "episodes_per_second": summary["episodes_per_second"],
                  "critical_path_makespan": summary["reference_makespan"],
                  "greedy_makespan": float(greedy_makespan[0]),
                  "search_model": reward.problem.model})
  return params, best, details, reward, agent


def best_by_reference(problem: performance.Problem, best: training.Best
                      ) -> tuple[np.ndarray, np.ndarray, tuple[float, Schedule]]:
  """The kept assignment the reference model scores best: (placement, order, (objective,
  schedule))."""
  scored = [score(problem, placement, order) for _, placement, order in best.ranked()]
  k = min(range(len(scored)), key=lambda i: (scored[i][0], i))
  _, placement, order = best.ranked()[k]
  return placement, order, scored[k]


def doppler(problem: performance.Problem, evals: int, seed: int = 0,
            checkpoint: str | None = None, save: str | None = None,
            config: training.DopplerConfig | None = None,
            measured: training.RewardSource | None = None, stage3_steps: int = 0
            ) -> MethodResult:
  started = time.perf_counter()
  config = config or training.DopplerConfig()
  params, best, details, reward, agent = train(problem, evals, seed, config, checkpoint)
  if measured is not None and stage3_steps > 0:
    params, best, summary = training.reinforce(
        params, agent, dataclasses.replace(config, reinforce_steps=stage3_steps), measured,
        jax.random.fold_in(jax.random.key(seed), 4), log_every=1)
    _, placement, order = best.ranked()[0]
    details["stage3"] = {"episodes": summary["episodes"],
                         "critical_path_seconds": summary["reference_makespan"],
                         "best_seconds": best.makespan,
                         "executions": getattr(measured, "executions", None)}
    scored = None
  else:
    placement, order, scored = best_by_reference(problem, best)
  if save:
    save_checkpoint(save, params, config, problem.devices.num_devices)
    details["saved"] = save
  return finish("doppler", problem, placement, order, started, scored=scored,
                evaluations=reward.evaluations, rescored=len(best.entries), **details)


def seed_assignments(problem: performance.Problem, checkpoint: str | None, evals: int,
                     num_samples: int, seed: int = 0,
                     config: training.DopplerConfig | None = None
                     ) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
  """The Doppler arm: its greedy assignment and `num_samples` sampled ones (after training on
  `evals` episodes, or from a checkpoint), plus the best assignment its training saw.
  Returns ([(placement, order)], evaluations spent)."""
  config = config or training.DopplerConfig()
  params, best, _, reward, agent = train(problem, evals, seed, config, checkpoint)
  placements, orders = training.greedy_and_sampled(params, agent,
                                                   jax.random.fold_in(jax.random.key(seed), 3),
                                                   num_samples)
  placement, order, _ = best_by_reference(problem, best)
  arms = [(placement, order)] + list(zip(placements, orders))
  return arms, reward.evaluations
