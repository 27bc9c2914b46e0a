r"""Where the batched JAX WC model spends its time on a CPU: a reproducible profile.

  python -m regal_experiments.bench.profile_wc [--ops 200] [--population 512] [--top 15]

On one CPU device (no per-core sharding, so the figures are per core) it prints:
* the loop's shape: lockstep steps per call and steps per chromosome (one step propagates up
  to `WC_CHUNK` work entries, dispatches and completes one event);
* the cost per chromosome and step, the unit every optimization of the model must lower;
* the XLA fusions of the loop body ranked by time (JAX profiler trace), each with its output
  shape and the JAX operation it came from;
* what one gathered element costs inside a loop (the floor for table lookups), measured by a
  micro-benchmark of the same shape as the model's lookups.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import collections  # noqa: E402
import glob  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command  # noqa: E402
from regal.scoring import performance, sim_graph  # noqa: E402
from regal.scoring.wc import batched as wc_model  # noqa: E402

_OPS = flags.DEFINE_integer("ops", 200, "Synthetic graph size (ops).",
                            lower_bound=2, upper_bound=100_000)
_POPULATION = flags.DEFINE_integer("population", 512, "Chromosomes per call.",
                                   lower_bound=1, upper_bound=1_000_000)
_TOP = flags.DEFINE_integer("top", 15, "Fusions to list.", lower_bound=1, upper_bound=1000)


def _best_seconds(fn, *args, repeats: int = 3) -> float:
  jax.block_until_ready(fn(*args))
  best = np.inf
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    best = min(best, time.perf_counter() - start)
  return best


def count_steps(sim, placement, priority, transfer_priority) -> tuple[int, np.ndarray]:
  """(lockstep loop iterations, iterations each chromosome was busy) for one call."""

  @jax.jit
  def run(placement, priority, transfer_priority):
    population = placement.shape[0]
    ctx, state = wc_model.initial_state(sim, placement, priority, transfer_priority, False)

    def body(carry):
      s, steps, busy_steps = carry
      next_s = wc_model.event_step(sim, ctx, s, sim_graph.WC_CHUNK, False)
      return next_s, steps + 1, busy_steps + (s.ops_left > 0).astype(jnp.int32)

    _, steps, busy_steps = jax.lax.while_loop(
        lambda c: jnp.any(c[0].ops_left > 0), body,
        (state, 0, jnp.zeros(population, jnp.int32)))
    return steps, busy_steps

  steps, busy_steps = run(placement, priority, transfer_priority)
  return int(steps), np.asarray(busy_steps)


def fusion_times(fn, args) -> tuple[collections.Counter, dict[str, str]]:
  """Microseconds per loop-body XLA fusion in one traced call, and each fusion's description
  (output shape, JAX operation, source line)."""
  hlo = fn.lower(*args).compile().as_text()
  source = _source_lines(hlo)
  described = {}
  for match in re.finditer(r"^\s+%?([\w.\-]+) = (\S+) fusion\(.*?op_name=\"([^\"]*)\""
                           r"(?: stack_frame_id=(\d+))?", hlo, re.MULTILINE):
    name, shape, op_name, frame = match.groups()
    where = source.get(int(frame), "") if frame else ""
    described[name] = f"{shape:<24} {op_name.split('/')[-1]:<10} {where}"
  with tempfile.TemporaryDirectory() as folder:
    jax.profiler.start_trace(folder, create_perfetto_trace=True)
    jax.block_until_ready(fn(*args))
    jax.profiler.stop_trace()
    trace_file = glob.glob(f"{folder}/**/*.trace.json.gz", recursive=True)[0]
    with gzip.open(trace_file) as handle:
      events = json.load(handle)
  events = events["traceEvents"] if isinstance(events, dict) else events
  totals, calls = collections.Counter(), collections.Counter()
  for event in events:
    if event.get("ph") == "X" and event.get("name") in described:
      totals[event["name"]] += event.get("dur", 0)
      calls[event["name"]] += 1
  loop_calls = max(calls.values())  # The loop's body runs once per step (its condition once more).
  return collections.Counter({name: total for name, total in totals.items()
                              if calls[name] >= loop_calls - 1}), described


def _source_lines(hlo: str) -> dict[int, str]:
  """Stack frame id -> "file.py:line function" from the tables atop XLA's HLO text."""
  def table(title: str) -> dict[int, str]:
    block = re.search(rf"^{title}\n(.*?)\n\n", hlo, re.MULTILINE | re.DOTALL)
    rows = block.group(1).splitlines() if block else []
    return {int(row.split(" ", 1)[0]): row.split(" ", 1)[1] for row in rows}

  files, functions = table("FileNames"), table("FunctionNames")
  locations = {}
  for key, row in table("FileLocations").items():
    fields = dict(re.findall(r"(\w+)=(\d+)", row))
    file_name = files.get(int(fields["file_name_id"]), "?").strip('"').rsplit("/", 1)[-1]
    function = functions.get(int(fields["function_name_id"]), "?").strip('"')
    locations[key] = f"{file_name}:{fields['line']} {function}"
  return {key: locations.get(int(dict(re.findall(r"(\w+)=(\d+)", row))["file_location_id"]),
                             "")
          for key, row in table("StackFrames").items()}


def gather_element_ns(population: int, table_width: int, per_lane: int,
                      iterations: int = 500) -> float:
  """Nanoseconds per gathered element: `per_lane` reads per chromosome from a [P * width]
  table, inside a while loop, as the model reads its per-chromosome tables."""
  table = jnp.asarray(np.random.default_rng(0).integers(0, table_width,
                                                        population * table_width), jnp.int32)

  @jax.jit
  def loop(table):
    def body(_, carry):
      table, acc = carry
      offsets = (acc[:, None] + jnp.arange(per_lane)) % table_width
      values = table[offsets + (jnp.arange(population) * table_width)[:, None]]
      return table, acc + values.sum(axis=1) % 7
    return jax.lax.fori_loop(0, iterations, body, (table, jnp.zeros(population, jnp.int32)))[1]

  return _best_seconds(loop, table) / (iterations * population * per_lane) * 1e9


def main(argv: Sequence[str]) -> None:
  command.check(argv, out_flag=None)
  graph = sized_graph(_OPS.value)
  problem = performance.Problem(graph, devices_lib.homogeneous(2))
  sim = jax.tree_util.tree_map(jnp.asarray, performance.sim_graph_for(problem))
  population = _POPULATION.value
  chromosomes = jnp.asarray(np.random.default_rng(0).random(
      (population, problem.layout.size)).astype(np.float32))
  inputs = sim_graph.pad_to(sim, *performance.host_decoder(problem)(np.asarray(chromosomes)))
  simulate = jax.jit(lambda *a: wc_model.simulate_batch(
      sim, *a, chunk=sim_graph.WC_CHUNK, record_times=False).makespan)

  steps, busy_steps = count_steps(sim, *inputs)
  seconds = _best_seconds(simulate, *inputs)
  per_step_ns = seconds / (steps * population) * 1e9
  print(f"JAX {jax.__version__} on {jax.default_backend()}, one device; graph {graph.num_ops} "
        f"ops, {graph.num_tensors} tensors, {graph.num_edges} edges; population {population}")
  print(f"loop: {steps} lockstep steps; per chromosome {busy_steps.mean():.0f} "
        f"(min {busy_steps.min()}, max {busy_steps.max()})")
  print(f"time: {seconds * 1e3:.1f} ms per call = {population / seconds:,.0f} evaluations/s "
        f"per core = {per_step_ns:.0f} ns per chromosome and step")

  totals, described = fusion_times(simulate, inputs)
  traced = sum(totals.values())
  print(f"\nloop-body fusions by time (traced {traced / 1e3:.1f} ms: tracing and intra-op "
        f"threads inflate it, read the shares; ns per chromosome and step):")
  for name, micros in totals.most_common(_TOP.value):
    share = micros * 1e3 / (steps * population)
    print(f"  {share:6.1f} ns  {100 * micros / traced:4.1f}%  {name:<28} {described[name]}")
  gathers = sum(v for k, v in totals.items() if "gather" in k or "scatter" in k)
  print(f"  gathers and scatters together: {100 * gathers / traced:.0f}% of the traced time")

  element_ns = gather_element_ns(population, sim.op_mask.shape[0], sim_graph.WC_CHUNK)
  print(f"\none gathered element in a loop: {element_ns:.1f} ns "
        f"({sim_graph.WC_CHUNK} per chromosome from a {sim.op_mask.shape[0]}-wide table)")


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
