"""regal.search.guides and the REGAL guide: an untrained policy steers nothing (the guided
search is the unguided one, bit for bit), a guide's evaluations come out of the budget, and
regal.optimize --policy runs one search within it (the unguided one only on request, apart)."""
import dataclasses

import jax
import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets.synthetic import sized_graph
from regal.app import methods, optimize_lib
from regal.learning import checkpoint, policy_runner, reinforce
from regal.learning import workdir as workdir_lib
from regal.learning import policy as policy_lib
from regal.learning.configs import default as default_config
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.search import guides


def _untrained(workdir: str, model: str = "sync") -> str:
  """`workdir`, holding an untrained policy's checkpoint for `model` (as a run's first step
  would start)."""
  config = default_config.get_config("test")
  config.model = model
  problem = performance.Problem(sized_graph(20, seed=1), devices_lib.homogeneous(2),
                                model=model)
  example = policy_runner.padded_graph(problem, policy_runner.feature_seeds(problem))
  state = reinforce.init_state(jax.random.key(0), example, config.num_devices,
                               policy_lib.PolicyConfig(**config.policy.to_dict()),
                               reinforce.TrainConfig())
  checkpoint.save(checkpoint.in_workdir(workdir), state,
                  {"step": 0, "config": workdir_lib.fingerprint(config),
                   "config_values": config.to_dict(), "history": []})
  return workdir


@pytest.fixture(scope="module")
def untrained_workdir(tmp_path_factory):
  """A workdir holding an untrained policy for the sync model."""
  return _untrained(str(tmp_path_factory.mktemp("untrained")))


@pytest.mark.parametrize("model", ["sync", "wc"])
def test_an_untrained_policy_is_the_unguided_search_bit_for_bit(tmp_path, model):
  graph = sized_graph(40, seed=3)
  runs = [
      optimize_lib.run(graph, devices_lib.homogeneous(2), methods.RunConfig(
          model=model, evals=2000, seed=4, brkga=methods.BrkgaOptions(policy_dir=policy))).result
      for policy in (None, _untrained(str(tmp_path), model))
  ]
  plain, guided = runs
  assert guided.details["steered_genes"] == 0
  for key in ("objective", "placement", "schedule", "evaluations"):
    assert getattr(guided, key) == getattr(plain, key), key
  assert guided.details["winner_origin"] == plain.details["winner_origin"]


def test_steering_changes_the_search_and_the_unguided_comparison_is_apart(untrained_workdir):
  """A policy that steers (here: every gene concentrated) gives another search; with
  compare_unguided the unguided search is reported apart and never becomes the answer."""
  problem = performance.Problem(sized_graph(40, seed=3), devices_lib.homogeneous(2),
                                model="sync")
  seeded = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
  size = problem.layout.size
  steered = dataclasses.replace(seeded, mutant_alpha=np.full(size, 50.0, np.float32),
                                mutant_beta=np.full(size, 0.5, np.float32))
  plain = guides.run_guided(problem, 2000, 4, seeded)
  other = guides.run_guided(problem, 2000, 4, steered)
  assert not np.array_equal(plain.history, other.history)
  assert plain.evaluations <= 2000 and other.evaluations <= 2000
  report = optimize_lib.run(
      problem.graph, problem.devices,
      methods.RunConfig(model="sync", evals=2000, seed=4,
                        brkga=methods.BrkgaOptions(policy_dir=untrained_workdir,
                                                   compare_unguided=True))).result
  unguided = report.details["unguided"]
  assert unguided["objective"] == report.objective  # Untrained: the same search.
  assert 0 < unguided["evaluations"] <= 2000 and report.evaluations <= 2000


def test_a_guides_evaluations_come_out_of_the_budget():
  problem = performance.Problem(sized_graph(30, seed=2), devices_lib.homogeneous(2), model="wc")
  seeded = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
  spent = 700
  result = guides.run_guided(problem, 2000, 1, dataclasses.replace(seeded, evaluations=spent))
  alone = guides.run_guided(problem, 2000 - spent, 1, seeded)
  assert result.evaluations == alone.evaluations + spent <= 2000
  with pytest.raises(errors.ConfigError, match="leaves 10 evaluations for BRKGA"):
    guides.run_guided(problem, 2000, 1, dataclasses.replace(seeded, evaluations=1990))


def test_a_group_split_keeps_each_ops_group_and_draws_the_device_inside_it():
  """`GroupSplit`'s seed: every op on the given placement's link group, the device inside
  drawn by the seed (each device of a group used somewhere, different seeds differing),
  priorities in topological order; it spends nothing; a placement of the wrong size or with
  an unknown device is refused."""
  graph = sized_graph(60, seed=3)
  problem = performance.Problem(graph, devices_lib.nvlink_two_groups(3), model="wc")
  placement = np.random.default_rng(7).integers(0, 6, graph.num_ops)
  guide = guides.GroupSplit(tuple(int(d) for d in placement))
  assert guide.planned_evaluations(problem) == 0
  drawn = {}
  for seed in (0, 1):
    guided = guides.guidance(problem, seed, [guides.HeuristicSeeds(("single_device",)), guide])
    assert set(guided.seeds) == {"single_device", "group_split"} and guided.evaluations == 0
    devices, order = chromosome_lib.assignment(guided.seeds["group_split"], problem.layout)
    np.testing.assert_array_equal(devices // 3, placement // 3)
    np.testing.assert_array_equal(order, graph.topological_order)
    assert set(devices.tolist()) == set(range(6))
    drawn[seed] = devices
  assert (drawn[0] != drawn[1]).any()
  homogeneous = dataclasses.replace(problem, devices=devices_lib.homogeneous(6))
  spread = guides.group_split_chromosome(homogeneous, placement, np.random.default_rng(0))
  assert (chromosome_lib.assignment(spread, problem.layout)[0] != placement).any()
  for bad in (placement[:-1], np.where(placement == 0, 6, placement), placement - 1.0):
    with pytest.raises(errors.ConfigError, match="a group split needs a device"):
      guides.group_split_chromosome(problem, bad, np.random.default_rng(0))


def test_the_bottom_level_prior_steers_priority_genes_only_toward_the_upward_rank():
  from regal_datasets import analysis
  problem = performance.Problem(sized_graph(30, seed=2), devices_lib.homogeneous(2),
                                model="wc")
  layout = problem.layout
  steered = guides.BottomLevelPrior(q=0.4, spread=0.3).guide(problem, 0, guides.Guidance())
  assert steered.evaluations == 0 and not steered.seeds
  q = steered.prior_q
  assert np.all(q[layout.priority_slice] == np.float32(0.4))
  assert not np.any(np.delete(q, np.arange(layout.size)[layout.priority_slice]))
  # A higher bottom level: a larger key (earlier in the priority order), ties by op id.
  levels = analysis.mean_bottom_levels(problem.graph, problem.devices)
  order = chromosome_lib.priority_order(steered.prior_mean[layout.priority_slice])
  assert np.all(np.diff(np.asarray(levels)[order]) <= 1e-9)
  # The search runs with it: the same budget, another answer's path (common random numbers
  # hold only for the genes it leaves).
  plain = guides.run_guided(problem, 1000, 0, guides.Guidance())
  prior = guides.run_guided(problem, 1000, 0, steered)
  assert prior.evaluations <= 1000 and plain.evaluations <= 1000
  assert not np.array_equal(plain.history, prior.history)


def test_a_policy_trained_on_another_model_is_refused(untrained_workdir):
  """A sync-trained policy does not steer a WC or delay search: its genes meant what the sync
  model scores (one line, before the search)."""
  for model in ("wc", "delay"):
    with pytest.raises(errors.ConfigError, match=f"trained on the sync model; this search "
                                                 f"scores with {model}"):
      optimize_lib.run(sized_graph(20, seed=1), devices_lib.homogeneous(2), methods.RunConfig(
          model=model, evals=500, brkga=methods.BrkgaOptions(policy_dir=untrained_workdir)))


def test_a_budget_too_small_for_the_group_islands_names_the_runs_budget():
  """`--prior group_island --evals 300`: the islands' 5% shares are below one population; the
  error names the run's budget and the least that works, not an island's own."""
  with pytest.raises(errors.ConfigError, match=r"--evals 300 is too few for the group islands"
                                               r".*give --evals \d+ or more"):
    optimize_lib.run(sized_graph(40, seed=1), devices_lib.nvlink_two_groups(4),
                     methods.RunConfig(evals=300, brkga=methods.BrkgaOptions(prior="group_island")))
