"""Rollouts on Ray actors, or in the driver: the same `RolloutWorker`, the same results.

`RolloutPool(problems, evals, num_actors, preset=...)` starts `num_actors` Ray actors (a local cluster by
default; `address` joins an existing one), each holding a `RolloutWorker` with its compiled
searches; `map(tasks)` splits tasks over the actors and returns the objectives in task order.
Every task carries its own seed, so results do not depend on which actor ran it. Tasks go
out in small chunks and `on_done(positions, values)` hears of each finished chunk (progress
lines, stages saved as they go). An actor that dies or fails is replaced and its chunks run
again (each task is scored exactly once in the returned list, so no training step is lost or
double-counted). `num_actors=0` runs in-process.

A local cluster is started quietly (token authentication stays on; its notices are not the
user's business) and stopped when the process is interrupted, so none of its processes
outlive the run.
"""
from __future__ import annotations

import logging as std_logging
import math
from typing import Any, Callable, Sequence

from absl import logging

from regal_datasets import cli

from regal.learning.rollout import RolloutWorker, Task
from regal.scoring import performance
from regal.search import brkga_presets

MAX_RETRIES = 3
CHUNKS_PER_WORKER = 8  # Chunks per worker and call: progress and saves come this often.
WAKE_SECONDS = 5.0  # While waiting, `on_done([], [])` this often (progress while compiling).
OnDone = Callable[[list[int], list[Any]], None]


class RolloutPool:
  def __init__(self, problems: Sequence[performance.Problem], evals: int, num_actors: int = 2,
               address: str | None = None, num_cpus: int | None = None,
               preset: str = brkga_presets.DEFAULT):
    self.problems, self.evals, self.preset = list(problems), evals, preset
    self.num_actors = num_actors
    self.local = RolloutWorker(self.problems, evals, preset) if num_actors == 0 else None
    self.actors = []
    if num_actors:
      import ray  # Only the pool needs Ray.
      if not ray.is_initialized():
        cli.init_ray(address=address, num_cpus=num_cpus, include_dashboard=False,
                     log_to_driver=False, ignore_reinit_error=True,
                     logging_level=std_logging.ERROR)
        cli.at_interrupt(ray.shutdown)
      self._remote = ray.remote(num_cpus=0)(_Actor)
      self.actors = [self._new_actor() for _ in range(num_actors)]

  def _new_actor(self):
    return self._remote.remote(self.problems, self.evals, self.preset)

  def map(self, tasks: Sequence[Task], on_done: OnDone | None = None) -> list:
    """Each task's result (`RolloutWorker.run`), in task order."""
    return self._spread(len(tasks), "run", lambda chunk: ([tasks[i] for i in chunk],), on_done)

  def kill_actor(self, slot: int) -> None:
    """Kills one actor (for tests of the recovery path)."""
    import ray
    ray.kill(self.actors[slot], no_restart=True)

  def _spread(self, count: int, method: str, arguments, on_done: OnDone | None) -> list:
    """Calls `method(*arguments(chunk))` on the workers for chunks of positions 0..count-1,
    gathers the results in position order, and reports each finished chunk."""
    workers = max(len(self.actors), 1)
    size = max(1, math.ceil(count / (workers * CHUNKS_PER_WORKER)))
    chunks = [list(range(start, min(start + size, count))) for start in range(0, count, size)]
    results: list = [None] * count

    def finished(chunk, values):
      for i, value in zip(chunk, values):
        results[i] = value
      if on_done is not None:
        on_done(chunk, list(values))

    if self.local is not None:
      for chunk in chunks:
        finished(chunk, getattr(self.local, method)(*arguments(chunk)))
      return results
    import ray
    generation = [0] * len(self.actors)  # Bumped when a slot's actor is replaced.
    pending = {}

    def submit(k: int, attempt: int) -> None:
      slot = k % len(self.actors)
      ref = getattr(self.actors[slot], method).remote(*arguments(chunks[k]))
      pending[ref] = (k, slot, generation[slot], attempt)

    for k in range(len(chunks)):
      submit(k, 0)
    while pending:
      ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAKE_SECONDS)
      if not ready:
        if on_done is not None:
          on_done([], [])
        continue
      k, slot, born, attempt = pending.pop(ready[0])
      ref = ready[0]
      try:
        values = ray.get(ref)
      except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as error:
        if attempt >= MAX_RETRIES:
          raise
        if generation[slot] == born:  # The first of its chunks to fail replaces the actor.
          logging.warning("rollout actor %d failed (%s); replacing it and retrying its tasks",
                          slot, type(error).__name__)
          self.actors[slot] = self._new_actor()
          generation[slot] += 1
        submit(k, attempt + 1)
        continue
      finished(chunks[k], values)
    return results

  def shutdown(self) -> None:
    if self.actors:
      import ray
      for actor in self.actors:
        ray.kill(actor)
      self.actors = []


class _Actor:
  def __init__(self, problems, evals, preset):
    self.worker = RolloutWorker(problems, evals, preset)

  def run(self, tasks):
    return self.worker.run(tasks)
