"""REGAL's synthetic computation graphs (Paliwal et al., ICLR 2020, appendix A.1.4).

Recipe, per graph:
1. n ~ Uniform{50, ..., 200} core ops;
2. an undirected topology on them from one of four families, chosen uniformly:
   Erdos-Renyi (p = 0.05), Barabasi-Albert (m = 2), Watts-Strogatz (k = 4, p = 0.3), or a
   stochastic block model (4 blocks, p_in = 0.3, p_out = 0.01);
3. every edge oriented along a uniformly random order of the nodes (so the result is a DAG);
   ops are numbered in that order;
4. a source op feeding every head (op without predecessors) and a sink op fed by every tail;
   the graph therefore has n + 2 ops, exactly one source and one sink;
5. each core op produces 0, 1 or 2 output tensors with probability 0.1 / 0.8 / 0.1; source and
   sink produce none and cost 0;
6. a dependency on an op that has outputs is a data edge with probability 0.8, reading one of
   its tensors chosen uniformly; otherwise (or if it has no outputs) a control edge;
7. tensor size ~ Normal(50, 10), kept positive;
8. op time = (sum of its input and output tensor sizes) x (1 + r), r ~ Normal(0, 0.1).

REGAL's dataset stores graphs as CostGraphDef, whose sizes and costs are int64, so sizes and
times are rounded to integers (at least 1 for a size) unless `integer=False`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from regal_datasets.graph import Graph

TOPOLOGIES = ("erdos_renyi", "barabasi_albert", "watts_strogatz", "stochastic_block")


@dataclasses.dataclass(frozen=True)
class SyntheticSpec:
  """The generator's parameters; the defaults are the paper's."""
  min_nodes: int = 50
  max_nodes: int = 200
  erdos_renyi_p: float = 0.05
  barabasi_albert_m: int = 2
  watts_strogatz_k: int = 4
  watts_strogatz_p: float = 0.3
  sbm_blocks: int = 4
  sbm_p_in: float = 0.3
  sbm_p_out: float = 0.01
  output_count_probs: tuple[float, float, float] = (0.1, 0.8, 0.1)
  data_edge_prob: float = 0.8
  tensor_size_mean: float = 50.0
  tensor_size_std: float = 10.0
  time_noise_std: float = 0.1
  integer: bool = True


def _undirected_topology(kind: str, n: int, spec: SyntheticSpec,
                         rng: np.random.Generator):
  """A networkx graph of the topology (networkx loads here: reading a built dataset needs it
  not)."""
  import networkx as nx
  seed = int(rng.integers(2**31))
  if kind == "erdos_renyi":
    return nx.fast_gnp_random_graph(n, spec.erdos_renyi_p, seed=seed)
  if kind == "barabasi_albert":
    return nx.barabasi_albert_graph(n, spec.barabasi_albert_m, seed=seed)
  if kind == "watts_strogatz":
    return nx.watts_strogatz_graph(n, spec.watts_strogatz_k, spec.watts_strogatz_p, seed=seed)
  if kind == "stochastic_block":
    blocks = spec.sbm_blocks
    sizes = [n // blocks + (i < n % blocks) for i in range(blocks)]
    probs = np.full((blocks, blocks), spec.sbm_p_out)
    np.fill_diagonal(probs, spec.sbm_p_in)
    return nx.stochastic_block_model(sizes, probs.tolist(), seed=seed)
  raise ValueError(f"unknown topology {kind!r}; known: {', '.join(TOPOLOGIES)}")


def _positive_normal(rng: np.random.Generator, mean: float, std: float, count: int) -> np.ndarray:
  values = rng.normal(mean, std, count)
  while (bad := values <= 0).any():  # Resample the rare non-positive draws.
    values[bad] = rng.normal(mean, std, int(bad.sum()))
  return values


def generate(rng: np.random.Generator, spec: SyntheticSpec = SyntheticSpec(),
             topology: str | None = None, name: str = "synthetic") -> Graph:
  """One synthetic graph drawn with `rng`; `topology` fixes the family instead of drawing it."""
  n = int(rng.integers(spec.min_nodes, spec.max_nodes + 1))
  kind = topology or TOPOLOGIES[int(rng.integers(len(TOPOLOGIES)))]
  undirected = _undirected_topology(kind, n, spec, rng)
  rank = rng.permutation(n)  # rank[v] is node v's position in the random order.
  core_edges = np.array([(rank[u], rank[v]) if rank[u] < rank[v] else (rank[v], rank[u])
                         for u, v in undirected.edges()], np.int64).reshape(-1, 2)

  # Op 0 is the source, ops 1..n the core in the random order, op n + 1 the sink.
  source, sink = 0, n + 1
  core_edges += 1
  has_pred = np.zeros(n + 2, bool)
  has_succ = np.zeros(n + 2, bool)
  has_pred[core_edges[:, 1]] = True
  has_succ[core_edges[:, 0]] = True
  heads = [(source, v) for v in range(1, n + 1) if not has_pred[v]]
  tails = [(v, sink) for v in range(1, n + 1) if not has_succ[v]]
  dependencies = np.concatenate([np.array(heads, np.int64).reshape(-1, 2), core_edges,
                                 np.array(tails, np.int64).reshape(-1, 2)])
  # Group dependencies by consumer so the edge lists read in op order.
  dependencies = dependencies[np.lexsort((dependencies[:, 0], dependencies[:, 1]))]

  num_outputs = np.zeros(n + 2, np.int64)
  num_outputs[1:n + 1] = rng.choice(3, size=n, p=spec.output_count_probs)
  tensor_producer = np.repeat(np.arange(n + 2), num_outputs)
  first_tensor = np.concatenate([[0], np.cumsum(num_outputs)])
  tensor_size = _positive_normal(rng, spec.tensor_size_mean, spec.tensor_size_std,
                                 len(tensor_producer))
  if spec.integer:
    tensor_size = np.maximum(np.round(tensor_size), 1.0)

  producer_outputs = num_outputs[dependencies[:, 0]]
  is_data = (producer_outputs > 0) & (rng.random(len(dependencies)) < spec.data_edge_prob)
  port = np.floor(rng.random(len(dependencies)) * np.maximum(producer_outputs, 1)).astype(int)
  data = dependencies[is_data]
  data_edge_tensor = first_tensor[data[:, 0]] + port[is_data]
  data_edge_consumer = data[:, 1]
  control = dependencies[~is_data]

  touched_bytes = (np.bincount(data_edge_consumer, tensor_size[data_edge_tensor], n + 2)
                   + np.bincount(tensor_producer, tensor_size, n + 2))
  compute_cost = touched_bytes * (1.0 + rng.normal(0.0, spec.time_noise_std, n + 2))
  compute_cost = np.maximum(compute_cost, 0.0)
  if spec.integer:
    compute_cost = np.round(compute_cost)
  compute_cost[[source, sink]] = 0.0

  op_names = ["_SOURCE"] + [f"node_{i}" for i in range(n)] + ["_SINK"]
  op_types = ["source"] + ["op"] * n + ["sink"]
  return Graph(op_names=op_names, op_types=op_types, compute_cost=compute_cost,
               extra_memory=np.zeros(n + 2), tensor_producer=tensor_producer,
               tensor_size=tensor_size, data_edge_tensor=data_edge_tensor,
               data_edge_consumer=data_edge_consumer, control_edge_src=control[:, 0],
               control_edge_dst=control[:, 1], name=name,
               metadata={"generator": "regal_synthetic", "topology": kind, "core_nodes": n})


def augment(graph: Graph, rng: np.random.Generator, low: float = 0.5, high: float = 1.5,
            name: str | None = None) -> Graph:
  """REGAL's augmentation: every tensor size and op time times its own Uniform(low, high)."""
  return graph.replace(
      compute_cost=graph.compute_cost * rng.uniform(low, high, graph.num_ops),
      tensor_size=graph.tensor_size * rng.uniform(low, high, graph.num_tensors),
      name=name or f"{graph.name}_aug",
      metadata={**graph.metadata, "augmented_from": graph.name})


def topology_key(graph: Graph) -> tuple[int, ...]:
  """The in-degree sequence, REGAL's test for 'same topology' when splitting a dataset."""
  return tuple(int(d) for d in graph.in_degree)


def sized_graph(num_ops: int, seed: int = 0, topology: str = "erdos_renyi") -> Graph:
  """A REGAL synthetic graph with exactly `num_ops` core ops: the graphs the benchmarks and
  tests share. Erdos-Renyi by default (about 1000 edges at 200 ops; edges grow with the square
  of the ops), Barabasi-Albert for about two edges per op."""
  spec = SyntheticSpec(min_nodes=num_ops, max_nodes=num_ops)
  return generate(np.random.default_rng(seed), spec, topology=topology)
