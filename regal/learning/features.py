"""REGAL's graph features (appendix A.2) as a jraph `GraphsTuple` (host-side numpy).

Per node (op):
  memory   sum of the sizes of the tensors it reads, sum of the sizes of its outputs, its extra
           memory, and a flag for the op of largest memory (outputs + extra);
  runtime  sum of its predecessors' compute times, sum of its successors', its own, and a flag
           for the slowest op (omitted for the memory objective, as in the paper);
  seeds    per device the share of solutions placing it there, and its mean schedule position
           (0 first .. 1 last), over the heuristic assignments the search is seeded with
           (`seed_features`). REGAL used the final population of a 400-evaluation uniform
           BRKGA run; those evaluations came out of the search's budget (measured: -1.1% at
           equal budget), the seeds cost nothing.
Per edge (one per data edge producer -> consumer, one per control edge): the tensor's size,
a control flag, the tensor's index among its producer's outputs divided by their count.
Sizes are divided by the graph's largest size (tensor, input or output sum, extra memory) and
times by its largest time, so every graph's features lie in [0, 1].
"""
from __future__ import annotations

import jraph
import numpy as np

from regal_datasets.graph import Graph
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.delay import native as delay_native



def memory_features(graph: Graph) -> np.ndarray:
  """[o, 4]: input bytes, output bytes, extra memory, is-largest (unnormalized)."""
  read = {}  # Each (tensor, consumer) pair once.
  for tensor, consumer in zip(graph.data_edge_tensor.tolist(), graph.data_edge_consumer.tolist()):
    read[(tensor, consumer)] = graph.tensor_size[tensor]
  inputs = np.zeros(graph.num_ops)
  for (_, consumer), size in read.items():
    inputs[consumer] += size
  outputs = np.bincount(graph.tensor_producer, weights=graph.tensor_size,
                        minlength=graph.num_ops)
  footprint = outputs + graph.extra_memory
  largest = np.zeros(graph.num_ops)
  if graph.num_ops:
    largest[int(np.argmax(footprint))] = 1.0
  return np.stack([inputs, outputs, graph.extra_memory, largest], axis=1)


def runtime_features(graph: Graph, speed: float = 1.0) -> np.ndarray:
  """[o, 4]: predecessors' time, successors' time, own time, is-slowest (unnormalized)."""
  time = graph.compute_cost / speed
  preds = np.array([time[graph.predecessors(op)].sum() for op in range(graph.num_ops)])
  succs = np.array([time[graph.successors(op)].sum() for op in range(graph.num_ops)])
  slowest = np.zeros(graph.num_ops)
  if graph.num_ops:
    slowest[int(np.argmax(time))] = 1.0
  return np.stack([preds, succs, time, slowest], axis=1)


def schedule_positions(graph: Graph, priority: np.ndarray) -> np.ndarray:
  """[P, o] each op's position (0 first) in the schedule of each of P solutions: the
  priority-driven topological order the models execute
  (`delay.reference.priority_topological_order`, compiled: `delay.native`)."""
  priority = np.atleast_2d(np.asarray(priority, np.float64))
  position = np.zeros(priority.shape, np.int64)
  for row, op_priority in enumerate(priority):
    position[row, delay_native.priority_topological_order(graph, op_priority)] = np.arange(
        graph.num_ops)
  return position


def brkga_features(graph: Graph, placement: np.ndarray, priority: np.ndarray,
                   num_devices: int) -> np.ndarray:
  """[o, d + 1]: each device's share of the solutions and the mean schedule position (0 first,
  1 last) of every op, from a population's placements and priorities [P, o]."""
  share = np.stack([(placement == d).mean(axis=0) for d in range(num_devices)], axis=1)
  position = schedule_positions(graph, priority).mean(axis=0) / max(graph.num_ops - 1, 1)
  return np.concatenate([share, position[:, None]], axis=1)


def seed_features(problem: performance.Problem, seeds: dict[str, np.ndarray]) -> np.ndarray:
  """`brkga_features` [o, d + 1] of the search's seed chromosomes (the heuristic assignments
  the search starts from, `regal.search.guides.HeuristicSeeds`): free, since the search scores
  them anyway, and the same at training and at inference."""
  chromosomes = np.stack([np.asarray(c, np.float32) for c in seeds.values()])
  decoded = chromosome_lib.decode(chromosomes, problem.layout)
  return brkga_features(problem.graph, np.asarray(decoded.placement),
                        np.asarray(decoded.op_priority), problem.layout.num_devices)


def edge_features(graph: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(senders, receivers, features [e, 3]: size, is-control, port / outputs)."""
  producer = graph.tensor_producer[graph.data_edge_tensor]
  port = graph.tensor_port[graph.data_edge_tensor] / np.maximum(
      graph.num_outputs[producer], 1)
  data = np.stack([graph.tensor_size[graph.data_edge_tensor],
                   np.zeros(graph.num_data_edges), port], axis=1)
  control = np.stack([np.zeros(graph.num_control_edges), np.ones(graph.num_control_edges),
                      np.zeros(graph.num_control_edges)], axis=1)
  return (np.concatenate([producer, graph.control_edge_src]).astype(np.int32),
          np.concatenate([graph.data_edge_consumer, graph.control_edge_dst]).astype(np.int32),
          np.concatenate([data, control]).reshape(-1, 3))


def graph_features(problem: performance.Problem, brkga_part: np.ndarray | None = None
                   ) -> jraph.GraphsTuple:
  """The normalized features of one problem's graph (see the module docstring).

  `brkga_part` [o, d + 1] comes from `seed_features` (zeros if None, e.g. in tests)."""
  graph = problem.graph
  memory = memory_features(graph)
  senders, receivers, edges = edge_features(graph)
  size_scale = max(float(memory[:, :3].max(initial=0.0)), float(edges[:, 0].max(initial=0.0)),
                   1e-12)
  memory[:, :3] /= size_scale
  edges[:, 0] /= size_scale
  parts = [memory]
  if problem.objective != "memory":
    runtime = runtime_features(graph, float(np.max(problem.devices.speed)))
    runtime[:, :3] /= max(float(runtime[:, :3].max(initial=0.0)), 1e-12)
    parts.append(runtime)
  if brkga_part is None:
    brkga_part = np.zeros((graph.num_ops, problem.devices.num_devices + 1))
  parts.append(brkga_part)
  nodes = np.concatenate(parts, axis=1).astype(np.float32)
  return jraph.GraphsTuple(nodes=nodes, edges=edges.astype(np.float32), senders=senders,
                           receivers=receivers, n_node=np.array([graph.num_ops]),
                           n_edge=np.array([len(senders)]), globals=None)
