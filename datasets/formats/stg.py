"""Kasahara's Standard Task Graph (STG) format (Waseda University's benchmark set).

    50                       the number of tasks n (without the two dummies)
    0 0 0                    then one line per task 0..n+1: id, cost, predecessor count,
    1 9 1 0                  predecessor ids
    ...
    # comments               (lines starting with '#', usually at the end)

Tasks 0 and n+1 are zero-cost entry and exit dummies; they are kept (a zero-cost op occupies
no device time, so makespans are unchanged) and every task keeps its id as its name. STG has
no communication costs: a precedence becomes a control edge. `write_text` needs a graph whose
tensors are all empty (a tensor with bytes has no STG form) and whose ops are named 0..n+1 in
order, or renumbers them 0..o-1 when they are not.
"""
from __future__ import annotations

import re

from regal_datasets import errors
from regal_datasets.graph import Graph

FORMAT_NAME = "stg"
_TASK_LINE = re.compile(r"^\s*\d+\s+\S+\s+\d+(\s+\d+)*\s*$")


def looks_like_stg(text: str) -> bool:
  """A bare integer line, then a line of at least three whitespace-separated integers."""
  lines = [line for line in text.splitlines() if line.strip()][:2]
  return (len(lines) == 2 and lines[0].strip().isdigit()
          and re.fullmatch(r"\s*\d+\s+\d+\s+\d+(\s+\d+)*\s*", lines[1]) is not None)


def _integer(token: str, what: str, source: str, line: int) -> int:
  if not token.isdigit():
    raise errors.FormatError(f"{source}:{line}: {what} must be a non-negative integer, found "
                             f"{token!r}")
  if len(token) > 18:
    raise errors.FormatError(f"{source}:{line}: {what} {token[:20]}... is too large")
  return int(token)


def parse(text: str, source: str = "<stg>", name: str | None = None) -> Graph:
  numbered = [(k + 1, line) for k, line in enumerate(text.splitlines())
              if line.strip() and not line.lstrip().startswith("#")]
  if not numbered:
    raise errors.EmptyGraphError(f"{source}: an STG file needs a task count, found nothing")
  count_line, count_text = numbered[0]
  num_tasks = _integer(count_text.strip(), "the task count", source, count_line)
  rows = numbered[1:]
  if len(rows) != num_tasks + 2:
    raise errors.FormatError(f"{source}: the count {num_tasks} means {num_tasks + 2} task lines "
                             f"(with the entry and exit dummies), found {len(rows)}")
  costs, preds = [], []
  for expected, (line, row) in enumerate(rows):
    tokens = row.split()
    if len(tokens) < 3:
      raise errors.FormatError(f"{source}:{line}: expected 'id cost predecessor_count "
                               f"predecessors...', found {row.strip()!r}")
    task = _integer(tokens[0], "a task id", source, line)
    if task != expected:
      raise errors.FormatError(f"{source}:{line}: expected task {expected}, found {task}")
    costs.append(_integer(tokens[1], f"task {task}'s cost", source, line))
    count = _integer(tokens[2], f"task {task}'s predecessor count", source, line)
    ids = [_integer(t, f"a predecessor of task {task}", source, line) for t in tokens[3:]]
    if len(ids) != count:
      raise errors.FormatError(f"{source}:{line}: task {task} says {count} predecessors but "
                               f"lists {len(ids)}")
    unknown = next((p for p in ids if p >= num_tasks + 2), None)
    if unknown is not None:
      raise errors.UnknownNodeError(f"{source}:{line}: task {task} names predecessor {unknown}, "
                                    f"but tasks are 0..{num_tasks + 1}")
    preds.append(ids)
  edges = [(p, task) for task, ids in enumerate(preds) for p in ids]
  graph_name = name or re.sub(r"\.stg$", "", source.rsplit("/", 1)[-1])
  try:
    return Graph(op_names=[str(i) for i in range(num_tasks + 2)], op_types=[""] * (num_tasks + 2),
                 compute_cost=costs, extra_memory=[0.0] * (num_tasks + 2), tensor_producer=[],
                 tensor_size=[], data_edge_tensor=[], data_edge_consumer=[],
                 control_edge_src=[p for p, _ in edges], control_edge_dst=[t for _, t in edges],
                 name=graph_name, metadata={"source_format": FORMAT_NAME})
  except errors.GraphError as error:
    raise type(error)(f"{source}: {error}") from None


def write_text(graph: Graph) -> str:
  """The graph as STG: ops renumbered 0..o-1 in topological order when their ids do not already
  run 0..o-1 with every edge forward; costs must be integers, tensors empty."""
  if graph.tensor_size.any():
    raise errors.FormatError(f"cannot write {graph.name!r} as STG: the format has no "
                             f"communication costs, and {int((graph.tensor_size > 0).sum())} "
                             f"tensors have bytes")
  if graph.extra_memory.any():
    raise errors.FormatError(f"cannot write {graph.name!r} as STG: the format has no field "
                             f"for extra memory")
  if (graph.compute_cost != graph.compute_cost.round()).any():
    raise errors.FormatError(f"cannot write {graph.name!r} as STG: costs must be integers")
  if graph.num_ops < 2:
    raise errors.FormatError(f"cannot write {graph.name!r} as STG: it needs the entry and exit "
                             f"tasks, so at least 2 ops")
  in_order = [str(i) for i in range(graph.num_ops)] == list(graph.op_names) and all(
      src < dst for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()))
  order = list(range(graph.num_ops)) if in_order else graph.topological_order.tolist()
  new_id = {op: k for k, op in enumerate(order)}
  preds: list[set[int]] = [set() for _ in range(graph.num_ops)]
  for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
    preds[new_id[dst]].add(new_id[src])
  lines = [f"{graph.num_ops - 2:11d}"]
  for op in order:
    ids = sorted(preds[new_id[op]])
    lines.append(" ".join(f"{value:10d}" for value in
                          [new_id[op], int(graph.compute_cost[op]), len(ids)] + ids))
  return "\n".join(lines) + "\n"
