"""Task graphs in graphviz DOT, as the task-scheduling literature publishes them (Sinnen's set).

    digraph "name" {
      "0" [Weight=126];            a task: compute cost 126
      "0" -> "1" [Weight=5];       a dependency whose data takes 5 time units between processors
    }

Node `Weight` is the compute cost; edge `Weight` the communication cost, paid only when the two
tasks run on different processors (the delay model's semantics with unit bandwidth and zero
latency). Each edge becomes its own tensor of that many bytes, produced by the source and read
by the target, so every edge keeps its own cost. Other attributes (and `graph` / `node` /
`edge` attribute statements other than a default `Weight`) carry no meaning and are ignored.
Ids may be quoted strings or bare words / numbers; tasks are numbered in order of first
appearance and keep their ids as names. Comments (`//`, `/* */`, `#` lines) are skipped.
Subgraphs and undirected graphs are refused with a one-line error.

`write_text` writes any graph whose tensors each have one reader (a control edge becomes an
edge of weight 0); reading it back gives the same tasks and edges with the same costs.
"""
from __future__ import annotations

import math
import re

from regal_datasets import errors
from regal_datasets.graph import Graph

FORMAT_NAME = "dot"
_TOKEN = re.compile(r'''
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/|^\#[^\n]*)
  | (?P<quoted>"(?:[^"\\]|\\.)*")
  | (?P<arrow>->|--)
  | (?P<word>[A-Za-z_\x80-\U0010ffff][A-Za-z_0-9\x80-\U0010ffff]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))
  | (?P<punct>[{}\[\]=;,:])
''', re.VERBOSE | re.DOTALL | re.MULTILINE)
_HEAD = re.compile(r"(?:\s|//[^\n]*|/\*.*?\*/|#[^\n]*)*(?:strict\s+)?digraph\b", re.IGNORECASE
                   | re.DOTALL)


def looks_like_dot(text: str) -> bool:
  return _HEAD.match(text) is not None


def _tokens(text: str, source: str) -> list[tuple[str, str, int]]:
  """(kind, value, line) of every meaningful token."""
  tokens, position, line = [], 0, 1
  while position < len(text):
    match = _TOKEN.match(text, position)
    if match is None:
      raise errors.FormatError(f"{source}:{line}: unexpected character "
                               f"{text[position]!r} in DOT")
    kind = match.lastgroup
    value = match.group()
    if kind == "quoted":
      value = re.sub(r'\\(.)', lambda m: m.group(1) if m.group(1) in '"\\' else m.group(),
                     value[1:-1])
    if kind not in ("space", "comment"):
      tokens.append((kind, value, line))
    line += match.group().count("\n")
    position = match.end()
  return tokens


def _weight(value: str, what: str, source: str, line: int) -> float:
  try:
    weight = float(value)
  except ValueError:
    raise errors.FormatError(f"{source}:{line}: {what} Weight {value!r} is not a number") from None
  if not math.isfinite(weight) or weight < 0:
    raise errors.InvalidCostError(f"{source}:{line}: {what} Weight {value!r} must be a finite "
                                  f"non-negative number")
  return weight


class _Parser:

  def __init__(self, text: str, source: str):
    self.tokens = _tokens(text, source)
    self.position = 0
    self.source = source

  def error(self, message: str) -> errors.FormatError:
    line = self.tokens[min(self.position, len(self.tokens) - 1)][2] if self.tokens else 1
    return errors.FormatError(f"{self.source}:{line}: {message}")

  def peek(self, offset: int = 0) -> tuple[str, str, int] | None:
    index = self.position + offset
    return self.tokens[index] if index < len(self.tokens) else None

  def take(self, kind: str | None = None, value: str | None = None) -> tuple[str, str, int]:
    token = self.peek()
    if token is None:
      raise self.error("the file ends before the graph's closing '}'")
    if (kind and token[0] != kind) or (value and token[1] != value):
      raise self.error(f"expected {value or kind}, found {token[1]!r}")
    self.position += 1
    return token

  def is_id(self, token) -> bool:
    return token is not None and token[0] in ("word", "quoted")

  def attributes(self) -> dict[str, tuple[str, int]]:
    found = {}
    while self.peek() is not None and self.peek()[1] == "[":
      self.take()
      while self.peek() is not None and self.peek()[1] != "]":
        key = self.take()
        if not self.is_id(key):
          raise self.error(f"expected an attribute name, found {key[1]!r}")
        self.take("punct", "=")
        value = self.take()
        if not self.is_id(value):
          raise self.error(f"expected a value for attribute {key[1]!r}, found {value[1]!r}")
        found[key[1]] = (value[1], value[2])
        if self.peek() is not None and self.peek()[1] in (",", ";"):
          self.take()
      self.take("punct", "]")
    return found


def parse(text: str, source: str = "<dot>", name: str | None = None) -> Graph:
  parser = _Parser(text, source)
  head = parser.take()
  if head[1].lower() == "strict":
    head = parser.take()
  if head[1].lower() != "digraph":
    raise parser.error("a task graph must be a 'digraph'" if head[1].lower() == "graph"
                       else f"expected 'digraph', found {head[1]!r}")
  graph_name = name or re.sub(r"\.(dot|gv)$", "", source.rsplit("/", 1)[-1])
  if parser.is_id(parser.peek()):
    graph_id = parser.take()[1]  # Taken even when `name` overrides it.
    graph_name = name or graph_id or graph_name
  parser.take("punct", "{")
  ids: dict[str, int] = {}
  weights: dict[int, float] = {}
  first_line: dict[int, int] = {}
  edges: list[tuple[int, int, float | None, int]] = []
  node_default: float | None = None
  edge_default: float | None = None

  def node(token) -> int:
    if token[1] not in ids:
      ids[token[1]] = len(ids)
      first_line[ids[token[1]]] = token[2]
      if node_default is not None:
        weights[ids[token[1]]] = node_default
    return ids[token[1]]

  while True:
    token = parser.peek()
    if token is None:
      raise parser.error("the file ends before the graph's closing '}'")
    if token[1] == "}":
      parser.take()
      break
    if token[1] in (";", ","):
      parser.take()
      continue
    if token[1] == "{" or token[1].lower() == "subgraph":
      raise parser.error("subgraphs are not supported in task graphs")
    if token[0] == "word" and token[1].lower() in ("graph", "node", "edge") and (
        parser.peek(1) is not None and parser.peek(1)[1] == "["):
      parser.take()
      attributes = parser.attributes()
      if "Weight" in attributes:
        weight = _weight(attributes["Weight"][0], f"default {token[1]}", source, token[2])
        if token[1].lower() == "node":
          node_default = weight
        elif token[1].lower() == "edge":
          edge_default = weight
      continue
    if not parser.is_id(token):
      raise parser.error(f"expected a node or edge statement, found {token[1]!r}")
    if parser.peek(1) is not None and parser.peek(1)[1] == "=":  # A graph attribute.
      parser.take()
      parser.take()
      parser.take()
      continue
    chain = [parser.take()]
    while parser.peek() is not None and parser.peek()[0] == "arrow":
      arrow = parser.take()
      if arrow[1] == "--":
        raise parser.error("undirected edge '--' in a digraph")
      target = parser.take()
      if not parser.is_id(target):
        raise parser.error(f"expected a node id after '->', found {target[1]!r}")
      chain.append(target)
    attributes = parser.attributes()
    if len(chain) == 1:
      op = node(chain[0])
      if "Weight" in attributes:
        weights[op] = _weight(attributes["Weight"][0], f"node {chain[0][1]!r}", source,
                              attributes["Weight"][1])
      continue
    weight = None
    if "Weight" in attributes:
      weight = _weight(attributes["Weight"][0], f"edge {chain[0][1]!r} -> {chain[1][1]!r}",
                       source, attributes["Weight"][1])
    for src, dst in zip(chain, chain[1:]):
      edges.append((node(src), node(dst), weight if weight is not None else edge_default,
                    src[2]))
  trailing = parser.peek()
  if trailing is not None:
    raise parser.error(f"unexpected {trailing[1]!r} after the graph's closing '}}'")
  if not ids:
    raise errors.EmptyGraphError(f"{source}: the DOT graph has no tasks")
  names = list(ids)
  missing = next((op for op in range(len(names)) if op not in weights), None)
  if missing is not None:
    raise errors.FormatError(f"{source}:{first_line[missing]}: task {names[missing]!r} has no "
                             f"Weight (its compute cost)")
  unweighted = next((edge for edge in edges if edge[2] is None), None)
  if unweighted is not None:
    raise errors.FormatError(f"{source}:{unweighted[3]}: edge {names[unweighted[0]]!r} -> "
                             f"{names[unweighted[1]]!r} has no Weight (its communication cost)")
  try:
    return Graph(op_names=names, op_types=[""] * len(names),
                 compute_cost=[weights[op] for op in range(len(names))],
                 extra_memory=[0.0] * len(names),
                 tensor_producer=[src for src, _, _, _ in edges],
                 tensor_size=[weight for _, _, weight, _ in edges],
                 data_edge_tensor=list(range(len(edges))),
                 data_edge_consumer=[dst for _, dst, _, _ in edges],
                 control_edge_src=[], control_edge_dst=[], name=graph_name,
                 metadata={"source_format": FORMAT_NAME})
  except errors.GraphError as error:
    raise type(error)(f"{source}: {error}") from None


def _quote(text: str) -> str:
  return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _number(value: float) -> str:
  return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(
      float(value))


def write_text(graph: Graph) -> str:
  """The graph as a DOT task graph: each data edge an edge weighted by its tensor's bytes,
  each control edge an edge of weight 0. A tensor read by several ops, or by none, has no
  DOT form (communication costs belong to edges)."""
  readers = [0] * graph.num_tensors
  for tensor in graph.data_edge_tensor.tolist():
    readers[tensor] += 1
  shared = next((t for t, count in enumerate(readers) if count != 1), None)
  if shared is not None:
    raise errors.FormatError(f"cannot write {graph.name!r} as DOT: tensor {shared} has "
                             f"{readers[shared]} readers; a DOT task graph gives each edge its "
                             f"own communication cost, so every tensor needs exactly one")
  if graph.extra_memory.any():
    raise errors.FormatError(f"cannot write {graph.name!r} as DOT: the format has no field "
                             f"for extra memory")
  if any(ch in name for name in graph.op_names + (graph.name,) for ch in "\r\n"):
    raise errors.FormatError(f"cannot write {graph.name!r} as DOT: a name contains a line "
                             f"break")
  lines = [f"digraph {_quote(graph.name)} {{"]
  lines += [f"\t{_quote(name)} [Weight={_number(cost)}];"
            for name, cost in zip(graph.op_names, graph.compute_cost.tolist())]
  for tensor, consumer in zip(graph.data_edge_tensor.tolist(),
                              graph.data_edge_consumer.tolist()):
    producer = int(graph.tensor_producer[tensor])
    lines.append(f"\t{_quote(graph.op_names[producer])} -> {_quote(graph.op_names[consumer])} "
                 f"[Weight={_number(graph.tensor_size[tensor])}];")
  for src, dst in zip(graph.control_edge_src.tolist(), graph.control_edge_dst.tolist()):
    lines.append(f"\t{_quote(graph.op_names[src])} -> {_quote(graph.op_names[dst])} "
                 f"[Weight=0];")
  return "\n".join(lines + ["}"]) + "\n"
