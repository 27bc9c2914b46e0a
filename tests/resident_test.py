"""regal.scoring.resident (issue 83): a split graph's parameters count in the peak memory of
every device holding a reader, in the batched form (numpy and JAX) as in the readable
reference, in every scorer's objective and in the reported schedule; and on accelerators the
default objective keeps the plan within their memory."""
import hypothesis
import hypothesis.strategies as st
import jax.numpy as jnp
import numpy as np
import pytest

from regal.parallelism import hardware, roofline, shard_imported
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import models, performance, resident
from regal_datasets import zoo


@pytest.fixture(scope="module")
def split_block():
  """A Llama block split two ways on its batch, costed on two H100s."""
  graph = zoo.model_graph("llama_block", batch=2, seq_len=64)
  split = shard_imported.shard(graph, 2, shard_imported.data_parallel_choice(graph, 2))
  return roofline.recost(split, hardware.resolve(2, None, "h100"))


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(reads=st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)),
                                          max_size=3), min_size=1, max_size=8),
                  devices=st.integers(1, 4), seed=st.integers(0, 2 ** 31 - 1))
def test_the_batched_bytes_equal_the_reference(reads, devices, seed):
  """Random reads (tensor, region) of random sizes by random ops, random placements: each
  device holds each distinct region its ops read, once."""
  sizes = {(t, r): float(1 + 7 * t + 3 * r) for t in range(4) for r in range(3)}
  metadata = {"resident_reads": [[[t, [[r, r + 1]], sizes[t, r]] for t, r in op]
                                 for op in reads]}

  class Graph:  # Only the metadata is read.
    pass
  graph = Graph()
  graph.metadata = metadata
  found = resident.of(graph)
  placements = np.random.default_rng(seed).integers(0, devices, (5, len(reads)))
  expected = np.array([resident.held_bytes(graph, p, devices) for p in placements])
  if found is None:
    assert not expected.any()
    return
  np.testing.assert_array_equal(found.per_device(placements, devices), expected)
  np.testing.assert_array_equal(
      np.asarray(found.per_device(jnp.asarray(placements), devices)), expected)


def test_every_scorer_and_the_schedule_count_the_parameters(split_block):
  graph, devices = split_block
  held = resident.of(graph)
  assert held is not None and held.region_bytes.sum() > 1e6  # The block's weights.
  chromosomes = np.random.default_rng(0).random((4, performance.Problem(
      graph, devices).layout.size), np.float32)
  scores = {engine: np.asarray(performance.make_fitness_fn(performance.Problem(
      graph, devices, objective="memory", engine=engine))(jnp.asarray(chromosomes)))
            for engine in ("jax", "native")}
  problem = performance.Problem(graph, devices, objective="memory")
  for k, chromosome in enumerate(chromosomes):
    value, schedule = performance.score_reference(problem, chromosome)
    decoded = chromosome_lib.decode(chromosome, problem.layout)
    arrays = [np.asarray(a) for a in decoded[:3]]
    alone = models.get("wc").reference(graph, devices, *arrays, problem.dtype)
    np.testing.assert_allclose(np.asarray(schedule.peak_memory, float) - alone.peak_memory,
                               resident.held_bytes(graph, arrays[0], 2), rtol=1e-5)
    for engine, found in scores.items():
      assert found[k] == pytest.approx(value, rel=1e-6), engine


def test_on_accelerators_the_plan_must_fit_by_default(tmp_path):
  """No --objective on H100s: the makespan under their memory, the parameters in each peak
  (the summary says what each device holds); a cap below the parameters is infeasible (exit
  3, what is over where); on abstract devices the default stays the makespan."""
  import json
  from cli_test import run
  graph_file = tmp_path / "gpt2.json"
  made = run("regal_datasets.zoo", "--model", "gpt2_small", "--batch", "4", "--seq_len", "32",
             "--layers", "1", "--out", str(graph_file))
  assert made.returncode == 0, made.stderr
  common = ["regal.optimize", "--graph", str(graph_file), "--devices", "2", "--device_preset",
            "h100", "--shard", "2", "--evals", "200"]
  done = run(*common, "--out", str(tmp_path / "fits.json"))
  assert done.returncode == 0, done.stderr
  fits = json.loads((tmp_path / "fits.json").read_text())
  assert fits["settings"]["objective"] == "runtime_under_memory" and fits["feasible"]
  held = fits["sharding"]["resident_parameter_bytes"]
  assert min(held) > 1e6 and all(p >= h for p, h in zip(fits["peak_memory"], held))
  assert "parameters held [" in done.stdout
  capped = run(*common, "--memory_limit", str(min(held) / 2), "--out",
               str(tmp_path / "capped.json"))
  assert capped.returncode == 3, capped.stderr
  assert "INFEASIBLE" in capped.stdout and "excess per device" in capped.stdout
  abstract = run("regal.optimize", "--graph", str(graph_file), "--devices", "2", "--evals",
                 "50", "--out", str(tmp_path / "abstract.json"))
  assert abstract.returncode == 0, abstract.stderr
  assert json.loads((tmp_path / "abstract.json").read_text())["settings"]["objective"] == (
      "runtime")
