"""Measured run times as a reward source (Doppler's stage III, REGAL fine-tuning) and as the
answer to "how fast is it really" (`regal.optimize --execute`).

`MeasuredReward` has the `RewardSource` interface of `regal.doppler_policy.training`: placements
[B, o] and op orders [B, o] in, makespans [B] out, here the median wall time of `repeats`
executions. Measurements are cached by a hash of (placement, order): an assignment seen again
costs nothing, which matters because a converging policy repeats itself.
"""
from __future__ import annotations

import hashlib

import numpy as np

from regal_datasets.graph import Graph
from regal.execute.executor import Executor
from regal.execute.program import Program


def assignment_key(placement: np.ndarray, order: np.ndarray) -> str:
  data = np.asarray(placement, np.int64).tobytes() + b"|" + np.asarray(order, np.int64).tobytes()
  return hashlib.sha1(data).hexdigest()


class MeasuredReward:
  """Makespans measured on devices; compiles every kernel on every device once up front."""

  def __init__(self, graph: Graph, program: Program, devices=None, mode: str = "async",
               repeats: int = 3):
    self.executor = Executor(graph, program, devices, mode)
    self.repeats = repeats
    self.cache: dict[str, float] = {}
    self.executions = 0
    self.evaluations = 0  # Assignments asked for, cached or not.
    for device in range(len(self.executor.devices)):
      self.executor.tensor_values(np.full(graph.num_ops, device))

  def measure(self, placement: np.ndarray, order: np.ndarray) -> float:
    key = assignment_key(placement, order)
    if key not in self.cache:
      # Every kernel was compiled on every device above: no warm-up run needed.
      self.cache[key] = self.executor.run(placement, order, repeats=self.repeats,
                                          warmup=0).median
      self.executions += 1
    return self.cache[key]

  def __call__(self, placements: np.ndarray, orders: np.ndarray) -> np.ndarray:
    self.evaluations += len(placements)
    return np.array([self.measure(p, o) for p, o in zip(placements, orders)], np.float64)
