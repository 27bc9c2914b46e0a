r"""Converts a graph between formats and prints what it holds.

  python -m regal_datasets.convert --graph ../shared/graphs/doppler/ffnn_192nodes.txt --out ffnn.json
  python -m regal_datasets.convert --graph g.json --out g.pbtxt --out_format costgraph

Formats are sniffed from the content, then the extension; `--in_format` and `--out_format`
override that. Without `--out` the graph is only loaded, validated and summarised.
"""
from __future__ import annotations

from typing import Sequence

from regal_datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from absl import flags  # noqa: E402

from regal_datasets import atomic  # noqa: E402
from regal_datasets import io as graph_io  # noqa: E402

_GRAPH = flags.DEFINE_string("graph", None, "Graph file to read.", required=True)
_IN_FORMAT = flags.DEFINE_enum("in_format", None, list(graph_io.FORMATS),
                               "Input format (default: sniffed).")
_OUT = flags.DEFINE_string("out", None, "File to write (written atomically).")
_OUT_FORMAT = flags.DEFINE_enum("out_format", None, list(graph_io.FORMATS),
                                "Output format (default: from the extension, else json).")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  if _OUT.value:
    graph_io.check_graph_output(_OUT.value, _OUT_FORMAT.value)
    atomic.check_output(_OUT.value, "--out", [_GRAPH.value])
  elif _OUT_FORMAT.value:
    raise errors.ConfigError("--out_format would do nothing here: it is the format of --out")
  graph = graph_io.load_graph(_GRAPH.value, _IN_FORMAT.value)
  print(f"{graph.name}: {graph.num_ops} ops, {graph.num_tensors} tensors, "
        f"{graph.num_data_edges} data edges, {graph.num_control_edges} control edges, "
        f"total compute cost {graph.compute_cost.sum():.6g}, "
        f"total tensor bytes {graph.tensor_size.sum():.6g}")
  if _OUT.value:
    written = graph_io.save_graph(graph, _OUT.value, _OUT_FORMAT.value)
    print(f"wrote {_OUT.value} ({written})")


if __name__ == "__main__":
  cli.run_cli(main)
