"""The group island (issue 68) and its parameter-free split: a confined population keeps every
op inside its link group, the stage-balanced split is even per stage and a local optimum of
the cut (checked against a slow reference that recomputes the cut for every move), and the
island spends only what it plans, all of it counted in the run's budget."""
import dataclasses

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

import regal_brkga as brkga
from regal_datasets import devices as devices_lib
from regal_datasets import errors, sharded
from regal_datasets.synthetic import sized_graph
from regal.baselines import enumerative, partition
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.search import brkga_search, guides
from graph_strategies import dags


def test_a_confined_population_keeps_every_op_inside_its_group():
  problem = performance.Problem(sized_graph(30, seed=1), devices_lib.nvlink_two_groups(3),
                                model="wc")
  op_group = np.random.default_rng(0).integers(0, 2, problem.graph.num_ops)
  q, mean, spread = guides.confinement_prior(problem, op_group)
  params = brkga_search.default_params(problem, 2000).replace(
      prior_q=q, prior_mean=mean, prior_spread=spread)
  population = brkga.initial_population(jax_key(3), params, problem.layout.size)
  placements = np.asarray(chromosome_lib.decode(population.reshape(-1, problem.layout.size),
                                                problem.layout).placement)
  group = devices_lib.link_groups(problem.devices)
  assert (group[placements] == op_group[None, :]).all()
  assert len(np.unique(placements)) == 6  # Free inside the groups.
  unconfined = brkga.initial_population(jax_key(3), params.replace(prior_q=0 * q),
                                        problem.layout.size)
  placements = np.asarray(chromosome_lib.decode(unconfined.reshape(-1, problem.layout.size),
                                                problem.layout).placement)
  assert (group[placements] != op_group[None, :]).any()


def jax_key(seed):
  import jax
  return jax.random.key(seed)


def _stages(graph):
  computing = np.asarray(graph.compute_cost) > 0
  return [[op for op in stage if computing[op]]
          for stage in enumerative.meta_op_groups(graph)[0]]


def _check_local_optimum(graph, part, num_parts):
  """Slow reference: every stage even, and no single move the split's search makes (a swap of
  two of a stage's computing ops, an op that computes nothing moved) lowers the cut."""
  cut = partition.cut_bytes(graph, part)
  slack = 1e-6 * (1 + float(np.sum(graph.edge_bytes)))
  for stage in _stages(graph):
    counts = np.bincount(part[stage], minlength=num_parts)
    if len(stage) > 1:
      assert counts.max() - counts.min() <= 1, stage
      for i, a in enumerate(stage):
        for b in stage[i + 1:]:
          swapped = part.copy()
          swapped[[a, b]] = part[[b, a]]
          assert partition.cut_bytes(graph, swapped) >= cut - slack, (a, b)
  for op in np.flatnonzero(np.asarray(graph.compute_cost) <= 0):
    for other in range(num_parts):
      moved = part.copy()
      moved[op] = other
      assert partition.cut_bytes(graph, moved) >= cut - slack, op


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(dags(min_ops=2, max_ops=14), st.integers(2, 3), st.integers(0, 9))
def test_the_stage_balanced_split_is_even_per_stage_and_a_local_optimum_of_the_cut(
    graph, num_parts, seed):
  part = partition.stage_balanced_split(graph, num_parts, np.random.default_rng(seed),
                                        restarts=3)
  assert part.shape == (graph.num_ops,) and 0 <= part.min() <= part.max() < num_parts
  _check_local_optimum(graph, part, num_parts)


def test_on_a_sharded_workload_every_stage_works_on_both_groups_where_metis_serializes():
  graph = sharded.generate("chain_mm", 8)
  part = partition.stage_balanced_split(graph, 2, np.random.default_rng(0), restarts=5)
  _check_local_optimum(graph, part, 2)
  metis = partition.balanced_partition(graph, 2)
  shard_stages = [s for s in _stages(graph) if len(s) > 1]
  assert all(np.bincount(part[s], minlength=2).min() == len(s) // 2 for s in shard_stages)
  assert any(len(set(metis[s].tolist())) == 1 for s in shard_stages)


def _grouped_problem(model="sync"):
  return performance.Problem(sized_graph(30, seed=2), devices_lib.nvlink_two_groups(2),
                             model=model)


def test_an_island_spends_what_it_plans_and_the_run_stays_in_its_budget():
  problem = _grouped_problem()
  evals = 6000
  island = guides.GroupIsland(evals, candidates=2, island_share=0.1, free_share=0.2)
  planned = island.planned_evaluations(problem)
  assert planned == 2 * 600 + 1200
  seeded = guides.guidance(problem, 5, [guides.HeuristicSeeds()])
  guided = island.guide(problem, 5, seeded)
  assert 0 < guided.evaluations <= planned
  assert set(guided.seeds) == set(seeded.seeds) | {"island/split", "island/free"}
  runs = guided.details["island"]["islands"] + [guided.details["island"]["free"]]
  assert len(runs) == 3 and sum(run["evaluations"] for run in runs) == guided.evaluations
  again = guides.guidance(problem, 5, [guides.HeuristicSeeds(), island])
  for name in guided.seeds:
    np.testing.assert_array_equal(again.seeds[name], guided.seeds[name])
  assert guides.run_guided(problem, evals, 5, guided).evaluations <= evals


def test_an_island_keeps_a_given_split_and_does_nothing_on_one_group():
  problem = _grouped_problem()  # sync: no climbs, so the island cannot leave its split.
  placement = np.random.default_rng(1).integers(0, 4, problem.graph.num_ops)
  island = guides.GroupIsland(6000, split=tuple(int(d) for d in placement), free_share=0.0)
  assert island.planned_evaluations(problem) == 300
  guided = island.guide(problem, 0, guides.Guidance())
  devices, _ = chromosome_lib.assignment(guided.seeds["island/split"], problem.layout)
  group = devices_lib.link_groups(problem.devices)
  np.testing.assert_array_equal(group[devices], group[placement])
  assert "island/free" not in guided.seeds
  flat = dataclasses.replace(problem, devices=devices_lib.homogeneous(4))
  before = guides.guidance(flat, 0, [guides.HeuristicSeeds()])
  assert guides.GroupIsland(6000).planned_evaluations(flat) == 0
  assert guides.GroupIsland(6000).guide(flat, 0, before) is before


def test_a_bad_island_is_refused():
  with pytest.raises(errors.ConfigError, match="unknown split"):
    guides.GroupIsland(1000, split="halves")
  with pytest.raises(errors.ConfigError, match="shares that leave"):
    guides.GroupIsland(1000, candidates=4, island_share=0.2, free_share=0.3)
  with pytest.raises(errors.ConfigError, match="needs a device"):
    guides.GroupIsland(1000, split=(0, 1)).splits(_grouped_problem(), 0)
