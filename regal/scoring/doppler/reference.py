"""A performance model that reproduces the Doppler repository's own simulator, ties included.

Doppler (Yao et al., ICLR 2026) scores placements with a SimPy model whose semantics
`../shared/graphs/README.md` writes down; this module rebuilds that model on SimPy so our
numbers can be set beside the paper's:

* every op occupies its device for cost / speed; a device serves one op at a time, first come,
  first served; an op asks for its device once every in-edge has delivered;
* an edge whose ends are on different devices delivers its tensor after the transfer time
  (latency + bytes / bandwidth; Doppler's files give bytes = the producer's communication cost,
  and the default devices have bandwidth 1, latency 0); transfers never contend and occupy no
  device; on one device, or for a control edge, delivery is immediate;
* only the placement matters: there are no priorities;
* requests at the same instant are served in SimPy's event order, which follows process
  creation: first one transfer process per edge, ordered as networkx's MultiDiGraph lists
  edges (by source id; within a source by target in order of first appearance; repeats of a
  pair together), then one compute process per op in id order. An op waits for the last-created
  transfer process of each (source, target) pair, as a dict keyed by the pair keeps it.

Use `doppler_units` to express a makespan the way Doppler reports it (clock / 1e10, float32).
"""
from __future__ import annotations

import collections

import numpy as np
import simpy

from regal_datasets import analysis
from regal_datasets.devices import DeviceSpec
from regal_datasets.graph import Graph
from regal.scoring.schedule import Schedule, validate_placement

DOPPLER_TIME_SCALE = 1e10


def doppler_units(makespan):
  """A makespan (or an array of times) as Doppler's simulator returns it: the clock divided
  by 1e10, in float32."""
  return np.float32(np.float32(makespan) / np.float32(DOPPLER_TIME_SCALE))


def _exact(value: float):
  """Integral values as Python ints, so large integer costs add without rounding."""
  return int(value) if float(value).is_integer() else float(value)


def networkx_edge_order(graph: Graph) -> list[tuple[int, int, int]]:
  """(src, dst, edge index) in the order a networkx MultiDiGraph iterates its edges."""
  by_source: dict[int, dict[int, list[int]]] = collections.defaultdict(dict)
  for index, (src, dst) in enumerate(zip(graph.edge_src.tolist(), graph.edge_dst.tolist())):
    by_source[src].setdefault(dst, []).append(index)
  return [(src, dst, index) for src in sorted(by_source)
          for dst, indices in by_source[src].items() for index in indices]


def simulate_doppler(graph: Graph, devices: DeviceSpec, placement: np.ndarray) -> Schedule:
  """Runs the Doppler-compatible model; returns makespan and op times in cost units."""
  placement = validate_placement(placement, graph.num_ops, devices.num_devices)
  env = simpy.Environment()
  finished = [env.event() for _ in range(graph.num_ops)]
  op_start = np.full(graph.num_ops, np.nan)
  op_end = np.full(graph.num_ops, np.nan)

  def delay(edge: int) -> float:
    src, dst = placement[graph.edge_src[edge]], placement[graph.edge_dst[edge]]
    if src == dst or graph.edge_is_control[edge]:
      return 0
    return _exact(analysis.transfer_time(devices, graph.edge_bytes[edge], src, dst))

  def communicate(producer_done, seconds):
    yield producer_done
    yield env.timeout(seconds)
    return env.now

  deliveries: dict[tuple[int, int], simpy.Process] = {}
  for src, dst, edge in networkx_edge_order(graph):
    deliveries[(src, dst)] = env.process(communicate(finished[src], delay(edge)))

  inputs_of: dict[int, dict] = collections.defaultdict(dict)
  for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    inputs_of[dst][(src, dst)] = deliveries[(src, dst)]
  resources = {device: simpy.Resource(env) for device in sorted(set(placement.tolist()))}

  def compute(op: int):
    yield simpy.AllOf(env, list(inputs_of[op].values()))
    device = placement[op]
    with resources[device].request() as request:
      yield request
      op_start[op] = env.now
      yield env.timeout(_exact(graph.compute_cost[op] / devices.speed[device]))
      op_end[op] = env.now
    finished[op].succeed()

  for op in range(graph.num_ops):
    env.process(compute(op))
  env.run()
  # Transfers never wait here: each crossing tensor leaves when its producer ends.
  transfer_start = np.full((graph.num_tensors, devices.num_devices), np.nan)
  transfer_end = transfer_start.copy()
  for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
    producer = graph.tensor_producer[tensor]
    src, dst = placement[producer], placement[consumer]
    if src != dst:
      transfer_start[tensor, dst] = op_end[producer]
      transfer_end[tensor, dst] = op_end[producer] + _exact(
          analysis.transfer_time(devices, graph.tensor_size[tensor], src, dst))
  # This model has no memory: NaN says "not modelled" rather than a misleading 0.
  return Schedule(makespan=np.float64(env.now),
                  peak_memory=np.full(devices.num_devices, np.nan),
                  op_start=op_start, op_end=op_end, transfer_start=transfer_start,
                  transfer_end=transfer_end)
