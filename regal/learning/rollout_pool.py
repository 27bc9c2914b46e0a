"""Rollouts on Ray actors, or in the driver: the same `RolloutWorker`, the same results.

`RolloutPool(problems, evals, num_actors)` starts `num_actors` Ray actors (a local cluster by
default; `address` joins an existing one), each holding a `RolloutWorker` with its compiled
searches; `map(tasks)` splits tasks over the actors and returns the objectives in task order.
Every task carries its own seed, so results do not depend on which actor ran it. An actor that
dies or fails is replaced and its share of the tasks run again (each task is scored exactly
once in the returned list, so no training step is lost or double-counted). `num_actors=0` runs
in-process.
"""
from __future__ import annotations

from typing import Sequence

from absl import logging

from regal.learning.rollout import RolloutWorker, Task
from regal.scoring import performance

MAX_RETRIES = 3


class RolloutPool:
  def __init__(self, problems: Sequence[performance.Problem], evals: int, num_actors: int = 2,
               address: str | None = None, num_cpus: int | None = None):
    self.problems, self.evals = list(problems), evals
    self.num_actors = num_actors
    self.local = RolloutWorker(self.problems, evals) if num_actors == 0 else None
    self.actors = []
    if num_actors:
      import ray  # Only the pool needs Ray.
      if not ray.is_initialized():
        ray.init(address=address, num_cpus=num_cpus, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)
      self._remote = ray.remote(num_cpus=0)(_Actor)
      self.actors = [self._new_actor() for _ in range(num_actors)]

  def _new_actor(self):
    return self._remote.remote(self.problems, self.evals)

  def map(self, tasks: Sequence[Task]) -> list[float]:
    if self.local is not None:
      return self.local.run(tasks)
    import ray
    shares = [list(range(i, len(tasks), len(self.actors))) for i in range(len(self.actors))]
    results: list[float | None] = [None] * len(tasks)
    pending = {}
    for slot, share in enumerate(shares):
      if share:
        pending[slot] = (self.actors[slot].run.remote([tasks[i] for i in share]), share, 0)
    while pending:
      slot, (ref, share, attempt) = next(iter(pending.items()))
      del pending[slot]
      try:
        for i, value in zip(share, ray.get(ref)):
          results[i] = value
      except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as error:
        if attempt >= MAX_RETRIES:
          raise
        logging.warning("rollout actor %d failed (%s); replacing it and retrying %d tasks",
                        slot, type(error).__name__, len(share))
        self.actors[slot] = self._new_actor()
        pending[slot] = (self.actors[slot].run.remote([tasks[i] for i in share]), share,
                         attempt + 1)
    return results

  def kill_actor(self, slot: int) -> None:
    """Kills one actor (for tests of the recovery path)."""
    import ray
    ray.kill(self.actors[slot], no_restart=True)

  def feature_populations(self, indices: Sequence[int], evals: int, seeds: Sequence[int]):
    """`RolloutWorker.feature_population` of many graphs, spread over the actors."""
    if self.local is not None:
      return [self.local.feature_population(i, evals, s) for i, s in zip(indices, seeds)]
    import ray
    refs = [self.actors[k % len(self.actors)].feature_population.remote(i, evals, s)
            for k, (i, s) in enumerate(zip(indices, seeds))]
    return ray.get(refs)

  def shutdown(self) -> None:
    if self.actors:
      import ray
      for actor in self.actors:
        ray.kill(actor)
      self.actors = []


class _Actor:
  def __init__(self, problems, evals):
    self.worker = RolloutWorker(problems, evals)

  def run(self, tasks):
    return self.worker.run(tasks)

  def feature_population(self, index, evals, seed):
    return self.worker.feature_population(index, evals, seed)
