"""TensorFlow CostGraphDef in protobuf text format, as REGAL's published dataset stores graphs.

Each `node` becomes an op: `id` identifies it, `compute_cost` is its cost and
`temporary_memory_size` its extra memory; each `output_info { size }` is one output tensor (its
port is its position); each `input_info { preceding_node preceding_port }` is a data edge from
that tensor (a port of -1 marks a control dependency, as TensorFlow writes them); each
`control_input` is a control edge. Other fields are read and ignored. The node ids of the file
are kept in metadata so results can be written back against them.
"""
from __future__ import annotations

from typing import Any

from regal_datasets import errors
from regal_datasets.formats import pbtxt
from regal_datasets.graph import Graph, GraphBuilder

FORMAT_NAME = "costgraph"


def _field(message: dict, name: str, default: Any, kind: type, where: str) -> Any:
  values = message.get(name, [default])
  value = values[-1]  # Protobuf text keeps the last value of a repeated singular field.
  if kind is float and isinstance(value, int) and not isinstance(value, bool):
    value = float(value)
  if not isinstance(value, kind) or isinstance(value, bool):
    raise errors.FormatError(f"{where}: field {name!r} should be {kind.__name__}, "
                             f"found {value!r}")
  return value


def parse(text: str, source: str = "<costgraph>", name: str | None = None) -> Graph:
  message = pbtxt.parse(text, source)
  nodes = message.get("node", [])
  if not nodes:
    raise errors.EmptyGraphError(f"{source}: no 'node' entries (is this a CostGraphDef?)")
  builder = GraphBuilder(name=name or source.rsplit("/", 1)[-1].rsplit(".", 1)[0],
                         metadata={"source_format": FORMAT_NAME})
  index_of_id: dict[int, int] = {}
  outputs: list[list[int]] = []
  ids = []
  for position, node in enumerate(nodes):
    if not isinstance(node, dict):
      raise errors.FormatError(f"{source}: node #{position} is not a message")
    node_id = _field(node, "id", 0, int, f"{source}: node #{position}")
    where = f"{source}: node id {node_id}"
    op_name = _field(node, "name", f"node_id_{node_id}", str, where)
    if node_id in index_of_id:
      raise errors.DuplicateNameError(f"{source}: duplicate node id {node_id} "
                                      f"(ops {builder.op_name(index_of_id[node_id])!r} and {op_name!r})")
    try:
      op = builder.add_op(op_name, _field(node, "compute_cost", 0, float, where),
                          extra_memory=_field(node, "temporary_memory_size", 0, float, where))
    except errors.GraphError as error:
      raise type(error)(f"{source}: {error}") from None
    index_of_id[node_id] = op
    ids.append(node_id)
    ports = []
    for info in node.get("output_info", []):
      ports.append(builder.add_tensor(op, _field(info, "size", 0, float, where)))
    outputs.append(ports)

  def op_of(node_id: int, where: str) -> int:
    if node_id not in index_of_id:
      raise errors.UnknownNodeError(f"{where} refers to unknown node id {node_id}")
    return index_of_id[node_id]

  for position, node in enumerate(nodes):
    consumer = position
    where = f"{source}: node {builder.op_name(consumer)!r}"
    for info in node.get("input_info", []):
      producer = op_of(_field(info, "preceding_node", 0, int, where), where)
      port = _field(info, "preceding_port", 0, int, where)
      if port == -1:
        builder.add_control_edge(producer, consumer)
        continue
      if not 0 <= port < len(outputs[producer]):
        raise errors.UnknownNodeError(
            f"{where} reads port {port} of node {builder.op_name(producer)!r}, which has "
            f"{len(outputs[producer])} outputs")
      builder.add_data_edge(outputs[producer][port], consumer)
    for control in node.get("control_input", []):
      if not isinstance(control, int) or isinstance(control, bool):
        raise errors.FormatError(f"{where}: control_input should be a node id, found "
                                 f"{control!r}")
      builder.add_control_edge(op_of(control, where), consumer)
  builder.metadata["costgraph_ids"] = ids
  try:
    return builder.build()
  except errors.GraphError as error:
    raise type(error)(f"{source}: {error}") from None


def _as_int(value: float, what: str, graph: Graph) -> int:
  if value != round(value):
    raise errors.FormatError(f"cannot write {graph.name!r} as CostGraphDef: {what} {value} is "
                             f"not an integer (the format stores int64)")
  return int(value)


def write_text(graph: Graph) -> str:
  ids = graph.metadata.get("costgraph_ids") or list(range(graph.num_ops))
  if len(ids) != graph.num_ops:
    raise errors.FormatError(f"cannot write {graph.name!r} as CostGraphDef: metadata has "
                             f"{len(ids)} node ids for {graph.num_ops} ops")
  inputs: list[list[dict]] = [[] for _ in range(graph.num_ops)]
  for tensor, consumer in zip(graph.data_edge_tensor, graph.data_edge_consumer):
    producer = graph.tensor_producer[tensor]
    info = {"preceding_node": [int(ids[producer])]}
    if graph.tensor_port[tensor]:
      info["preceding_port"] = [int(graph.tensor_port[tensor])]
    inputs[consumer].append(info)
  outputs: list[list[dict]] = [[] for _ in range(graph.num_ops)]
  for tensor, producer in enumerate(graph.tensor_producer):
    outputs[producer].append({"size": [_as_int(graph.tensor_size[tensor], "tensor size",
                                                graph)]})
  controls: list[list[int]] = [[] for _ in range(graph.num_ops)]
  for src, dst in zip(graph.control_edge_src, graph.control_edge_dst):
    controls[dst].append(int(ids[src]))
  nodes = []
  for op in range(graph.num_ops):
    node: dict[str, list[Any]] = {"name": [graph.op_names[op]]}
    if ids[op]:
      node["id"] = [int(ids[op])]
    for key, values in (("input_info", inputs[op]), ("output_info", outputs[op]),
                        ("control_input", controls[op])):
      if values:
        node[key] = values
    cost = _as_int(graph.compute_cost[op], "compute cost", graph)
    if cost:
      node["compute_cost"] = [cost]
    memory = _as_int(graph.extra_memory[op], "temporary memory", graph)
    if memory:
      node["temporary_memory_size"] = [memory]
    nodes.append(node)
  return pbtxt.format_message({"node": nodes}) + "\n"

