"""Single-sample latency of a split (`--model blocks`, the latency model of Tarnawski et al.,
NeurIPS 2020).

Each accelerator runs its ops as one block. The block starts when every op outside it that
feeds it has finished; then it pays, in turn, the output costs of those feeding ops (each
received once), the accelerator latencies of its ops, and the output costs of its ops whose
outputs leave it (each sent once); all its ops finish when the block does. An op on the CPU
side starts when its inputs are done and runs for its CPU latency, with no transfer cost (CPU
cores are not a limit). The latency is the latest finish.

A block must be contiguous: no path leaves it and comes back. With every CPU op on its own,
that is the same as the graph of blocks and CPU ops having no cycle (a path out of a block and
back is a cycle through it; a cycle through two blocks has each waiting for the other). So a
split is feasible when `pipeline.violations` finds nothing (memory caps, co-location, CPU-only
ops) and that graph has no cycle; an infeasible split's latency is inf.

`latency` is the readable reference: blocks and CPU ops finish one round at a time, each as
soon as what it waits for has finished.
"""
from __future__ import annotations

import networkx
import numpy as np

from regal_datasets.formats.profiled import CPU, Workload
from regal.scoring.throughput import reference as pipeline


def _waits(workload: Workload, device: np.ndarray) -> tuple[list[set], dict]:
  """Each op's distinct feeders, and the graph of what waits for what: nodes ("block", a) and
  ("cpu", op), an edge from each unit to each unit it feeds."""
  graph = workload.graph
  feeders = [set() for _ in range(workload.num_ops)]
  for tensor, reader in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()):
    feeders[reader].add(int(graph.tensor_producer[tensor]))
  unit = {op: ("cpu", op) if device[op] == CPU else ("block", int(device[op]))
          for op in range(workload.num_ops)}
  return feeders, unit


def wait_cycle(workload: Workload, device: np.ndarray) -> list | None:
  """A cycle of blocks and CPU ops waiting on each other (a block that is not contiguous, or
  two blocks waiting for each other), or None."""
  feeders, unit = _waits(workload, np.asarray(device))
  waits = networkx.DiGraph()
  waits.add_nodes_from(set(unit.values()))
  for op, sources in enumerate(feeders):
    waits.add_edges_from((unit[s], unit[op]) for s in sources if unit[s] != unit[op])
  try:
    return [edge[0] for edge in networkx.find_cycle(waits)]
  except networkx.NetworkXNoCycle:
    return None


def violations(workload: Workload, device: np.ndarray) -> list[str]:
  """What makes a split infeasible for the latency model, one line each (empty: feasible)."""
  found = pipeline.violations(workload, device)
  if found:
    return found
  cycle = wait_cycle(workload, device)
  if cycle is not None:
    names = [f"accelerator {u[1]}" if u[0] == "block" else
             f"CPU node {workload.node_ids[u[1]]}" for u in cycle]
    found.append("not contiguous: " + " -> ".join(names + names[:1]) + " wait on each other")
  return found


def block_times(workload: Workload, device: np.ndarray) -> dict[int, tuple[float, float, float]]:
  """(receive, compute, send) of each accelerator's block."""
  device = np.asarray(device)
  feeders, _ = _waits(workload, device)
  times = {}
  for accelerator in sorted(set(int(d) for d in device if d != CPU)):
    inside = set(np.flatnonzero(device == accelerator).tolist())
    received = {s for op in inside for s in feeders[op] if s not in inside}
    sent = {s for op in range(workload.num_ops) if op not in inside
            for s in feeders[op] if s in inside}
    times[accelerator] = (float(sum(workload.output_cost[s] for s in received)),
                          float(workload.accelerator_latency[sorted(inside)].sum()),
                          float(sum(workload.output_cost[s] for s in sent)))
  return times


def finish_times(workload: Workload, device: np.ndarray) -> np.ndarray | None:
  """Each op's finish time [o] (its block's finish for an accelerator op), or None when units
  wait on each other in a cycle."""
  device = np.asarray(device)
  feeders, unit = _waits(workload, device)
  times = block_times(workload, device)
  members: dict = {}
  for op, u in unit.items():
    members.setdefault(u, []).append(op)
  finish: dict = {}
  while len(finish) < len(members):
    progressed = False
    for u, ops in members.items():
      if u in finish:
        continue
      outside = {s for op in ops for s in feeders[op] if unit[s] != u}
      if any(unit[s] not in finish for s in outside):
        continue
      start = max((finish[unit[s]] for s in outside), default=0.0)
      if u[0] == "cpu":
        finish[u] = start + float(workload.cpu_latency[u[1]])
      else:
        finish[u] = start + sum(times[u[1]])
      progressed = True
    if not progressed:
      return None
  return np.array([finish[unit[op]] for op in range(workload.num_ops)])


def latency(workload: Workload, device: np.ndarray) -> float:
  """The single-sample latency of a split [o]; inf if it is not contiguous (the readable
  reference; memory caps and co-location are `violations`' to check)."""
  finish = finish_times(workload, device)
  return float("inf") if finish is None else float(finish.max(initial=0.0))


def lower_bound(workload: Workload) -> float:
  """No contiguous split has a smaller latency: along any path, each op runs at least as long
  as on its faster side (a CPU-only op on the CPU), one after another (a block finishes after
  all its ops' compute, and waits for everything outside it that feeds it); transfers only
  add."""
  graph = workload.graph
  fastest = np.where(workload.on_accelerator,
                     np.minimum(workload.accelerator_latency,
                                workload.cpu_latency if workload.max_cpus else np.inf),
                     workload.cpu_latency)
  # A class that must share a device: the CPU-only ones run on the CPU.
  for members in workload.group_members():
    if not workload.on_accelerator[members].all():
      fastest[members] = workload.cpu_latency[members]
  finish = np.zeros(workload.num_ops)
  feeders = [[] for _ in range(workload.num_ops)]
  for tensor, reader in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()):
    feeders[reader].append(int(graph.tensor_producer[tensor]))
  for op in graph.topological_order.tolist():
    finish[op] = max((finish[s] for s in feeders[op]), default=0.0) + fastest[op]
  return float(finish.max(initial=0.0))
