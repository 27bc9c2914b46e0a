"""Load and save a graph in any supported format, chosen by extension, content, or by name.

| format    | extensions        | content it is recognised by                  |
|-----------|-------------------|----------------------------------------------|
| json      | .json             | starts with '{'                              |
| costgraph | .pbtxt .pbtx .pb.txt | a `node {` message (protobuf text)         |
| doppler   | .txt              | first line is a bare integer                 |
| dot       | .dot .gv          | `digraph` (a task graph: Sinnen's set)       |
| stg       | .stg              | a bare integer, then `id cost count preds...` |
| onnx      | .onnx             | read only: `regal_datasets.onnx_import` (binary)   |
"""
from __future__ import annotations

import os
import re
from typing import Callable

from regal_datasets import atomic, errors, serialization
from regal_datasets.formats import costgraph, doppler, dot, profiled, stg
from regal_datasets.graph import Graph

FORMATS = ("json", "costgraph", "doppler", "dot", "stg", "profiled")
_EXTENSIONS = {".json": "json", ".pbtxt": "costgraph", ".pbtx": "costgraph",
               ".pb.txt": "costgraph", ".txt": "doppler", ".dot": "dot", ".gv": "dot",
               ".stg": "stg"}
_PARSERS: dict[str, Callable[[str, str], Graph]] = {
    "json": serialization.graph_from_json,
    "costgraph": costgraph.parse,
    "doppler": doppler.parse,
    "dot": dot.parse,
    "stg": stg.parse,
    "profiled": profiled.parse_graph,
}
_WRITERS: dict[str, Callable[[Graph], str]] = {
    "json": serialization.graph_to_json,
    "costgraph": costgraph.write_text,
    "doppler": doppler.write_text,
    "dot": dot.write_text,
    "stg": stg.write_text,
    "profiled": profiled.graph_to_text,
}


# Graph files read and never written (their importer is `regal_datasets.onnx_import`).
READ_ONLY_EXTENSIONS = (".onnx",)


def check_graph_output(path: str, format: str | None = None, flag: str = "--out") -> None:
  """A graph can be written to `path`: refuses a name whose extension says a format that is
  only read (regal's JSON there would be a file that lies about its format)."""
  if format is None and path.lower().endswith(READ_ONLY_EXTENSIONS):
    raise errors.ConfigError(f"{flag} {path}: ONNX files are read, never written; write the "
                             f"graph as .json (or .pbtxt, .txt, .dot, .stg)")


def _check_format(name: str) -> str:
  if name not in FORMATS:
    raise errors.FormatError(f"unknown graph format {name!r}; known: {', '.join(FORMATS)}")
  return name


def format_from_extension(path: str) -> str | None:
  lowered = path.lower()
  for extension in sorted(_EXTENSIONS, key=len, reverse=True):
    if lowered.endswith(extension):
      return _EXTENSIONS[extension]
  return None


def file_stem(path: str) -> str:
  """A graph file's name without its format's extension (`.pbtxt`, `.json`, ...)."""
  name = os.path.basename(path)
  lowered = name.lower()
  extension = next((e for e in sorted(_EXTENSIONS, key=len, reverse=True)
                    if lowered.endswith(e)), None)
  return name[:-len(extension)] if extension else os.path.splitext(name)[0]


def graph_files(directory: str) -> list[str]:
  """The files of `directory` with a known graph extension, sorted (others, such as an optima
  table, are skipped); a one-line error if there are none."""
  found = sorted(os.path.join(directory, name) for name in os.listdir(directory)
                 if (format_from_extension(name) or name.lower().endswith(READ_ONLY_EXTENSIONS))
                 and os.path.isfile(os.path.join(directory, name)))
  if not found:
    raise errors.ConfigError(f"{directory}: the directory holds no graph files "
                             f"({', '.join(FORMATS)}, onnx)")
  return found


def sniff_format(text: str) -> str | None:
  """The format a file's content looks like, or None."""
  stripped = text.lstrip()
  if profiled.looks_like_profiled(stripped):
    return "profiled"
  if stripped.startswith("{"):
    return "json"
  if re.match(r"(#[^\n]*\n\s*)*node\s*[{<]", stripped):
    return "costgraph"
  if dot.looks_like_dot(text):
    return "dot"
  if stg.looks_like_stg(text):
    return "stg"
  if re.match(r"\d+\s*\n", stripped):
    return "doppler"
  return None


def parse_graph(text: str, source: str = "<text>", format: str | None = None) -> Graph:
  name = _check_format(format) if format else sniff_format(text) or format_from_extension(source)
  if name is None:
    raise errors.FormatError(f"{source}: cannot tell the graph format from its content; "
                             f"name it ({', '.join(FORMATS)})")
  try:
    return _PARSERS[name](text, source)
  except errors.RegalError:
    raise
  except (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError,
          RecursionError) as error:
    # A parser's own checks name most problems; whatever input they did not foresee (numbers
    # past float range, nesting past Python's stack, a scalar where a message belongs) is
    # still a malformed file, not a bug to show as a traceback.
    detail = "nested too deeply" if isinstance(error, RecursionError) else (
        f"{type(error).__name__}: {' '.join(str(error).split())[:200]}")
    raise errors.FormatError(f"{source}: malformed {name} file ({detail})") from None


def read_text(path: str) -> str:
  """A graph file's text; one-line `FormatError`s for a directory, a missing or binary file."""
  if os.path.isdir(path):
    raise errors.FormatError(f"{path}: is a directory, expected a graph file")
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except FileNotFoundError:
    raise errors.FormatError(f"{path}: no such file") from None
  except UnicodeDecodeError:
    raise errors.FormatError(f"{path}: not a text file (binary content)") from None


def load_graph(path: str, format: str | None = None) -> Graph:
  """Reads a graph; the format is `format`, else sniffed from the content, else the extension
  (an `.onnx` file is imported by `regal_datasets.onnx_import`)."""
  if format is None and path.lower().endswith(".onnx") and not os.path.isdir(path):
    from regal_datasets import onnx_import  # Only ONNX files need the onnx package.
    return onnx_import.load(path)
  return parse_graph(read_text(path), path, format)


def graph_to_text(graph: Graph, format: str) -> str:
  return _WRITERS[_check_format(format)](graph)


def save_graph(graph: Graph, path: str, format: str | None = None) -> str:
  """Writes a graph atomically; the format is `format`, else the extension's, else JSON."""
  check_graph_output(path, format, "graph file")
  name = _check_format(format) if format else format_from_extension(path) or "json"
  atomic.write_text(path, graph_to_text(graph, name))
  return name


def load_workload(path: str, format: str | None = None) -> profiled.Workload:
  """A profiled workload from a file: the format's own JSON, or any graph file this module
  reads whose graph carries a profile (the project's JSON of a converted workload)."""
  return profiled.workload_from_graph(load_graph(path, format), path)
