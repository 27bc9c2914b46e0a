"""regal's own file forms: a JSON document per graph, and a compact npz file per dataset.

The JSON format (documented in datasets/FORMATS.md) refers to ops by name, so it is easy to
write by hand; it round-trips exactly (floats are written in shortest round-trip form). The
npz form stores many graphs as concatenated arrays plus offsets, for whole datasets.
"""
from __future__ import annotations

import io
import json
import zipfile
from typing import Any, Sequence

import numpy as np

from regal_datasets import atomic, errors
from regal_datasets.graph import Graph, GraphBuilder

JSON_FORMAT = "regal.graph"
JSON_VERSION = 1
_STORE_VERSION = 1


# ----- JSON ----------------------------------------------------------------------------------
def graph_to_json_dict(graph: Graph) -> dict[str, Any]:
  names = graph.op_names
  return {
      "format": JSON_FORMAT,
      "version": JSON_VERSION,
      "name": graph.name,
      "ops": [{"name": name, "type": op_type, "compute_cost": float(cost),
               "extra_memory": float(extra)}
              for name, op_type, cost, extra in zip(names, graph.op_types, graph.compute_cost,
                                                     graph.extra_memory)],
      "tensors": [{"producer": names[producer], "size": float(size)}
                  for producer, size in zip(graph.tensor_producer, graph.tensor_size)],
      "data_edges": [{"tensor": int(tensor), "consumer": names[consumer]}
                     for tensor, consumer in zip(graph.data_edge_tensor,
                                                 graph.data_edge_consumer)],
      "control_edges": [{"src": names[src], "dst": names[dst]}
                        for src, dst in zip(graph.control_edge_src, graph.control_edge_dst)],
      "metadata": graph.metadata,
  }


def graph_to_json(graph: Graph) -> str:
  return json.dumps(graph_to_json_dict(graph), indent=1) + "\n"


def graph_from_json(text: str, source: str = "<json>") -> Graph:
  try:
    data = json.loads(text)
  except json.JSONDecodeError as error:
    raise errors.FormatError(f"{source}: not valid JSON ({error.msg} at line {error.lineno}, "
                             f"column {error.colno})") from None
  return graph_from_json_dict(data, source)


def graph_from_json_dict(data: Any, source: str = "<json>") -> Graph:
  if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
    raise errors.FormatError(f"{source}: not a regal graph (expected \"format\": "
                             f"\"{JSON_FORMAT}\")")
  if data.get("version") != JSON_VERSION:
    raise errors.FormatError(f"{source}: unsupported regal graph version "
                             f"{data.get('version')!r} (this build reads {JSON_VERSION})")
  _known_keys(data, _TOP_KEYS, "the graph", source)
  metadata = data.get("metadata") or {}
  if not isinstance(metadata, dict):
    raise errors.FormatError(f"{source}: \"metadata\" must be a JSON object, got "
                             f"{type(metadata).__name__}")
  builder = GraphBuilder(name=str(data.get("name", "graph")), metadata=metadata)
  where = ""
  try:
    for i, op in enumerate(_records(data, "ops", source)):
      where = f"ops[{i}]"
      _known_keys(op, _RECORD_KEYS["ops"], where, source)
      builder.add_op(str(op["name"]), _number(op.get("compute_cost", 0.0)),
                     str(op.get("type", "")), _number(op.get("extra_memory", 0.0)))
    for i, tensor in enumerate(_records(data, "tensors", source)):
      where = f"tensors[{i}]"
      _known_keys(tensor, _RECORD_KEYS["tensors"], where, source)
      index = builder.add_tensor(_name(tensor["producer"]), _number(tensor["size"]))
      readers = tensor.get("consumers", [])
      if not isinstance(readers, list):
        raise errors.FormatError(f"{source}: {where}: \"consumers\" must be a list of op "
                                 f"names")
      for reader in readers:  # Shorthand for data_edges of this tensor (hand-written files).
        builder.add_data_edge(index, _name(reader))
    for i, edge in enumerate(_records(data, "data_edges", source)):
      where = f"data_edges[{i}]"
      _known_keys(edge, _RECORD_KEYS["data_edges"], where, source)
      builder.add_data_edge(_index(edge["tensor"]), _name(edge["consumer"]))
    for i, edge in enumerate(_records(data, "control_edges", source)):
      where = f"control_edges[{i}]"
      _known_keys(edge, _RECORD_KEYS["control_edges"], where, source)
      builder.add_control_edge(_name(edge["src"]), _name(edge["dst"]))
  except KeyError as error:
    raise errors.FormatError(f"{source}: {where} lacks the key {error.args[0]!r}") from None
  except (TypeError, ValueError) as error:
    if isinstance(error, errors.RegalError):
      raise type(error)(f"{source}: {where}: {error}") from None
    raise errors.FormatError(f"{source}: {where}: {error}") from None
  return _with_source(builder.build, source)


_TOP_KEYS = ("format", "version", "name", "ops", "tensors", "data_edges", "control_edges",
             "metadata")
_RECORD_KEYS = {"ops": ("name", "type", "compute_cost", "extra_memory"),
                "tensors": ("producer", "size", "consumers"),
                "data_edges": ("tensor", "consumer"), "control_edges": ("src", "dst")}


def _known_keys(record: dict, known: tuple[str, ...], where: str, source: str) -> None:
  """A key the format does not have is a typo whose content would be dropped without a word
  ("consumer" for "consumers": a graph without its edges, and a plan for the wrong graph)."""
  unknown = [key for key in record if key not in known]
  if unknown:
    raise errors.FormatError(f"{source}: {where} has the key {errors.brief(unknown[0])}, "
                             f"which the format does not have (its keys: {', '.join(known)})")


def _with_source(build, source: str) -> Graph:
  try:
    return build()
  except errors.GraphError as error:
    raise type(error)(f"{source}: {error}") from None


def _records(data: dict, key: str, source: str) -> list:
  records = data.get(key, [])
  if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
    raise errors.FormatError(f"{source}: {key!r} must be a list of objects")
  return records


def _number(value: Any) -> float:
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    raise TypeError(f"expected a number, got {value!r}")
  return float(value)


def _index(value: Any) -> int:
  if isinstance(value, bool) or not isinstance(value, int):
    raise TypeError(f"expected an integer index, got {value!r}")
  return value


def _name(value: Any) -> str:
  if not isinstance(value, str):
    raise TypeError(f"expected an op name, got {value!r}")
  return value


# ----- compact dataset store -----------------------------------------------------------------
_ARRAYS = ("compute_cost", "extra_memory", "tensor_producer", "tensor_size",
           "data_edge_tensor", "data_edge_consumer", "control_edge_src", "control_edge_dst")
_SIZE_OF = {"compute_cost": "num_ops", "extra_memory": "num_ops",
            "tensor_producer": "num_tensors", "tensor_size": "num_tensors",
            "data_edge_tensor": "num_data_edges", "data_edge_consumer": "num_data_edges",
            "control_edge_src": "num_control_edges", "control_edge_dst": "num_control_edges"}


def save_graphs(path: str, graphs: Sequence[Graph]) -> None:
  """Writes many graphs to one compressed npz file, atomically."""
  header = {"version": _STORE_VERSION,
            "graphs": [{"name": g.name, "op_names": list(g.op_names),
                        "op_types": list(g.op_types), "metadata": g.metadata}
                       for g in graphs]}
  arrays = {field: np.concatenate([getattr(g, field) for g in graphs] or [np.zeros(0)])
            for field in _ARRAYS}
  for count in set(_SIZE_OF.values()):
    arrays[count] = np.array([getattr(g, count) for g in graphs], np.int64)
  arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
  buffer = io.BytesIO()
  np.savez_compressed(buffer, **arrays)
  with atomic.open_for_write(path, "wb") as f:
    f.write(buffer.getvalue())


def load_graphs(path: str, only: Sequence[int] | None = None) -> list[Graph]:
  """Reads the graphs written by `save_graphs` (`only`: those at these positions, in this order;
  an index past the file's count is an IndexError)."""
  try:
    with np.load(path, allow_pickle=False) as npz:
      arrays = {key: npz[key] for key in npz.files}
    header = json.loads(arrays.pop("header").tobytes().decode())
  except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
    if isinstance(error, FileNotFoundError):
      raise
    raise errors.FormatError(f"{path}: not a regal dataset file ({error})") from None
  if header.get("version") != _STORE_VERSION:
    raise errors.FormatError(f"{path}: unsupported dataset file version {header.get('version')}")
  offsets = {count: np.concatenate([[0], np.cumsum(arrays[count])])
             for count in set(_SIZE_OF.values())}
  graphs = []
  for i in range(len(header["graphs"])) if only is None else only:
    info = header["graphs"][i]
    fields = {field: arrays[field][offsets[_SIZE_OF[field]][i]:offsets[_SIZE_OF[field]][i + 1]]
              for field in _ARRAYS}
    graphs.append(Graph(op_names=info["op_names"], op_types=info["op_types"],
                        name=info["name"], metadata=info["metadata"], **fields))
  return graphs


def count_graphs(path: str) -> int:
  """How many graphs a `save_graphs` file holds (its header alone is read)."""
  try:
    with np.load(path, allow_pickle=False) as npz:
      return len(json.loads(npz["header"].tobytes().decode())["graphs"])
  except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
    if isinstance(error, FileNotFoundError):
      raise
    raise errors.FormatError(f"{path}: not a regal dataset file ({error})") from None
