"""Profiled workloads (msr-fiddle/dnn-partitioning's JSON) and the pipeline max-load objective:
the published single-accelerator loads, a hand-checked split, the batched scorer against the
readable one, bad input, splits in the format's own shape."""
import dataclasses
import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regal_datasets import devices, errors
from regal_datasets import io as graph_io
from regal_datasets.formats import profiled
from regal.app.result import SplitResult
from regal.baselines import (pipeline_cpsat, pipeline_dp, pipeline_linear, pipeline_local_search,
                             pipeline_methods)
from regal.scoring.blocks import native as native_blocks
from regal.scoring.blocks import reference as blocks
from regal.scoring.throughput import native as native_pipeline
from regal.scoring.throughput import reference as pipeline

# The README's published max-loads with every op on one accelerator (their code).
ONE_ACCELERATOR = {"layer_bert24_inference": 92.41, "layer_bert24_training": 217.81,
                   "layer_gnmt_inference": 182.56, "layer_gnmt_training": 520.45,
                   "layer_resnet50_inference": 201.45, "layer_resnet50_training": 462.38,
                   "op_bert_l-6_inference": 77.46, "op_bert_l-6_training": 192.92}


def workload_text(nodes, edges, cap=100.0, fpgas=2, cpus=1) -> str:
  return json.dumps({"maxSizePerFPGA": cap, "maxFPGAs": fpgas, "maxCPUs": cpus,
                     "nodes": nodes, "edges": edges})


def node(node_id, fpga, cpu=10.0, size=1.0, color=None, on=1, backward=0):
  entry = {"id": node_id, "supportedOnFpga": on, "cpuLatency": cpu, "fpgaLatency": fpga,
           "isBackwardNode": backward, "size": size, "name": f"n{node_id}"}
  if color is not None:
    entry["colorClass"] = color
  return entry


def edge(src, dst, cost):
  return {"sourceId": src, "destId": dst, "cost": cost}


@pytest.mark.parametrize("name", sorted(ONE_ACCELERATOR))
def test_one_accelerator_matches_the_published_max_load(shared_graphs, name):
  workload = graph_io.load_workload(str(shared_graphs / "profiled" / "throughput" /
                                        f"{name}.json"))
  one = np.where(workload.on_accelerator, 0, profiled.CPU)
  assert round(pipeline.max_load(workload, one), 2) == ONE_ACCELERATOR[name]


def test_a_hand_checked_split():
  """a -> b, a -> c, a -> e, b -> d, c -> d; a and b on accelerator 0, c and e on accelerator
  1, d on the CPU side. Accelerator 0: a + b, a's output sent once (c and e read it
  elsewhere), b's sent once; accelerator 1: c + e, a's output received once (two readers),
  c's sent once; the CPU side: d's CPU latency only, no transfer."""
  text = workload_text([node(1, 2.0), node(2, 3.0), node(3, 4.0), node(4, 5.0, cpu=7.0),
                        node(5, 1.0)],
                       [edge(1, 2, 0.5), edge(1, 3, 0.5), edge(1, 5, 0.5), edge(2, 4, 0.25),
                        edge(3, 4, 0.125)])
  workload = profiled.parse_workload(text)
  split = np.array([0, 0, 1, profiled.CPU, 1])
  accelerator_load, cpu_load = pipeline.loads(workload, split)
  assert accelerator_load.tolist() == [2 + 3 + 0.5 + 0.25, 4 + 1 + 0.5 + 0.125]
  assert cpu_load == 7.0
  assert pipeline.max_load(workload, split) == 7.0
  assert pipeline.violations(workload, split) == []


def test_a_device_spec_scales_the_profile_and_replaces_the_accelerators():
  """The hand-checked split above on three accelerators twice as fast, with links of
  bandwidth 4 and latency 0.25: compute halves, each transfer costs 0.25 + cost / 4; the CPU
  side keeps its latency and pays no transfer."""
  text = workload_text([node(1, 2.0), node(2, 3.0), node(3, 4.0), node(4, 5.0, cpu=7.0),
                        node(5, 1.0)],
                       [edge(1, 2, 0.5), edge(1, 3, 0.5), edge(1, 5, 0.5), edge(2, 4, 0.25),
                        edge(3, 4, 0.125)])
  spec = devices.from_json_dict({"num_devices": 3, "memory_capacity": 100.0, "speed": 2.0,
                                 "bandwidth": 4.0, "latency": 0.25})
  workload = profiled.with_devices(profiled.parse_workload(text), spec)
  assert (workload.max_accelerators, workload.accelerator_memory) == (3, 100.0)
  accelerator_load, cpu_load = pipeline.loads(workload, np.array([0, 0, 1, profiled.CPU, 1]))
  assert accelerator_load.tolist() == [(2 + 3) / 2 + (0.25 + 0.5 / 4) + (0.25 + 0.25 / 4),
                                       (4 + 1) / 2 + (0.25 + 0.5 / 4) + (0.25 + 0.125 / 4),
                                       0.0]
  assert cpu_load == 7.0
  unlimited = profiled.with_devices(profiled.parse_workload(text),
                                    devices.from_json_dict({"num_devices": 1}))
  assert unlimited.accelerator_memory == unlimited.memory.sum()  # Room for every op.
  with pytest.raises(errors.DeviceSpecError, match="bandwidth differs between devices"):
    profiled.with_devices(workload, devices.from_json_dict(
        {"num_devices": 3, "bandwidth": [[0, 1, 1], [1, 0, 2], [1, 1, 0]]}))


@st.composite
def workloads_and_splits(draw):
  num = draw(st.integers(1, 9))
  fpgas = draw(st.integers(1, 3))
  nodes = [node(10 + i, draw(st.integers(0, 9)) / 2, cpu=draw(st.integers(0, 9)))
           for i in range(num)]
  costs = [draw(st.integers(0, 4)) / 4 for _ in range(num)]
  pairs = draw(st.lists(st.tuples(st.integers(0, num - 1), st.integers(0, num - 1)),
                        max_size=3 * num))
  edges = [edge(10 + a, 10 + b, costs[a]) for a, b in pairs if a < b]
  workload = profiled.parse_workload(workload_text(nodes, edges, fpgas=fpgas))
  splits = draw(st.lists(st.lists(st.integers(-1, fpgas - 1), min_size=num, max_size=num),
                         min_size=1, max_size=5))
  return workload, np.array(splits)


@settings(max_examples=60, deadline=None)
@given(workloads_and_splits())
def test_the_batched_max_load_equals_the_readable_one(case):
  workload, splits = case
  expected = [pipeline.max_load(workload, split) for split in splits]
  np.testing.assert_array_equal(pipeline.max_load_batch(workload, splits), expected)


def test_violations_name_each_broken_rule():
  text = workload_text([node(1, 1.0, size=60, color=7), node(2, 1.0, size=60),
                        node(3, 1.0, size=1, color=7), node(4, 1.0, on=0)],
                       [edge(1, 2, 1.0), edge(2, 3, 1.0), edge(3, 4, 1.0)])
  workload = profiled.parse_workload(text)
  found = pipeline.violations(workload, np.array([0, 0, 1, 2]))
  assert any("outside the 2 accelerators" in v for v in found)
  assert any("runs only on a CPU" in v for v in found)
  assert any("co-location class of node 1 is split" in v for v in found)
  assert any("accelerator 0 holds 120 bytes" in v for v in found)
  assert pipeline.violations(workload, np.array([0, 1, 0, profiled.CPU])) == []


@pytest.mark.parametrize("change, message", [
    (lambda d: d["nodes"][0].pop("fpgaLatency"), "node 0 lacks fpgaLatency"),
    (lambda d: d.pop("maxFPGAs"), "lacks maxFPGAs"),
    (lambda d: d["nodes"][1].update(cpuLatency=-1.0), "node 2: cpuLatency must be finite and "
     "non-negative"),
    (lambda d: d["nodes"][1].update(fpgaLatency=float("nan")), "fpgaLatency must be finite"),
    (lambda d: d["edges"].append(edge(2, 9, 1.0)), "edge 2 names unknown node 9"),
    (lambda d: d["edges"].append(edge(3, 1, 1.0)), "cycle"),
    (lambda d: d["edges"].append(edge(1, 3, 2.0)), "edges leaving node 1 carry different costs"),
    (lambda d: d["nodes"][0].update(colorClass=5, size=80) or d["nodes"][2].update(
        colorClass=5, size=30), "node 1's co-location class needs 110 bytes, more than one "
     "accelerator holds"),
    (lambda d: d.update(maxCPUs=0, maxFPGAs=1) or d["nodes"][0].update(size=90),
     "need at least 2 accelerators, and maxFPGAs is 1"),
    (lambda d: d.update(maxCPUs=0) or d["nodes"][0].update(supportedOnFpga=0),
     "only a CPU runs, and maxCPUs is 0"),
    (lambda d: d["nodes"][1].update(id=1), "duplicate node id 1"),
    (lambda d: d["nodes"][1].update(supportedOnFpga=2), "supportedOnFpga must be 0, 1"),
])
def test_bad_input_is_one_line_naming_the_problem(change, message):
  data = json.loads(workload_text([node(1, 1.0, size=20), node(2, 1.0, size=20),
                                   node(3, 1.0, size=20)],
                                  [edge(1, 2, 1.0), edge(2, 3, 1.0)]))
  change(data)
  with pytest.raises(errors.RegalError, match=message) as raised:
    profiled.parse_workload(json.dumps(data), "w.json")
  assert "\n" not in str(raised.value)


def test_a_split_round_trips_and_backward_nodes_follow_their_class():
  text = workload_text([node(5, 1.0, color=1), node(6, 1.0, color=2),
                        node(7, 1.0, color=2, backward=1), node(8, 1.0, color=1, backward=1)],
                       [edge(5, 6, 1.0), edge(6, 7, 1.0), edge(7, 8, 1.0)])
  workload = profiled.parse_workload(text)
  split = np.array([1, profiled.CPU, profiled.CPU, 1])
  shaped = profiled.split_to_json(workload, split)
  assert shaped == {"fpgas": [{"nodes": [5, 8]}], "cpus": [{"nodes": [6, 7]}]}
  assert profiled.split_from_json(workload, shaped).tolist() == [0, -1, -1, 0]
  forward_only = {"fpgas": [{"nodes": []}, {"nodes": [5]}], "cpus": [{"nodes": [6]}]}
  assert profiled.split_from_json(workload, forward_only).tolist() == split.tolist()
  with pytest.raises(errors.FormatError, match="lists node 5 twice"):
    profiled.split_from_json(workload, {"fpgas": [{"nodes": [5]}], "cpus": [{"nodes": [5]}]})


def brute_force_contiguous(workload) -> float:
  """The least max-load over every contiguous split, by enumeration (tiny workloads): each
  class gets a stage, stages never decrease along a forward op's edges nor against a backward
  op's edges that touch a class of backward ops only, and the stages in order are the
  accelerators, one of them possibly the CPU side instead (when there is a
  CPU); classes with an op only a CPU runs are on the CPU side, outside the order."""
  members = workload.group_members()
  on_cpu = [not workload.on_accelerator[m].all() for m in members]
  graph = workload.graph
  src = graph.tensor_producer[graph.data_edge_tensor]
  accelerators = workload.max_accelerators
  # Ops of classes without a forward op: their backward edges order them, turned round.
  loose = np.zeros(workload.num_ops, bool)
  for m in members:
    loose[m] = workload.backward[m].all()
  best = np.inf
  for cpu_stage in [None] + (list(range(accelerators + 1)) if workload.max_cpus else []):
    stages = accelerators + (cpu_stage is not None)
    for labels in itertools.product(range(stages), repeat=len(members)):
      stage = np.full(workload.num_ops, -1)
      device = np.full(workload.num_ops, profiled.CPU)
      for group, label in enumerate(labels):
        if not on_cpu[group]:
          stage[members[group]] = label
          if label != cpu_stage:
            device[members[group]] = label - (cpu_stage is not None and label > cpu_stage)
      monotone = all(stage[a] <= stage[b] if not workload.backward[a] else
                     stage[b] <= stage[a] or not (loose[a] or loose[b])
                     for a, b in zip(src, graph.data_edge_consumer)
                     if stage[a] >= 0 and stage[b] >= 0)
      if monotone and not pipeline.violations(workload, device):
        best = min(best, pipeline.max_load(workload, device))
  return best


@st.composite
def small_workloads(draw):
  num = draw(st.integers(1, 6))
  classes = draw(st.lists(st.integers(0, 3), min_size=num, max_size=num))
  nodes = [node(i, draw(st.integers(0, 8)) / 2, cpu=draw(st.integers(0, 8)),
                size=draw(st.integers(0, 4)), color=classes[i],
                on=draw(st.sampled_from([1, 1, 1, 0])),
                backward=draw(st.sampled_from([0, 0, 1]))) for i in range(num)]
  costs = [draw(st.integers(0, 4)) / 4 for _ in range(num)]
  pairs = draw(st.lists(st.tuples(st.integers(0, num - 1), st.integers(0, num - 1)),
                        max_size=2 * num))
  edges = [edge(a, b, costs[a]) for a, b in sorted(set(pairs)) if a < b]
  cap = draw(st.integers(4, 12))
  return workload_text(nodes, edges, cap=cap, fpgas=draw(st.integers(1, 3)),
                       cpus=draw(st.sampled_from([0, 1, 1])))


def parsed_and_contiguous(text):
  """(workload, its optimal contiguous split), or None for input no split can satisfy (a
  class over the cap, no CPU for a CPU-only op): nothing to compare."""
  try:
    workload = profiled.parse_workload(text)
  except errors.RegalError:
    return None
  return workload, pipeline_dp.optimal_contiguous(workload)


@settings(max_examples=80, deadline=None)
@given(small_workloads())
def test_the_contiguous_dp_is_optimal_among_contiguous_splits(text):
  parsed = parsed_and_contiguous(text)
  if parsed is None:
    return
  workload, split = parsed
  expected = brute_force_contiguous(workload)
  assert split.max_load == pytest.approx(expected)
  if np.isfinite(expected):
    assert pipeline.violations(workload, split.device) == []
    assert pipeline.max_load(workload, split.device) == pytest.approx(expected)


@pytest.mark.parametrize("name, published", [("layer_bert24_inference", 17.79),
                                             ("layer_bert24_training", 41.75),
                                             ("layer_resnet50_inference", 33.77),
                                             ("layer_resnet50_training", 78.63),
                                             ("op_bert_l-3_inference", 27.92),
                                             ("op_bert_l-6_inference", 29.58),
                                             ("op_bert_l-6_training", 72.87)])
def test_the_dp_reproduces_the_published_optimal_contiguous_max_load(shared_graphs, name,
                                                                     published):
  """Their DP's max-loads (the README's table), by ours, to their two decimals (BERT-6
  training's 72.86497 against their 72.87): the objective and the split space are theirs."""
  workload = graph_io.load_workload(str(shared_graphs / "profiled" / "throughput" /
                                        f"{name}.json"))
  split = pipeline_dp.optimal_contiguous(workload)
  assert split.max_load == pytest.approx(published, abs=0.0051)
  assert pipeline.violations(workload, split.device) == []


@settings(max_examples=80, deadline=None)
@given(small_workloads())
def test_the_compiled_dp_equals_the_readable_one(text):
  workload = parsed_or_none(text)
  if workload is None:
    return
  compiled = pipeline_dp.optimal_contiguous(workload)
  readable = pipeline_dp.optimal_contiguous_reference(workload)
  assert compiled.ideals == readable.ideals
  assert compiled.max_load == pytest.approx(readable.max_load, rel=1e-12)
  if np.isfinite(compiled.max_load):
    assert pipeline.violations(workload, compiled.device) == []


def test_a_non_contiguous_split_beats_the_best_contiguous_one():
  """A chain 3 -> 3 -> 2 -> 2 on two accelerators, transfers free: contiguous splits reach 6
  at best; the first and third on one accelerator and the others on the other reach 5."""
  text = workload_text([node(1, 3.0), node(2, 3.0), node(3, 2.0), node(4, 2.0)],
                       [edge(1, 2, 0.0), edge(2, 3, 0.0), edge(3, 4, 0.0)], cpus=0)
  workload = profiled.parse_workload(text)
  contiguous = pipeline_dp.optimal_contiguous(workload)
  assert contiguous.max_load == 6.0
  searched = pipeline_local_search.local_search(workload, contiguous.device, evaluations=500)
  assert searched.objective == 5.0
  assert pipeline.violations(workload, searched.device) == []


@settings(max_examples=40, deadline=None)
@given(small_workloads())
def test_the_local_search_keeps_its_start_feasible_and_never_worse(text):
  parsed = parsed_and_contiguous(text)
  if parsed is None or not np.isfinite(parsed[1].max_load):
    return
  workload, start = parsed
  searched = pipeline_local_search.local_search(workload, start.device, evaluations=200)
  assert pipeline.violations(workload, searched.device) == []
  assert searched.objective <= start.max_load
  assert searched.objective == pipeline.max_load(workload, searched.device)


def test_the_local_search_never_overfills_an_accelerator():
  """Moving b from the CPU side next to a would cut the max-load from 10 to 2, but the two
  hold 12 bytes and the accelerator 10: the search stays at 10."""
  text = workload_text([node(1, 1.0, cpu=10.0, size=6), node(2, 1.0, cpu=10.0, size=6)], [],
                       cap=10.0, fpgas=1)
  workload = profiled.parse_workload(text)
  searched = pipeline_local_search.local_search(workload, np.array([0, profiled.CPU]),
                                                 evaluations=500)
  assert searched.objective == 10.0
  assert pipeline.violations(workload, searched.device) == []


def test_gradient_ops_without_a_class_are_ordered_by_their_backward_edges():
  """A ten-layer chain, every layer a forward op and a backward op of its class, and nine
  classless gradient ops each between two layers' backward ops: unordered, they would
  multiply the ideals by 2^9; turned-round backward edges put each between its layers, a
  chain of 19 units with 20 ideals."""
  nodes, edges = [], []
  for i in range(10):
    nodes += [node(100 + i, 1.0, color=i), node(200 + i, 1.0, color=i, backward=1)]
    if i:
      nodes.append(node(300 + i, 1.0, backward=1))
      edges.append(edge(100 + i - 1, 100 + i, 0.5))
  edges.append(edge(109, 209, 0.5))
  for i in range(9, 0, -1):
    edges += [edge(200 + i, 300 + i, 0.25), edge(300 + i, 200 + i - 1, 0.125)]
  workload = profiled.parse_workload(workload_text(nodes, edges, cap=1e9, fpgas=3))
  split = pipeline_dp.optimal_contiguous(workload)
  assert split.ideals == 20
  assert pipeline.violations(workload, split.device) == []


def parsed_or_none(text):
  try:
    return profiled.parse_workload(text)
  except errors.RegalError:
    return None


@settings(max_examples=60, deadline=None)
@given(small_workloads(), st.integers(0, 2 ** 31))
def test_the_compiled_loads_equal_the_readable_ones(text, seed):
  workload = parsed_or_none(text)
  if workload is None:
    return
  devices = np.random.default_rng(seed).integers(-1, workload.max_accelerators,
                                                 (4, workload.num_ops))
  arrays = native_pipeline.arrays_of(workload)
  for device in devices:
    accelerator_load, cpu_load = pipeline.loads(workload, device)
    np.testing.assert_allclose(native_pipeline.loads(arrays, device),
                               np.append(accelerator_load, cpu_load), rtol=1e-12, atol=1e-12)


def single_moves(workload, device):
  """Every split one feasible class move away (the readable neighbourhood)."""
  targets = list(range(workload.max_accelerators)) + ([profiled.CPU] if workload.max_cpus
                                                       else [])
  for members in workload.group_members():
    for target in targets:
      if target != device[members[0]]:
        moved = device.copy()
        moved[members] = target
        if not pipeline.violations(workload, moved):
          yield moved


def lexicographic(workload, device):
  accelerator_load, cpu_load = pipeline.loads(workload, device)
  load = np.append(accelerator_load, cpu_load)
  return load.max(), (load ** 2).sum()


@settings(max_examples=60, deadline=None)
@given(small_workloads())
def test_a_descent_ends_where_no_single_move_is_better(text):
  """The compiled descent scores moves by what they change; the readable neighbourhood,
  scored in full, finds no better move at its end (and it never leaves feasibility)."""
  workload = parsed_or_none(text)
  if workload is None:
    return
  start = np.full(workload.num_ops, profiled.CPU)
  if not workload.max_cpus:
    start = pipeline_linear.partition(workload).device
    if pipeline.violations(workload, start):
      return
  device, _, _ = pipeline_local_search.descend(workload, start)
  assert pipeline.violations(workload, device) == []
  top, squares = lexicographic(workload, device)
  assert top <= lexicographic(workload, start)[0] + 1e-9
  for moved in single_moves(workload, device):
    other_top, other_squares = lexicographic(workload, moved)
    assert other_top > top - 1e-9 and (other_top > top + 1e-9 or
                                       other_squares >= squares - 1e-9)


def cuts_of(order):
  """Every way to cut `order` into consecutive runs (lists of units)."""
  for cuts in itertools.product([False, True], repeat=max(len(order) - 1, 0)):
    runs, current = [], [order[0]]
    for u in range(1, len(order)):
      if cuts[u - 1]:
        runs.append(current)
        current = []
      current.append(order[u])
    runs.append(current)
    yield runs


def brute_force_cuts(workload, order):
  """The least max-load over cuts of `order` into consecutive runs, each run on its own
  accelerator or (one run at most) on the CPU side, by enumerating every labelling."""
  fixed = np.full(workload.num_ops, profiled.CPU)
  best = np.inf
  accelerators = workload.max_accelerators
  for runs in cuts_of(order):
    for cpu_run in [None] + (list(range(len(runs))) if workload.max_cpus else []):
      if len(runs) - (cpu_run is not None) > accelerators:
        continue
      device, accelerator = fixed.copy(), 0
      for r, run in enumerate(runs):
        for members in run:
          device[members] = profiled.CPU if r == cpu_run else accelerator
        accelerator += r != cpu_run
      if not pipeline.violations(workload, device):
        best = min(best, pipeline.max_load(workload, device))
  return best


@settings(max_examples=60, deadline=None)
@given(small_workloads())
def test_the_linear_partition_is_the_best_cut_of_its_order_and_no_better_than_the_dp(text):
  parsed = parsed_and_contiguous(text)
  if parsed is None:
    return
  workload, contiguous = parsed
  order = pipeline_linear.unit_order(workload)
  split = pipeline_linear.partition(workload)
  if not order:
    return
  assert split.max_load == pytest.approx(brute_force_cuts(workload, order))
  assert split.max_load >= contiguous.max_load - 1e-9
  if np.isfinite(split.max_load):
    assert pipeline.violations(workload, split.device) == []
    assert pipeline.max_load(workload, split.device) == pytest.approx(split.max_load)


def test_the_linear_partition_never_overfills_an_accelerator():
  """Both ops on the accelerator would take 2 instead of 10, but they hold 8 bytes and the
  accelerator 5: one goes to the CPU side."""
  text = workload_text([node(1, 1.0, cpu=10.0, size=4), node(2, 1.0, cpu=10.0, size=4)],
                       [edge(1, 2, 0.0)], cap=5.0, fpgas=1)
  workload = profiled.parse_workload(text)
  split = pipeline_linear.partition(workload)
  assert split.max_load == 10.0 and pipeline.violations(workload, split.device) == []


@pytest.mark.parametrize("name, published", [("layer_gnmt_training", 107.00),
                                             ("op_bert_l-6_training", 72.87)])
def test_the_linear_partition_meets_the_published_dp_on_chains(shared_graphs, name, published):
  """On these workloads the best cut of one topological order is as good as their optimal
  contiguous DP (the README's figures)."""
  workload = graph_io.load_workload(str(shared_graphs / "profiled" / "throughput" /
                                        f"{name}.json"))
  split = pipeline_linear.partition(workload)
  # Within their rounding: BERT-6 reaches 72.86497, which they print as 72.87.
  assert split.max_load == pytest.approx(published, abs=0.01)
  assert pipeline.violations(workload, split.device) == []


def test_a_throughput_run_reports_a_feasible_split_in_the_format_and_beats_pipedream(
    shared_graphs, tmp_path):
  """The result's `split` (the format's own shape) read back is the answer; its max-load is
  the readable reference's, below the PipeDream-style split (BERT-24 training: the search
  reaches 39.79, the contiguous optimum is 41.75), and the bound is below it."""
  from regal.app import pipeline_lib, split_chart
  path = shared_graphs / "profiled" / "throughput" / "layer_bert24_training.json"
  workload = graph_io.load_workload(str(path))
  data = pipeline_lib.run(workload, pipeline_methods.SplitConfig(evals=300_000), source=str(path))
  device = profiled.split_from_json(workload, data.split)
  assert pipeline.violations(workload, device) == [] and data.feasible
  assert data.objective == pytest.approx(pipeline.max_load(workload, device))
  assert data.objective < 41.75 < data.baselines["pipedream"]["objective"] + 0.01
  assert data.lower_bound <= data.objective and data.gap > 0
  held = [workload.memory[device == a].sum() for a in range(workload.max_accelerators)]
  assert data.memory["accelerators"] == pytest.approx(held)
  text = json.dumps(data.to_json(), allow_nan=False)
  assert SplitResult.from_json(json.loads(text)) == data  # The file reads back typed.
  assert "max-load" in pipeline_lib.summary(data)
  split_chart.draw(workload, data, str(tmp_path / "split.png"))
  assert (tmp_path / "split.png").stat().st_size > 0


@settings(max_examples=60, deadline=None)
@given(small_workloads(), st.integers(0, 2 ** 31))
def test_the_lower_bound_never_exceeds_a_feasible_split(text, seed):
  workload = parsed_or_none(text)
  if workload is None:
    return
  bound = pipeline.lower_bound(workload)
  rng = np.random.default_rng(seed)
  for device in rng.integers(-1, workload.max_accelerators, (30, workload.num_ops)):
    for members in workload.group_members():
      device[members] = device[members[0]]
    if not pipeline.violations(workload, device):
      assert bound <= pipeline.max_load(workload, device) + 1e-9


def test_a_workload_survives_the_projects_json_and_back(shared_graphs):
  """regal_datasets.convert's path: the format, the project's JSON (the profile in the metadata),
  the format again; every field the objectives read is the same."""
  path = shared_graphs / "profiled" / "throughput" / "op_bert_l-3_training.json"
  original = graph_io.load_workload(str(path))
  assert graph_io.sniff_format(path.read_text()) == "profiled"
  as_json = graph_io.graph_to_text(original.graph, "json")
  assert graph_io.sniff_format(as_json) == "json"
  again = profiled.parse_workload(graph_io.graph_to_text(graph_io.parse_graph(as_json),
                                                         "profiled"))
  for field in ("node_ids", "accelerator_latency", "cpu_latency", "on_accelerator", "memory",
                "backward", "colocation", "output_cost"):
    np.testing.assert_array_equal(getattr(again, field), getattr(original, field), field)
  assert (again.accelerator_memory, again.max_accelerators, again.max_cpus) == (
      original.accelerator_memory, original.max_accelerators, original.max_cpus)
  device = pipeline_linear.partition(original).device
  assert pipeline.max_load(again, device) == pipeline.max_load(original, device)


# ----- single-sample latency (--model blocks) -----------------------------------------------
def test_a_hand_checked_latency():
  """a -> b -> d, a -> c -> d; a, b on accelerator 0, c on the CPU side, d on accelerator 1.
  Block 0 starts at 0: compute 2 + 3, then sends a (c reads it) and b (d reads it): ends at
  5 + 0.5 + 0.25 = 5.75. c starts when a is done, at 5.75 (the block's end), runs its CPU
  latency 7: 12.75. Block 1 waits for b and c (12.75), receives b and c (0.25 + 0.125), computes
  5: 18.125."""
  text = workload_text([node(1, 2.0), node(2, 3.0), node(3, 4.0, cpu=7.0), node(4, 5.0)],
                       [edge(1, 2, 0.5), edge(1, 3, 0.5), edge(2, 4, 0.25), edge(3, 4, 0.125)])
  workload = profiled.parse_workload(text)
  split = np.array([0, 0, profiled.CPU, 1])
  assert blocks.latency(workload, split) == 18.125
  assert native_blocks.latency(native_pipeline.arrays_of(workload), split) == 18.125
  assert blocks.violations(workload, split) == []


def test_a_block_waits_for_its_slowest_feeder():
  """CPU ops x (10) and y (1) both feed z on accelerator 0: z starts at 10 whichever of them
  is looked at last, receives both outputs (0.5 + 0.25) and computes 2: 12.75."""
  text = workload_text([node(1, 1.0, cpu=10.0), node(2, 1.0, cpu=1.0), node(3, 2.0)],
                       [edge(1, 3, 0.5), edge(2, 3, 0.25)])
  workload = profiled.parse_workload(text)
  split = np.array([profiled.CPU, profiled.CPU, 0])
  assert blocks.latency(workload, split) == 12.75
  assert native_blocks.latency(native_pipeline.arrays_of(workload), split) == 12.75


def test_a_block_that_a_path_leaves_and_reenters_is_refused():
  """a -> b -> c with a and c on accelerator 0 and b on the CPU side: the block would wait
  for b, which waits for the block."""
  text = workload_text([node(1, 1.0), node(2, 1.0), node(3, 1.0)],
                       [edge(1, 2, 0.5), edge(2, 3, 0.5)])
  workload = profiled.parse_workload(text)
  split = np.array([0, profiled.CPU, 0])
  assert blocks.latency(workload, split) == np.inf
  assert native_blocks.latency(native_pipeline.arrays_of(workload), split) == np.inf
  (line,) = blocks.violations(workload, split)
  assert "not contiguous" in line and "accelerator 0" in line and "CPU node 2" in line


@settings(max_examples=80, deadline=None)
@given(small_workloads(), st.integers(0, 2 ** 31))
def test_the_compiled_latency_equals_the_readable_one(text, seed):
  workload = parsed_or_none(text)
  if workload is None:
    return
  arrays = native_pipeline.arrays_of(workload)
  for device in np.random.default_rng(seed).integers(-1, workload.max_accelerators,
                                                     (6, workload.num_ops)):
    expected = blocks.latency(workload, device)
    assert native_blocks.latency(arrays, device) == pytest.approx(expected, rel=1e-12)
    assert np.isinf(expected) == (blocks.wait_cycle(workload, device) is not None)


def latency_start(workload):
  start = pipeline_linear.for_latency(workload).device
  return None if blocks.violations(workload, start) else start


@settings(max_examples=60, deadline=None)
@given(small_workloads())
def test_a_latency_descent_stays_contiguous_and_ends_where_no_move_is_better(text):
  workload = parsed_or_none(text)
  if workload is None or (start := latency_start(workload)) is None:
    return
  device, _, _ = pipeline_local_search.descend(workload, start, objective="blocks")
  assert blocks.violations(workload, device) == []
  value = blocks.latency(workload, device)
  assert value <= blocks.latency(workload, start) + 1e-9
  busy = lambda d: native_blocks.key(native_pipeline.arrays_of(workload), d)[1]  # noqa: E731
  for moved in single_moves(workload, device):
    other = blocks.latency(workload, moved)
    assert other > value - 1e-9 and (other > value + 1e-9 or busy(moved) >= busy(device) - 1e-9)
  assert value >= blocks.lower_bound(workload) - 1e-9


@settings(max_examples=80, deadline=None)
@given(workloads_and_splits(), st.booleans())
def test_a_repair_makes_any_split_contiguous_by_sending_classes_to_the_cpu(case, has_cpu):
  """Any split: repaired, it is contiguous and keeps the caps; only ops that were on an
  accelerator moved, all to the CPU side; a contiguous split is left as it is; without a CPU
  a non-contiguous split cannot be repaired."""
  workload, splits = case
  if not has_cpu:
    workload = dataclasses.replace(workload, max_cpus=0)
    splits = np.where(splits == profiled.CPU, 0, splits)
  arrays = native_pipeline.arrays_of(workload)
  for device in splits:
    repaired = native_blocks.repair(arrays, device)
    if blocks.violations(workload, device) == []:
      assert repaired is not None and (repaired == device).all()
    elif not has_cpu:
      assert repaired is None
    else:
      assert blocks.violations(workload, repaired) == []
      moved = repaired != device
      assert moved.any() and (repaired[moved] == profiled.CPU).all()


def test_a_repair_sends_the_part_that_computes_less():
  """a -> b -> c with a and c on accelerator 0 and b on 1: a path leaves accelerator 0 and
  comes back. Its head (a, 1.0) computes less than its tail (c, 3.0): a goes to the CPU."""
  text = workload_text([node(1, 1.0), node(2, 2.0), node(3, 3.0)],
                       [edge(1, 2, 0.5), edge(2, 3, 0.5)])
  workload = profiled.parse_workload(text)
  repaired = native_blocks.repair(native_pipeline.arrays_of(workload), np.array([0, 1, 0]))
  assert repaired.tolist() == [profiled.CPU, 1, 0]


def brute_force_latency_cuts(workload, order):
  """The least sum of run times over cuts of `order` (each run on its own accelerator or on
  the CPU side), by enumeration."""
  best = np.inf
  for runs in cuts_of(order):
    for on_cpu in itertools.product([False, True] if workload.max_cpus else [False],
                                    repeat=len(runs)):
      if sum(not c for c in on_cpu) > workload.max_accelerators:
        continue
      device, accelerator, total = np.full(workload.num_ops, profiled.CPU), 0, 0.0
      for run, cpu in zip(runs, on_cpu):
        ops = np.concatenate(run)
        if cpu:
          total += workload.cpu_latency[ops].sum()
        else:
          device[ops] = accelerator
          accelerator += 1
      if pipeline.violations(workload, device):
        continue
      accelerator_load, _ = pipeline.loads(workload, device)
      best = min(best, total + accelerator_load.sum())
  return best


@settings(max_examples=60, deadline=None)
@given(small_workloads())
def test_the_latency_cut_is_the_least_sum_of_runs_and_bounds_the_latency(text):
  """Its runs' times summed is the least over cuts of its order (runs of one order on their
  own accelerators: each accelerator's load is its run's time), and the latency of the split,
  whose runs may overlap, is at most that sum; unless a co-location class holds both ends of
  a path through another run, so that the blocks wait on each other: then its latency is inf
  (and the search starts elsewhere)."""
  workload = parsed_or_none(text)
  if workload is None or not np.all(workload.on_accelerator):
    return
  order = pipeline_linear.unit_order(workload)
  split = pipeline_linear.for_latency(workload)
  expected = brute_force_latency_cuts(workload, order)
  if not np.isfinite(expected):
    assert split.max_load == np.inf
    return
  assert pipeline.violations(workload, split.device) == []
  accelerator_load, _ = pipeline.loads(workload, split.device)
  on_cpu = split.device == profiled.CPU
  assert accelerator_load.sum() + workload.cpu_latency[on_cpu].sum() == pytest.approx(expected)
  assert split.max_load == blocks.latency(workload, split.device)
  if blocks.wait_cycle(workload, split.device) is None:
    assert split.max_load <= expected + 1e-9
  else:
    assert split.max_load == np.inf


@pytest.mark.parametrize("name, split_of, published", [
    ("layer_bert24_inference", "max_load", 108.03), ("op_bert_l-3_inference", "max_load", 414.44),
    ("layer_bert24_inference", "latency", 100.22)])
def test_the_latency_model_reproduces_their_evaluator(shared_graphs, name, split_of, published):
  """Their evaluator's latency of their DP's split (the max-load DP; ours finds the same
  split on these chains), and of their greedy on BERT-24, which our latency cut matches."""
  workload = graph_io.load_workload(str(shared_graphs / "profiled" / "latency" / f"{name}.json"))
  split = (pipeline_linear.partition if split_of == "max_load" else
           pipeline_linear.for_latency)(workload)
  assert blocks.latency(workload, split.device) == pytest.approx(published, abs=0.005)
  assert blocks.violations(workload, split.device) == []


def test_a_latency_search_starts_on_the_cpu_when_the_order_cut_is_not_contiguous():
  """a -> b -> c with a and c one class: b's run between them makes any cut that separates b
  wait on itself, and the three together overfill an accelerator. The search starts from
  the CPU side instead and reports a contiguous split."""
  from regal.app import pipeline_lib
  text = workload_text([node(1, 1.0, cpu=2.0, size=1, color=0),
                        node(2, 1.0, cpu=2.0, size=4, color=1, backward=1),
                        node(3, 1.0, cpu=2.0, size=1, color=0)],
                       [edge(1, 2, 0.0), edge(2, 3, 0.0)], cap=4.0)
  workload = profiled.parse_workload(text)
  assert blocks.wait_cycle(workload, pipeline_linear.for_latency(workload).device) is not None
  data = pipeline_lib.run(workload, pipeline_methods.SplitConfig(objective="latency", evals=200))
  assert data.feasible and data.details["start"] == "cpu"
  device = profiled.split_from_json(workload, data.split)
  assert blocks.violations(workload, device) == []
  assert data.objective <= 6.0  # Every op on the CPU side, one after another.


def test_a_latency_run_is_contiguous_feasible_and_below_the_published_greedy(shared_graphs):
  from regal.app import pipeline_lib
  path = shared_graphs / "profiled" / "latency" / "op_bert_l-3_inference.json"
  workload = graph_io.load_workload(str(path))
  data = pipeline_lib.run(workload, pipeline_methods.SplitConfig(objective="latency",
                                                             evals=20_000))
  device = profiled.split_from_json(workload, data.split)
  assert blocks.violations(workload, device) == [] and data.feasible
  assert data.objective == pytest.approx(blocks.latency(workload, device))
  assert data.objective < 414.44 < 416.20  # Their DP's split and their greedy.
  assert max(b["finish"] for b in data.blocks) <= data.objective + 1e-9
  assert data.lower_bound <= data.objective


def test_the_contiguous_dp_stops_at_its_time_limit(shared_graphs):
  workload = graph_io.load_workload(str(shared_graphs / "profiled" / "throughput" /
                                        "layer_inceptionv3_training.json"))
  with pytest.raises(errors.ConfigError, match="ran past its 0.5 s"):
    pipeline_dp.optimal_contiguous(workload, time_limit=0.5)  # It needs ~45 s.


@settings(max_examples=60, deadline=None)
@given(small_workloads(), st.integers(0, 2 ** 31))
def test_a_cut_edge_move_joins_a_neighbour_and_keeps_the_split_feasible(text, seed):
  workload = parsed_or_none(text)
  if workload is None:
    return
  start = pipeline_linear.partition(workload).device
  if pipeline.violations(workload, start):
    return
  arrays = native_pipeline.arrays_of(workload)
  moved = native_pipeline.perturb_boundary(arrays, start, 1, seed)
  assert pipeline.violations(workload, moved) == []
  changed = np.flatnonzero(moved != start)
  if len(changed):
    assert len(set(workload.colocation[changed].tolist())) == 1  # One class moved, whole.
    graph = workload.graph
    src = graph.tensor_producer[graph.data_edge_tensor]
    neighbours = {int(start[b]) for a, b in zip(src, graph.data_edge_consumer)
                  if a in changed and b not in changed} | {
        int(start[a]) for a, b in zip(src, graph.data_edge_consumer)
        if b in changed and a not in changed}
    assert int(moved[changed[0]]) in neighbours
  assert native_pipeline.perturb(arrays, start, 3, seed).shape == start.shape


def test_cpsat_counts_what_a_forced_split_receives():
  """a (0, 6 bytes) feeds b (5, 6 bytes); the 10-byte accelerators cannot hold both, so b's
  accelerator computes 5 and receives a's output (2): the optimum and the bound are 7."""
  text = workload_text([node(1, 0.0, size=6), node(2, 5.0, size=6)], [edge(1, 2, 2.0)],
                       cap=10.0, cpus=0)
  solved = pipeline_cpsat.solve(profiled.parse_workload(text), time_limit=5.0, workers=1)
  assert solved.status == "OPTIMAL" and solved.max_load == 7.0
  assert solved.lower_bound == pytest.approx(7.0, rel=1e-4)  # Rounded down, as documented.


def test_cpsat_answers_no_worse_than_the_hint_it_started_from(shared_graphs):
  """Stopped before it improves on it (a time limit, a signal), CP-SAT may return a split worse
  than its hint (it once answered 312.23 from a hint of 72.87); the hint is an answer too."""
  workload = graph_io.load_workload(
      str(shared_graphs / "profiled" / "throughput" / "op_bert_l-6_training.json"))
  hint = pipeline_linear.partition(workload).device
  solved = pipeline_cpsat.solve(workload, time_limit=3.0, hint=hint, workers=1)
  assert solved.device is not None and solved.max_load <= pipeline.max_load(workload, hint)
  assert solved.lower_bound <= solved.max_load and not solved.proven


def test_a_split_cpsat_proves_optimal_is_reported_proven():
  """Four ops whose latencies do not divide CP-SAT's time unit: its bound, rounded down, lies
  a hair below the optimum it proves (4.89998 against 4.9); the result said proven_optimal
  false."""
  from regal.app import pipeline_lib
  text = workload_text([node(i, 1.1 + 0.7 * i, cpu=4.3 + i, size=2.0) for i in range(4)],
                       [edge(i, i + 1, 0.3) for i in range(3)], cap=10.0)
  data = pipeline_lib.run(profiled.parse_workload(text),
                          pipeline_methods.SplitConfig(method="cpsat"))
  assert data.details["status"] == "OPTIMAL"
  assert data.lower_bound < data.objective == pytest.approx(4.9)
  assert data.proven_optimal is True and data.gap < 1e-4


def brute_force_optimum(workload):
  """The least max-load over every feasible split (each class on each device)."""
  groups = workload.group_members()
  targets = list(range(workload.max_accelerators)) + ([profiled.CPU] if workload.max_cpus
                                                       else [])
  best = np.inf
  for labels in itertools.product(targets, repeat=len(groups)):
    device = np.zeros(workload.num_ops, np.int64)
    for members, label in zip(groups, labels):
      device[members] = label
    if not pipeline.violations(workload, device):
      best = min(best, pipeline.max_load(workload, device))
  return best


@settings(max_examples=40, deadline=None)
@given(small_workloads())
def test_cpsat_finds_the_optimum_and_its_bound_never_exceeds_it(text):
  workload = parsed_or_none(text)
  if workload is None:
    return
  optimum = brute_force_optimum(workload)
  solved = pipeline_cpsat.solve(workload, time_limit=5.0, workers=1)
  assert solved.lower_bound <= optimum + 1e-9
  if np.isfinite(optimum):
    assert solved.status == "OPTIMAL"
    # Times are rounded down to a millionth of the largest load term, once per term.
    assert solved.max_load == pytest.approx(optimum, rel=1e-4, abs=1e-9)
    assert solved.lower_bound == pytest.approx(optimum, rel=1e-4, abs=1e-9)
    assert pipeline.violations(workload, solved.device) == []
    # OPTIMAL, and above the bound by the rounding only: proven (a 4-op workload once said
    # status OPTIMAL, proven_optimal false, its bound 4.69987 against 4.7).
    assert solved.proven


@settings(max_examples=60, deadline=None)
@given(small_workloads(), st.integers(0, 2 ** 31))
def test_a_random_unit_order_is_a_topological_order_of_every_unit(text, seed):
  workload = parsed_or_none(text)
  if workload is None:
    return
  units = pipeline_dp.units_of(workload)
  order = pipeline_linear.random_unit_order(workload, seed)
  position = {int(m[0]): k for k, m in enumerate(order)}
  assert sorted(position) == sorted(int(m[0]) for m in units.members)
  for unit, mask in enumerate(units.pred_mask):
    for pred in range(len(units.members)):
      if mask >> pred & 1:
        assert position[int(units.members[pred][0])] < position[int(units.members[unit][0])]
  split = pipeline_linear.for_latency(workload, order)
  if np.isfinite(split.max_load):
    assert blocks.violations(workload, split.device) == []


def test_an_infeasible_answer_keeps_the_bound_and_a_zero_bound_says_the_gap_is_unknown():
  from regal.app import pipeline_lib
  unpackable = profiled.parse_workload(workload_text(
      [node(i, 1.0, cpu=0.0, size=6) for i in range(3)], [], cap=10.0, cpus=0))
  data = pipeline_lib.run(unpackable, pipeline_methods.SplitConfig(evals=100))
  assert not data.feasible and data.gap is None and not data.proven_optimal
  assert data.lower_bound == pipeline.lower_bound(unpackable)
  transfers_only = profiled.parse_workload(workload_text(
      [node(1, 0.0, cpu=0.0, size=6), node(2, 0.0, cpu=0.0, size=6)], [edge(1, 2, 2.0)],
      cap=10.0, cpus=0))
  data = pipeline_lib.run(transfers_only, pipeline_methods.SplitConfig(evals=100))
  assert data.objective == 2.0 and data.lower_bound == 0.0 and data.gap is None
  assert "gap to the lower bound 0: unknown" in pipeline_lib.summary(data)


def test_the_default_throughput_budget_grows_with_the_classes():
  """4M moves, or 16K a co-location class when that is more (a 2,142-op graph of 494 classes
  ended at its start with 4M); --evals replaces it."""
  def chain(length):
    return profiled.parse_workload(workload_text(
        [node(i, 1.0) for i in range(length)],
        [edge(i, i + 1, 0.5) for i in range(length - 1)], cap=1e9))
  config = pipeline_methods.SplitConfig()
  assert config.budget(chain(10)) == 4_000_000
  assert config.budget(chain(300)) == 300 * 16_000
  assert pipeline_methods.SplitConfig(evals=7).budget(chain(300)) == 7
  assert pipeline_methods.SplitConfig(objective="latency").budget(chain(300)) == 100_000


def test_the_default_search_of_a_tiny_workload_stops_after_its_rounds():
  """Three ops: a round scores a handful of moves, so 4M moves would take a minute of rounds;
  the default stops after 10,000 rounds, --evals has no such cap."""
  from regal.app import pipeline_lib
  workload = profiled.parse_workload(workload_text(
      [node(i, 1.0) for i in range(3)], [edge(0, 1, 0.5), edge(1, 2, 0.5)], cap=1e9))
  data = pipeline_lib.run(workload, pipeline_methods.SplitConfig())
  assert data.details["rounds"] == 10_000 and data.evaluations < 4_000_000
  assert data.objective == 2.5 and data.feasible  # Two ops and a send on one accelerator.
  assert pipeline_methods.SplitConfig(evals=5).max_rounds is None
