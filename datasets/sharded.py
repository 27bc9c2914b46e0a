r"""Sharded dataflow graphs as Doppler's engine produces them (Doppler appendix D).

  python -m regal_datasets.sharded --workload chain_mm --devices 4 --out chain_mm.json
  python -m regal_datasets.sharded --workload llama_layer --devices 8 --seq_len 2048

Every original operation (a meta-op) is decomposed for N devices into ops on blocks:
* a matrix is a grid of blocks, each one tensor (inputs: one zero-cost "input" op per block);
* a matmul A (m x k) x B (k x n) runs on a (pm, pk, pn) grid with pm * pk * pn = N ("3d",
  e.g. 2 x 2 x 1 for 4 devices; "2d" keeps pk = 1): one shard multiply per grid cell reading
  the A and B blocks it overlaps, then, when pk > 1, one reduce add per output block;
* elementwise ops run one per block; row-wise reductions (softmax, RMSNorm) first reduce each
  row block over its column blocks (role "reduce"), then scale every block;
* attention runs per head group (a column block of Q, K, V): scores, softmax, values.
Costs are FLOPs divided by `flops_per_byte` (as in `regal_datasets.jax_import`: one cost unit is the
time a nominal 100 GB/s link takes per byte, recorded as `link_bytes_per_second`), tensor
sizes are bytes (`dtype_bytes` per element). Every op records its meta-op and role in
`metadata["meta_op"]` / `metadata["meta_op_role"]` ("input", "shard", "reduce"), which the
Enumerative Optimizer (`regal.baselines.enumerative`) groups by, and what it computes in
`metadata["semantics"]` (one JSON object per op: its kind, and for every operand the region
of the logical matrix it reads and the blocks covering it), which `regal.execute` runs on real
data.

Workloads (defaults are the paper's sizes):
  chain_mm     (A x B) + (C x (D x E)), every matrix 10000 x 10000;
  ffnn         softmax(relu(X W1 + b1) W2 + b2), X 2^15 x 2^5, W1 2^5 x 2^16, W2 2^16 x 2^5
               (`ffnn_batch` and `ffnn_width` scale the 2^15 and 2^16);
  llama_block  Llama-2-7B attention half: RMSNorm, Q/K/V, rotary, attention, output
               projection, residual (embedding 4096, 32 heads, sequence 4096, batch 1);
  llama_layer  the block plus the MLP half: RMSNorm, SwiGLU (11008), residual.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Sequence

from regal_datasets import cli, devices, errors, jax_import
from regal_datasets.graph import Graph, GraphBuilder

WORKLOADS = ("chain_mm", "ffnn", "llama_block", "llama_layer")


def matmul_grid(num_devices: int, style: str = "3d") -> tuple[int, int, int]:
  """(pm, pk, pn) with product num_devices, as balanced as possible (pk first for 3d)."""
  if style == "2d":
    pm = max(d for d in range(1, int(num_devices ** 0.5) + 1) if num_devices % d == 0)
    return num_devices // pm, 1, pm
  factors, n, p = [], num_devices, 2
  while n > 1:
    while n % p == 0:
      factors.append(p)
      n //= p
    p += 1
  grid = [1, 1, 1]  # pk, pm, pn
  for factor in sorted(factors, reverse=True):
    smallest = min(range(3), key=lambda i: grid[i])
    grid[smallest] *= factor
  pk, pm, pn = grid
  return pm, pk, pn


def _split(size: int, parts: int) -> list[tuple[int, int]]:
  edges = [size * i // parts for i in range(parts + 1)]
  return list(zip(edges[:-1], edges[1:]))


@dataclasses.dataclass
class Blocked:
  """A matrix (rows x cols, `copies` stacked, e.g. heads) as a grid of block tensors."""
  rows: int
  cols: int
  row_ranges: list[tuple[int, int]]
  col_ranges: list[tuple[int, int]]
  tensors: dict[tuple[int, int], int]

  def overlapping(self, rows: tuple[int, int], cols: tuple[int, int]) -> list[int]:
    return [self.tensors[(i, j)]
            for i, (r0, r1) in enumerate(self.row_ranges) if r0 < rows[1] and rows[0] < r1
            for j, (c0, c1) in enumerate(self.col_ranges) if c0 < cols[1] and cols[0] < c1]

  def operand(self, rows: tuple[int, int], cols: tuple[int, int]) -> dict:
    """What an op reads of this matrix: the region and the blocks (with their regions) that
    cover it."""
    return {"region": [rows[0], rows[1], cols[0], cols[1]],
            "blocks": [[self.tensors[(i, j)], r0, r1, c0, c1]
                       for i, (r0, r1) in enumerate(self.row_ranges)
                       if r0 < rows[1] and rows[0] < r1
                       for j, (c0, c1) in enumerate(self.col_ranges)
                       if c0 < cols[1] and cols[0] < c1]}

  def row_block(self, i: int) -> list[int]:
    return [self.tensors[(i, j)] for j in range(len(self.col_ranges))]


class ShardedBuilder:
  """Adds sharded meta-ops to a graph, recording each op's meta-op and role."""

  def __init__(self, name: str, num_devices: int, grid_style: str, dtype_bytes: int,
               flops_per_byte: float):
    self.graph = GraphBuilder(name)
    self.num_devices, self.style = num_devices, grid_style
    self.dtype_bytes, self.flops_per_byte = dtype_bytes, flops_per_byte
    self.meta_op: list[str] = []
    self.role: list[str] = []
    self.semantics: list[dict] = []

  def _op(self, meta: str, role: str, op_type: str, flops: float, inputs: Sequence[int],
          out_elements: float, semantics: dict) -> int:
    op = self.graph.add_op(f"{meta}/{role}{sum(m == meta for m in self.meta_op)}",
                           flops / self.flops_per_byte, op_type)
    self.meta_op.append(meta)
    self.role.append(role)
    self.semantics.append(semantics)
    for tensor in dict.fromkeys(inputs):
      self.graph.add_data_edge(tensor, op)
    return self.graph.add_tensor(op, out_elements * self.dtype_bytes)

  def input(self, meta: str, rows: int, cols: int, row_parts: int, col_parts: int) -> Blocked:
    row_ranges, col_ranges = _split(rows, row_parts), _split(cols, col_parts)
    tensors = {(i, j): self._op(meta, "input", "input", 0.0, [], (r1 - r0) * (c1 - c0),
                                {"kind": "input", "shape": [r1 - r0, c1 - c0],
                                 "region": [r0, r1, c0, c1]})
               for (i, (r0, r1)), (j, (c0, c1)) in itertools.product(enumerate(row_ranges),
                                                                     enumerate(col_ranges))}
    return Blocked(rows, cols, row_ranges, col_ranges, tensors)

  def matmul(self, meta: str, a: Blocked, b: Blocked, copies: int = 1) -> Blocked:
    if a.cols != b.rows:
      raise errors.ConfigError(f"{meta}: cannot multiply {a.rows}x{a.cols} by {b.rows}x{b.cols}")
    pm, pk, pn = matmul_grid(self.num_devices, self.style)
    rows, inner, cols = _split(a.rows, pm), _split(a.cols, pk), _split(b.cols, pn)
    tensors = {}
    for (i, r), (j, c) in itertools.product(enumerate(rows), enumerate(cols)):
      partials = []
      for k in inner:
        flops = 2.0 * copies * (r[1] - r[0]) * (k[1] - k[0]) * (c[1] - c[0])
        partials.append(self._op(meta, "shard", "matmul", flops,
                                 a.overlapping(r, k) + b.overlapping(k, c),
                                 copies * (r[1] - r[0]) * (c[1] - c[0]),
                                 {"kind": "matmul", "a": a.operand(r, k),
                                  "b": b.operand(k, c)}))
      elements = copies * (r[1] - r[0]) * (c[1] - c[0])
      tensors[(i, j)] = partials[0] if pk == 1 else self._op(
          meta, "reduce", "add", (pk - 1) * elements, partials, elements,
          {"kind": "sum", "inputs": partials})
    return Blocked(a.rows, b.cols, rows, cols, tensors)

  def elementwise(self, meta: str, x: Blocked, others: Sequence[Blocked] = (),
                  flops_per_element: float = 1.0, op_type: str = "elementwise",
                  copies: int = 1, row_inputs: dict[int, int] | None = None,
                  params: dict | None = None) -> Blocked:
    """One op per block of x; `others` are read where they overlap (vectors broadcast: a
    1-row operand is read by column range only); `row_inputs[i]` is one more tensor every
    block of row block i reads (a row statistic). `op_type` names the function
    (`regal.execute.sharded_program`), `params` its settings."""
    tensors = {}
    for (i, r), (j, c) in itertools.product(enumerate(x.row_ranges), enumerate(x.col_ranges)):
      inputs = [x.tensors[(i, j)]] + ([row_inputs[i]] if row_inputs else [])
      operands = []
      for other in others:
        region = ((0, 1) if other.rows == 1 else r, c)
        inputs += other.overlapping(*region)
        operands.append(other.operand(*region))
      elements = copies * (r[1] - r[0]) * (c[1] - c[0])
      tensors[(i, j)] = self._op(
          meta, "shard", op_type, flops_per_element * elements, inputs, elements,
          {"kind": "elementwise", "fn": op_type, "x": x.tensors[(i, j)], "others": operands,
           "row_input": row_inputs[i] if row_inputs else None,
           "region": [r[0], r[1], c[0], c[1]], **(params or {})})
    return Blocked(x.rows, x.cols, x.row_ranges, x.col_ranges, tensors)

  def row_normalize(self, meta: str, x: Blocked, reduce_flops: float, scale_flops: float,
                    op_type: str, others: Sequence[Blocked] = (), copies: int = 1) -> Blocked:
    """Softmax / RMSNorm along rows: a reduce per row block over its column blocks (one
    statistic per row), then an elementwise scale of every block."""
    stats = {}
    for i, r in enumerate(x.row_ranges):
      rows = copies * (r[1] - r[0])
      stats[i] = self._op(meta, "reduce", op_type + "_stat", reduce_flops * rows * x.cols,
                          x.row_block(i), rows,
                          {"kind": "row_stat", "fn": op_type, "blocks": x.row_block(i)})
    return self.elementwise(meta, x, others, scale_flops, op_type, copies, row_inputs=stats)

  def attention(self, meta: str, q: Blocked, k: Blocked, v: Blocked, heads: int) -> Blocked:
    """Causal attention per head group (a column block of q, k, v): scores, softmax, values."""
    groups = _split(q.cols, self.num_devices)
    head_dim = q.cols // heads
    seq = q.rows
    tensors = {}
    for j, c in enumerate(groups):
      group_heads = max((c[1] - c[0]) // head_dim, 1)
      whole = (0, seq)
      scores = self._op(meta, "shard", "attention_scores", 2.0 * seq * seq * (c[1] - c[0]),
                        q.overlapping(whole, c) + k.overlapping(whole, c),
                        group_heads * seq * seq,
                        {"kind": "attention_scores", "heads": group_heads,
                         "q": q.operand(whole, c), "k": k.operand(whole, c)})
      probs = self._op(meta, "shard", "softmax", 5.0 * group_heads * seq * seq, [scores],
                       group_heads * seq * seq, {"kind": "causal_softmax", "x": scores})
      tensors[(0, j)] = self._op(meta, "shard", "attention_values",
                                 2.0 * seq * seq * (c[1] - c[0]),
                                 [probs] + v.overlapping(whole, c), seq * (c[1] - c[0]),
                                 {"kind": "attention_values", "heads": group_heads,
                                  "probs": probs, "v": v.operand(whole, c)})
    return Blocked(seq, q.cols, [(0, seq)], groups, tensors)

  def build(self, metadata: dict) -> Graph:
    self.graph.metadata.update({**metadata, "meta_op": self.meta_op,
                                "meta_op_role": self.role, "semantics": self.semantics})
    return self.graph.build()


def _row_col_parts(num_devices: int) -> tuple[int, int]:
  pm, _, pn = matmul_grid(num_devices, "2d")
  return pm, pn


MAX_DIMENSION = 2 ** 31 - 1  # Elements per side; every tensor's bytes stay within float32.


def generate(workload: str, num_devices: int = 4, grid_style: str = "3d", dtype_bytes: int = 4,
             flops_per_byte: float = 1000.0, size: int | None = None,
             seq_len: int = 4096, hidden: int = 4096, heads: int = 32,
             mlp: int = 11008, ffnn_batch: int = 2 ** 15, ffnn_width: int = 2 ** 16) -> Graph:
  """A sharded workload graph (see the module docstring); `size` overrides chain_mm's 10000,
  `ffnn_batch` / `ffnn_width` FFNN's rows of X and hidden width (scaled-down runs)."""
  if workload not in WORKLOADS:
    raise errors.ConfigError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")
  if not 1 <= num_devices <= devices.MAX_DEVICES:
    raise errors.DeviceSpecError(f"device count must be between 1 and {devices.MAX_DEVICES} "
                                 f"(the most the performance models hold), got "
                                 f"{errors.brief(num_devices)}")
  dimensions = dict(dtype_bytes=dtype_bytes, seq_len=seq_len, hidden=hidden, heads=heads, mlp=mlp,
                    ffnn_batch=ffnn_batch, ffnn_width=ffnn_width, size=size or 1)
  too_large = [name for name, value in dimensions.items() if value > MAX_DIMENSION]
  if too_large:
    raise errors.ConfigError(f"{too_large[0]} must be at most {MAX_DIMENSION} (2^31 - 1), got "
                             f"{errors.brief(dimensions[too_large[0]])}")
  if grid_style not in ("2d", "3d"):
    raise errors.ConfigError(f"grid style must be 2d or 3d, got {grid_style!r}")
  if min(dtype_bytes, seq_len, hidden, heads, mlp, ffnn_batch, ffnn_width) < 1 or hidden % heads:
    raise errors.ConfigError("sizes must be positive and hidden a multiple of heads")
  if size is not None and size < 1:
    raise errors.ConfigError(f"size must be positive, got {size}")
  if not (math.isfinite(flops_per_byte) and flops_per_byte > 0):
    raise errors.ConfigError(f"flops_per_byte must be positive and finite, got {flops_per_byte}")
  b = ShardedBuilder(f"{workload}_{num_devices}dev", num_devices, grid_style, dtype_bytes,
                     flops_per_byte)
  rows, cols = _row_col_parts(num_devices)
  if workload == "chain_mm":
    n = size or 10000
    a, bm, c, d, e = (b.input(name, n, n, rows, cols) for name in "ABCDE")
    left = b.matmul("AxB", a, bm)
    right = b.matmul("Cx(DxE)", c, b.matmul("DxE", d, e))
    b.elementwise("add", left, [right])
  elif workload == "ffnn":
    x = b.input("X", ffnn_batch, 2 ** 5, num_devices, 1)
    w1 = b.input("W1", 2 ** 5, ffnn_width, 1, num_devices)
    b1 = b.input("b1", 1, ffnn_width, 1, num_devices)
    w2 = b.input("W2", ffnn_width, 2 ** 5, num_devices, 1)
    b2 = b.input("b2", 1, 2 ** 5, 1, 1)
    hidden_act = b.elementwise("relu(XW1+b1)", b.matmul("XW1", x, w1), [b1], 2.0, "bias_relu")
    logits = b.elementwise("+b2", b.matmul("HW2", hidden_act, w2), [b2], 1.0, "bias")
    b.row_normalize("softmax", logits, 2.0, 3.0, "softmax")
  else:
    x = b.input("x", seq_len, hidden, rows, cols)
    out = _attention_half(b, x, seq_len, hidden, heads, rows, cols)
    if workload == "llama_layer":
      normed = b.row_normalize("rmsnorm2", out, 2.0, 2.0, "rmsnorm",
                               [b.input("norm2_scale", 1, hidden, 1, cols)])
      gate = b.matmul("gate", normed, b.input("W_gate", hidden, mlp, rows, cols))
      up = b.matmul("up", normed, b.input("W_up", hidden, mlp, rows, cols))
      swiglu = b.elementwise("silu(gate)*up", gate, [up], 5.0, "swiglu")
      down = b.matmul("down", swiglu, b.input("W_down", mlp, hidden, rows, cols))
      b.elementwise("residual2", down, [out], 1.0, "add")
  return b.build({"source": "sharded", "workload": workload, "num_devices": num_devices,
                  "grid": grid_style, "dtype_bytes": dtype_bytes,
                  "flops_per_byte": flops_per_byte,
                  "link_bytes_per_second": jax_import.NOMINAL_LINK_BYTES_PER_SECOND})


def _attention_half(b: ShardedBuilder, x: Blocked, seq: int, hidden: int, heads: int,
                    rows: int, cols: int) -> Blocked:
  normed = b.row_normalize("rmsnorm1", x, 2.0, 2.0, "rmsnorm",
                           [b.input("norm1_scale", 1, hidden, 1, cols)])
  q, k, v = (b.matmul(name, normed, b.input(f"W_{name}", hidden, hidden, rows, cols))
             for name in "qkv")
  rotary = {"head_dim": hidden // heads}
  q = b.elementwise("rotary_q", q, [], 6.0, "rotary", params=rotary)
  k = b.elementwise("rotary_k", k, [], 6.0, "rotary", params=rotary)
  attended = b.attention("attention", q, k, v, heads)
  projected = b.matmul("o_proj", attended, b.input("W_o", hidden, hidden, rows, cols))
  return b.elementwise("residual1", projected, [x], 1.0, "add")


def main(argv: Sequence[str]) -> None:
  from absl import flags
  from regal_datasets import io as graph_io
  flag = flags.FLAGS
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  readers = {"size": ("chain_mm",), "ffnn_batch": ("ffnn",), "ffnn_width": ("ffnn",),
             "seq_len": ("llama_block", "llama_layer"), "hidden": ("llama_block", "llama_layer"),
             "heads": ("llama_block", "llama_layer"), "mlp": ("llama_layer",)}
  for name, workloads in readers.items():
    if flag[name].present and flag.workload not in workloads:
      raise errors.ConfigError(f"--{name} would do nothing here: --workload {flag.workload} "
                               f"does not read it (only {', '.join(workloads)} do)")
  if flag.out:
    from regal_datasets import atomic
    graph_io.check_graph_output(flag.out)
    atomic.check_output(flag.out, "--out")
  graph = generate(flag.workload, flag.devices, flag.grid, flag.dtype_bytes,
                   flag.flops_per_byte, flag.size, flag.seq_len, flag.hidden, flag.heads,
                   flag.mlp, flag.ffnn_batch, flag.ffnn_width)
  roles = graph.metadata["meta_op_role"]
  print(f"{graph.name}: {graph.num_ops} ops ({roles.count('shard')} shard, "
        f"{roles.count('reduce')} reduce, {roles.count('input')} input), "
        f"{graph.num_data_edges} data edges, total cost {graph.compute_cost.sum():.6g}")
  if flag.out:
    graph_io.save_graph(graph, flag.out)
    print(f"wrote {flag.out}")


if __name__ == "__main__":
  cli.watch_signals()
  from absl import flags as _flags
  _flags.DEFINE_enum("workload", "chain_mm", list(WORKLOADS), "Workload.")
  _flags.DEFINE_integer("devices", 4, "Devices to shard for.")
  _flags.DEFINE_enum("grid", "3d", ["2d", "3d"], "Matmul decomposition.")
  _flags.DEFINE_integer("dtype_bytes", 4, "Bytes per element.")
  _flags.DEFINE_float("flops_per_byte", 1000.0, "Device FLOP rate over link byte rate.")
  _flags.DEFINE_integer("size", None, "chain_mm matrix size (default 10000).")
  _flags.DEFINE_integer("seq_len", 4096, "Llama sequence length.")
  _flags.DEFINE_integer("hidden", 4096, "Llama embedding size.")
  _flags.DEFINE_integer("heads", 32, "Llama attention heads.")
  _flags.DEFINE_integer("mlp", 11008, "Llama MLP width.")
  _flags.DEFINE_integer("ffnn_batch", 2 ** 15, "FFNN rows of X.")
  _flags.DEFINE_integer("ffnn_width", 2 ** 16, "FFNN hidden width.")
  _flags.DEFINE_string("out", None, "Write the graph here (format by extension).")
  cli.run_cli(main)
