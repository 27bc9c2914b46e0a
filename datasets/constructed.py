r"""Task graphs whose optimum is known by construction (Davidovic & Crainic 2006), for the
delay model beyond CP-SAT's reach.

  python -m regal_datasets.constructed --tasks 200 --processors 8 --ccr 1 --seed 3 --out g.dot
  python -m regal_datasets.constructed --tasks 300 --processors 8 --widened --out g.dot

Lay out a schedule that keeps all p processors busy on [0, T] with no idle time: each
processor's horizon is cut at random into tasks of integer lengths (mean `mean_length`). Then
add only edges that this schedule satisfies: each task reads from about `reads` tasks that end
before it starts, favouring recent ones (a writer's pull falls as exp(-gap / w), w = `ccr` x
`mean_length` / `reads` x `reach`, the edge weight that makes communication about `ccr` times
computation). An edge inside a processor may be heavy (`inside_low`-`inside_high` x `ccr` x the
mean task: splitting such a pair costs), an edge across processors carries at most the gap the
schedule leaves between the writer's end and the reader's start, and exactly that gap (tight)
with probability `tight_share`. The schedule is then feasible, and no schedule of these tasks on
p processors ends before total work / p = T: T is the optimum, and the work bound proves it.

`widened` draws that edge recipe (reads, reach, tight share, inside weights) per instance from
wide ranges (`WIDE`), so that a benchmark built from it is not one corner of the recipe (issue
81: an independent generator of the same recipe made graphs harder than the defaults').

The graph is written as Sinnen's DOT task graphs are (node and edge `Weight`s; the delay model,
unit bandwidth), with its certificate beside it (`<out stem>.certificate.json`: processors,
optimum, and per task its processor, start and end).
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import dataclasses  # noqa: E402
import json  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402

from regal_datasets import atomic, errors  # noqa: E402
from regal_datasets.formats import dot  # noqa: E402
from regal_datasets.graph import Graph  # noqa: E402

MAX_TASKS = 100_000
MAX_PROCESSORS = 64
TIGHT_SHARE = 0.7  # Of the edges across processors, those that carry exactly their gap.
INSIDE_WEIGHT = (1.0, 2.0)  # An edge inside a processor: this range x ccr x the mean task.
# The widened family's ranges (`widened`): reads uniform, reach log-uniform, tight share
# uniform, the inside weights' low end uniform and their spread above it uniform.
WIDE = {"reads": (1.5, 5.0), "reach": (0.3, 10.0), "tight_share": (0.2, 1.0),
        "inside_low": (0.0, 1.0), "inside_spread": (0.25, 2.0)}


@dataclasses.dataclass(frozen=True)
class Instance:
  """A constructed task graph: task lengths [n], edges (writer, reader, weight), and the
  certificate: each task's processor, start and end (ints), the optimum T."""
  name: str
  lengths: np.ndarray
  edges: list[tuple[int, int, int]]
  processors: int
  placement: np.ndarray
  start: np.ndarray
  end: np.ndarray
  optimum: int

  def dot_text(self) -> str:
    lines = [f'digraph "{self.name}" {{']
    lines += [f'\t"{task}" [Weight={int(length)}];' for task, length in enumerate(self.lengths)]
    lines += [f'\t"{u}" -> "{v}" [Weight={int(w)}];' for u, v, w in self.edges]
    return "\n".join(lines + ["}"]) + "\n"

  def graph(self) -> Graph:
    return dot.parse(self.dot_text(), name=self.name)

  def certificate(self) -> dict:
    return {"name": self.name, "processors": self.processors, "optimum": self.optimum,
            "tasks": {str(task): [int(p), int(s), int(e)] for task, (p, s, e) in
                      enumerate(zip(self.placement, self.start, self.end))}}


def generate(tasks: int, processors: int, ccr: float = 1.0, seed: int = 0,
             reads: float = 3.0, mean_length: int = 10, reach: float = 1.0,
             tight_share: float = TIGHT_SHARE,
             inside_weight: tuple[float, float] = INSIDE_WEIGHT) -> Instance:
  """A constructed instance (see the module doc): `tasks` tasks on `processors` processors,
  communication about `ccr` times computation, each task reading from about `reads` earlier
  tasks, writers drawn `reach` times further back than the default recipe. Tasks are numbered
  by start time (ties by processor). Named by its sizes and seed, and by its edge recipe where
  that is not the default."""
  if not 1 <= processors <= MAX_PROCESSORS or not processors <= tasks <= MAX_TASKS:
    raise errors.ConfigError(f"a constructed graph needs 1 to {MAX_PROCESSORS} processors and "
                             f"from that many to {MAX_TASKS:,} tasks, got {tasks} tasks on "
                             f"{processors}")
  if not (np.isfinite(ccr) and ccr >= 0 and np.isfinite(reads) and reads >= 0
          and 1 <= mean_length <= 10_000):
    raise errors.ConfigError("ccr and reads must be finite and at least 0, mean_length 1 to "
                             "10,000")
  inside_low, inside_high = (float(w) for w in inside_weight)
  if not (np.isfinite(reach) and reach > 0 and 0 <= tight_share <= 1
          and np.isfinite(inside_high) and 0 <= inside_low <= inside_high):
    raise errors.ConfigError("reach must be finite and above 0, tight_share within 0 to 1, and "
                             "the inside weights finite with 0 <= low <= high")
  rng = np.random.default_rng([seed, tasks, processors, int(round(ccr * 1000))])
  counts = np.full(processors, tasks // processors)
  counts[rng.permutation(processors)[:tasks % processors]] += 1
  horizon = max(int(round(mean_length * tasks / processors)), int(counts.max()))
  placement, start, end = [], [], []
  for processor, count in enumerate(counts):
    cuts = np.sort(rng.choice(np.arange(1, horizon), size=count - 1, replace=False))
    bounds = np.concatenate([[0], cuts, [horizon]])
    placement += [processor] * count
    start += bounds[:-1].tolist()
    end += bounds[1:].tolist()
  order = np.lexsort((placement, start))
  placement, start, end = (np.asarray(a, np.int64)[order] for a in (placement, start, end))
  lengths = end - start
  edges = []
  heavy = ccr * mean_length
  scale = max(heavy / max(reads, 1.0), 1.0) * reach  # About the mean gap of a chosen writer.
  for reader in range(tasks):
    writers = np.flatnonzero(end <= start[reader])
    if not len(writers):
      continue
    pull = np.exp(-(start[reader] - end[writers]) / scale)
    want = min(len(writers), rng.poisson(reads) + 1)
    chosen = rng.choice(writers, size=want, replace=False, p=pull / pull.sum())
    for writer in sorted(chosen.tolist()):
      if placement[writer] == placement[reader]:
        weight = int(round(rng.uniform(inside_low, inside_high) * heavy))
      else:
        gap = int(start[reader] - end[writer])
        weight = gap if rng.random() < tight_share else int(rng.integers(0, gap + 1))
      edges.append((writer, reader, weight))
  name = f"constructed_n{tasks}_p{processors}_ccr{ccr:g}_s{seed}"
  recipe = (reads, reach, tight_share, inside_low, inside_high)
  if recipe != (3.0, 1.0, TIGHT_SHARE) + INSIDE_WEIGHT:
    name += (f"_k{reads:g}_r{reach:g}_t{tight_share:g}_w{inside_low:g}-{inside_high:g}")
  return Instance(name=name, lengths=lengths, edges=edges, processors=processors,
                  placement=placement, start=start, end=end, optimum=horizon)


def widened(tasks: int, processors: int, ccr: float = 1.0, seed: int = 0) -> Instance:
  """A constructed instance whose edge recipe is drawn from `WIDE` (rounded to two decimals,
  so that its name says it exactly), by its own stream of the same seed."""
  rng = np.random.default_rng([seed, tasks, processors, int(round(ccr * 1000)), 81])
  low, high = WIDE["reach"]
  reach = float(np.exp(rng.uniform(np.log(low), np.log(high))))
  reads, tight_share, inside_low, spread = (
      float(rng.uniform(*WIDE[key]))
      for key in ("reads", "tight_share", "inside_low", "inside_spread"))
  reads, reach, tight_share, inside_low, spread = (
      round(value, 2) for value in (reads, reach, tight_share, inside_low, spread))
  return generate(tasks, processors, ccr, seed, reads=reads, reach=reach,
                  tight_share=tight_share,
                  inside_weight=(inside_low, round(inside_low + spread, 2)))


def main(argv: Sequence[str]) -> None:
  from absl import flags
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  values = flags.FLAGS
  if not values.out.endswith(".dot"):
    raise errors.ConfigError(f"--out must name a .dot file, got {values.out!r}")
  certificate = values.out[:-len(".dot")] + ".certificate.json"
  # Both files checked before either is written: never a graph without its certificate.
  atomic.check_outputs([("--out", values.out, ()),
                        ("--out's certificate", certificate, ())])
  if values.widened:
    recipe = [name for name in ("reads", "mean_length", "reach", "tight_share", "inside_low",
                                "inside_high") if values[name].present]
    if recipe:
      raise errors.ConfigError(f"--widened draws the edge recipe itself; drop "
                               f"{', '.join('--' + name for name in recipe)}")
    instance = widened(values.tasks, values.processors, values.ccr, values.seed)
  else:
    instance = generate(values.tasks, values.processors, values.ccr, values.seed, values.reads,
                        values.mean_length, values.reach, values.tight_share,
                        (values.inside_low, values.inside_high))
  atomic.write_text(values.out, instance.dot_text())
  atomic.write_text(certificate, json.dumps(instance.certificate(), indent=1) + "\n")
  print(f"wrote {values.out} ({values.tasks} tasks, {len(instance.edges)} edges) and "
        f"{certificate} (optimum {instance.optimum} on {values.processors} processors)")


if __name__ == "__main__":
  from absl import flags as _flags
  _flags.DEFINE_integer("tasks", 100, "Tasks.", lower_bound=1, upper_bound=MAX_TASKS)
  _flags.DEFINE_integer("processors", 4, "Processors.", lower_bound=1,
                        upper_bound=MAX_PROCESSORS)
  _flags.DEFINE_float("ccr", 1.0, "Communication-to-computation ratio.", lower_bound=0.0,
                      upper_bound=1000.0)
  _flags.DEFINE_integer("seed", 0, "Seed.", lower_bound=0, upper_bound=errors.MAX_SEED)
  _flags.DEFINE_float("reads", 3.0, "Mean number of tasks each task reads from.",
                      lower_bound=0.0, upper_bound=1000.0)
  _flags.DEFINE_integer("mean_length", 10, "Mean task length.", lower_bound=1,
                        upper_bound=10_000)
  _flags.DEFINE_float("reach", 1.0, "How far back writers are drawn, as a multiple of the "
                      "default recipe's reach.", lower_bound=1e-3, upper_bound=1000.0)
  _flags.DEFINE_float("tight_share", TIGHT_SHARE, "The share of edges across processors that "
                      "carry exactly the gap their schedule leaves.", lower_bound=0.0,
                      upper_bound=1.0)
  _flags.DEFINE_float("inside_low", INSIDE_WEIGHT[0], "Lightest edge inside a processor, x ccr "
                      "x the mean task.", lower_bound=0.0, upper_bound=1000.0)
  _flags.DEFINE_float("inside_high", INSIDE_WEIGHT[1], "Heaviest edge inside a processor, x "
                      "ccr x the mean task.", lower_bound=0.0, upper_bound=1000.0)
  _flags.DEFINE_bool("widened", False, "Draw the edge recipe from the widened family's ranges "
                     "(as the constructed benchmark sets do).")
  _flags.DEFINE_string("out", None, "The .dot file to write (its certificate beside it).")
  _flags.mark_flag_as_required("out")
  cli.run_cli(main)
