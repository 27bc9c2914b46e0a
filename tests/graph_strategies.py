"""Hypothesis strategies for random valid graphs (tests import this module directly)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from regal_datasets import devices as devices_lib
from regal_datasets.graph import Graph


@st.composite
def dags(draw, min_ops: int = 1, max_ops: int = 12, integer: bool = True,
         max_outputs: int = 2) -> Graph:
  """A random DAG: ops in index order, every edge from a lower to a higher index."""
  num_ops = draw(st.integers(min_ops, max_ops))
  cost = st.integers(0, 50).map(float) if integer else st.floats(0, 50, allow_nan=False)
  compute_cost = draw(st.lists(cost, min_size=num_ops, max_size=num_ops))
  extra_memory = draw(st.lists(cost, min_size=num_ops, max_size=num_ops))
  outputs = draw(st.lists(st.integers(0, max_outputs), min_size=num_ops, max_size=num_ops))
  tensor_producer = np.repeat(np.arange(num_ops), outputs)
  tensor_size = draw(st.lists(cost, min_size=len(tensor_producer),
                              max_size=len(tensor_producer)))
  data_tensor, data_consumer = [], []
  if len(tensor_producer):
    pairs = draw(st.lists(st.tuples(st.integers(0, len(tensor_producer) - 1),
                                    st.integers(0, num_ops - 1)), max_size=3 * num_ops))
    for tensor, consumer in pairs:
      if tensor_producer[tensor] < consumer:
        data_tensor.append(tensor)
        data_consumer.append(consumer)
  control = [(a, b) for a, b in draw(st.lists(st.tuples(st.integers(0, num_ops - 1),
                                                         st.integers(0, num_ops - 1)),
                                              max_size=num_ops)) if a < b]
  control = np.array(control, np.int64).reshape(-1, 2)
  return Graph(op_names=[f"op{i}" for i in range(num_ops)],
               op_types=draw(st.lists(st.sampled_from(["", "MatMul", "Add"]),
                                      min_size=num_ops, max_size=num_ops)),
               compute_cost=compute_cost, extra_memory=extra_memory,
               tensor_producer=tensor_producer, tensor_size=tensor_size,
               data_edge_tensor=data_tensor, data_edge_consumer=data_consumer,
               control_edge_src=control[:, 0], control_edge_dst=control[:, 1],
               name=draw(st.sampled_from(["g", "graph one", "ünïcode"])))


def shuffled(graph: Graph, permutation: np.ndarray) -> Graph:
  """The same graph with op indices renamed by `permutation` (new index of old op i)."""
  inverse = np.argsort(permutation)
  order = np.argsort(permutation[graph.tensor_producer], kind="stable")
  new_tensor_index = np.empty_like(order)
  new_tensor_index[order] = np.arange(len(order))
  return Graph(op_names=[graph.op_names[i] for i in inverse],
               op_types=[graph.op_types[i] for i in inverse],
               compute_cost=graph.compute_cost[inverse], extra_memory=graph.extra_memory[inverse],
               tensor_producer=permutation[graph.tensor_producer][order],
               tensor_size=graph.tensor_size[order],
               data_edge_tensor=new_tensor_index[graph.data_edge_tensor],
               data_edge_consumer=permutation[graph.data_edge_consumer],
               control_edge_src=permutation[graph.control_edge_src],
               control_edge_dst=permutation[graph.control_edge_dst], name=graph.name)


# 1-3 devices with mixed speeds, bandwidths and latencies.
device_sets = st.builds(
    lambda n, speed, bandwidth, latency: devices_lib.DeviceSpec(
        memory_capacity=np.inf, speed=np.array(speed[:n], float),
        bandwidth=np.array(bandwidth[:n * n], float).reshape(n, n),
        latency=np.array(latency[:n * n], float).reshape(n, n)),
    st.sampled_from([1, 2, 3]),
    st.lists(st.sampled_from([1.0, 2.0]), min_size=3, max_size=3),
    st.lists(st.sampled_from([1.0, 2.0, 4.0]), min_size=9, max_size=9),
    st.lists(st.sampled_from([0.0, 1.0]), min_size=9, max_size=9))


# 2-4 devices whose pairs share ports (`DeviceSpec.ports`: -1 a channel of its own, else a
# port class), with mixed speeds, bandwidths and latencies.
ported_device_sets = st.integers(2, 4).flatmap(lambda n: st.builds(
    lambda speed, bandwidth, latency, ports: devices_lib.DeviceSpec(
        memory_capacity=np.inf, speed=np.array(speed, float),
        bandwidth=np.array(bandwidth, float).reshape(n, n),
        latency=np.array(latency, float).reshape(n, n),
        ports=np.array(ports).reshape(n, n)),
    st.lists(st.sampled_from([1.0, 2.0]), min_size=n, max_size=n),
    st.lists(st.sampled_from([1.0, 2.0, 4.0]), min_size=n * n, max_size=n * n),
    st.lists(st.sampled_from([0.0, 1.0]), min_size=n * n, max_size=n * n),
    st.lists(st.sampled_from([-1, 0, 0, 1]), min_size=n * n, max_size=n * n)))
