"""Fitting the performance model to the machine, and checking how well it then predicts.

* Device speed: every kernel of a program timed alone on each device (inputs already there,
  median of a few runs); least squares of seconds = cost / speed through the origin, per
  device, so speed is in cost units per second.
* Links: `jax.device_put` of buffers from 4 KB to 16 MB between every ordered pair of devices;
  least squares of seconds = latency + bytes / bandwidth per pair.
* Prediction report: random placements (each spreads the ops uniformly over a random subset of
  the devices, so the sample spans one device to all of them) and random schedules run on the
  devices and through the reference WC model with the calibrated description; Pearson and
  Spearman correlation of predicted and measured makespans. Beside it, the same statistics for
  a "shared" predictor (every op and transfer one after the other: the sum of their calibrated
  times), which is what host devices sharing a CPU's cores behave like; on a machine with
  independent devices (GPUs) the WC model should win.
"""
from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from regal_datasets import errors
from regal_datasets import analysis
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.execute.executor import Executor
from regal.execute.program import Program
from regal.scoring import chromosome as chromosome_lib
from regal.scoring.wc import reference as wc_reference

TRANSFER_BYTES = tuple(4096 * 4 ** k for k in range(7))  # 4 KB .. 16 MB.


@dataclasses.dataclass(frozen=True)
class Fit:
  spec: DeviceSpec
  op_samples: list[dict]  # {op, device, cost, seconds}
  link_samples: list[dict]  # {src, dst, bytes, seconds}
  op_r2: list[float]  # Per device: the fit's coefficient of determination.


def _median_seconds(fn, repeats: int) -> float:
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return float(np.median(times))


def time_ops(graph: Graph, program: Program, devices, repeats: int = 5) -> list[dict]:
  """Each kernel with a positive cost, alone on each device, its inputs computed there."""
  executor = Executor(graph, program, devices, "async")
  samples = []
  for device_index, device in enumerate(devices):
    value = executor.tensor_values(np.full(graph.num_ops, device_index))  # Compiles too.
    for op, kernel in enumerate(program.kernels):
      if kernel.is_source or graph.compute_cost[op] <= 0:
        continue
      args = [value[t] for t in kernel.inputs]
      with jax.default_device(device):
        seconds = _median_seconds(lambda: kernel.fn(*args), repeats)
      samples.append({"op": op, "device": device_index,
                      "cost": float(graph.compute_cost[op]), "seconds": seconds})
  return samples


def time_links(devices, repeats: int = 5, sizes=TRANSFER_BYTES) -> list[dict]:
  samples = []
  for src_index, src in enumerate(devices):
    for dst_index, dst in enumerate(devices):
      if src_index == dst_index:
        continue
      for num_bytes in sizes:
        array = jax.device_put(np.ones(num_bytes // 4, np.float32), src)
        jax.block_until_ready(jax.device_put(array, dst))  # First use of the pair.
        seconds = _median_seconds(lambda: jax.device_put(array, dst), repeats)
        samples.append({"src": src_index, "dst": dst_index, "bytes": float(num_bytes),
                        "seconds": seconds})
  return samples


def fit_speed(costs: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
  """(speed, r2) of seconds = cost / speed, least squares through the origin."""
  costs, seconds = np.asarray(costs, float), np.asarray(seconds, float)
  inverse = float(costs @ seconds / (costs @ costs))
  residual = seconds - costs * inverse
  total = ((seconds - seconds.mean()) ** 2).sum()
  return 1.0 / inverse, float(1.0 - (residual ** 2).sum() / total) if total > 0 else 1.0


def fit_link(num_bytes: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
  """(latency, bandwidth) of seconds = latency + bytes / bandwidth, least squares; a
  negative intercept is clamped to 0 and a non-positive slope means no measurable limit."""
  design = np.stack([np.ones(len(num_bytes)), np.asarray(num_bytes, float)], axis=1)
  (latency, slope), *_ = np.linalg.lstsq(design, np.asarray(seconds, float), rcond=None)
  return max(float(latency), 0.0), 1.0 / float(slope) if slope > 0 else 1e15


def calibrate(graph: Graph, program: Program, devices, repeats: int = 5,
              name: str = "calibrated") -> Fit:
  op_samples = time_ops(graph, program, devices, repeats)
  if not op_samples:
    raise errors.ConfigError(f"graph {graph.name!r} has no op with a positive cost to time")
  link_samples = time_links(devices, repeats) if len(devices) > 1 else []
  count = len(devices)
  speed, r2 = np.ones(count), []
  for d in range(count):
    mine = [s for s in op_samples if s["device"] == d]
    speed[d], fit_r2 = fit_speed([s["cost"] for s in mine], [s["seconds"] for s in mine])
    r2.append(fit_r2)
  latency, bandwidth = np.zeros((count, count)), np.ones((count, count))
  for src in range(count):
    for dst in range(count):
      pair = [s for s in link_samples if s["src"] == src and s["dst"] == dst]
      if pair:
        latency[src, dst], bandwidth[src, dst] = fit_link([s["bytes"] for s in pair],
                                                          [s["seconds"] for s in pair])
  spec = DeviceSpec(memory_capacity=None, speed=speed, bandwidth=bandwidth, latency=latency,
                    name=f"{name}-{devices[0].platform}{count}")
  return Fit(spec, op_samples, link_samples, r2)


def ranks(values: np.ndarray) -> np.ndarray:
  """Ranks from 0, ties sharing their mean rank."""
  values = np.asarray(values, float)
  order = np.argsort(values, kind="stable")
  result = np.empty(len(values))
  sorted_values = values[order]
  start = 0
  while start < len(values):
    end = start
    while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
      end += 1
    result[order[start:end + 1]] = (start + end) / 2.0
    start = end + 1
  return result


def pearson(x, y) -> float:
  return float(np.corrcoef(np.asarray(x, float), np.asarray(y, float))[0, 1])


def spearman(x, y) -> float:
  return pearson(ranks(x), ranks(y))


def random_placements(num_ops: int, num_devices: int, count: int, seed: int
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
  """(placement, order) pairs: ops spread over a random subset of the devices (its size
  uniform in 1..D), schedules uniformly random."""
  rng = np.random.default_rng(seed)
  pairs = []
  for _ in range(count):
    used = rng.choice(num_devices, size=rng.integers(1, num_devices + 1), replace=False)
    pairs.append((used[rng.integers(0, len(used), num_ops)], rng.permutation(num_ops)))
  return pairs


def predict(graph: Graph, spec: DeviceSpec, placement: np.ndarray, order: np.ndarray) -> float:
  """The reference WC model's makespan for a placement and an op order (transfers by
  tensor id, as the executor issues them as soon as produced)."""
  priority = chromosome_lib.order_priorities(order)
  transfer_priority = np.full((graph.num_tensors, spec.num_devices), 0.5)
  return float(wc_reference.simulate_wc(graph, spec, placement, priority,
                                        transfer_priority).makespan)


def predict_shared(graph: Graph, spec: DeviceSpec, placement: np.ndarray) -> float:
  """Every op and every transfer in turn: the sum of their calibrated times."""
  compute = float(np.sum(spec.compute_time(graph.compute_cost, placement)))
  producer_device = placement[graph.tensor_producer]
  moves = {(int(t), int(placement[c])) for t, c in zip(graph.data_edge_tensor,
                                                      graph.data_edge_consumer)
           if placement[c] != producer_device[t]}
  transfer = sum(float(analysis.transfer_time(spec, graph.tensor_size[t], producer_device[t], d))
                 for t, d in moves)
  return compute + transfer


def executed_graph(graph: Graph, program: Program) -> Graph:
  """The graph as it runs: stand-in kernels move buffers scaled to fit the machine
  (`Program.facts["tensor_bytes"]`), and the calibrated links price bytes that moved, so
  predictions must read those sizes, not the graph's (a Doppler file's are ~1e12)."""
  executed = program.facts.get("tensor_bytes")
  if executed is None:
    return graph
  return graph.replace(tensor_size=np.asarray(executed, np.float64))


def prediction_report(graph: Graph, program: Program, spec: DeviceSpec, devices,
                      placements: int = 50, seed: int = 0, repeats: int = 3,
                      mode: str = "async", progress=None) -> dict:
  executor = Executor(graph, program, devices, mode)
  graph = executed_graph(graph, program)
  rows = []
  for k, (placement, order) in enumerate(random_placements(graph.num_ops, len(devices),
                                                           placements, seed)):
    measured = executor.run(placement, order, repeats=repeats, warmup=1)
    rows.append({"devices_used": int(len(np.unique(placement))),
                 "predicted_seconds": predict(graph, spec, placement, order),
                 "shared_predicted_seconds": predict_shared(graph, spec, placement),
                 "measured_seconds": measured.median,
                 "measured_p25": measured.spread[0], "measured_p75": measured.spread[1]})
    if progress:
      progress(k + 1, rows[-1])
  predicted = np.array([r["predicted_seconds"] for r in rows])
  shared = np.array([r["shared_predicted_seconds"] for r in rows])
  measured = np.array([r["measured_seconds"] for r in rows])
  return {"placements": len(rows), "pearson": pearson(predicted, measured),
          "spearman": spearman(predicted, measured),
          "median_measured_over_predicted": float(np.median(measured / predicted)),
          "shared_pearson": pearson(shared, measured),
          "shared_spearman": spearman(shared, measured),
          "mode": mode, "repeats": repeats, "seed": seed, "rows": rows}
