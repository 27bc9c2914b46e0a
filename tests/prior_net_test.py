"""regal.learning.prior_net and prior_policy: losses against slow readable references, the
placement loss invariant under relabelling devices and groups, labels that reproduce the long
run's schedule, the prior's genes, and training that fits its labels."""
import itertools

import jax
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import regal_brkga as brkga
from regal_datasets import devices as devices_lib
from regal_datasets.synthetic import sized_graph
from regal.learning import policy as policy_lib
from regal.learning import prior_net, prior_policy
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.scoring.delay import reference as delay_reference
from regal.search import guides

SMALL = policy_lib.PolicyConfig(hidden=16, rounds=2)


def _outputs(rng, nodes, k):
  return prior_net.PriorOutputs(rng.normal(size=nodes), rng.uniform(0.1, 2.0, nodes),
                                rng.normal(size=(nodes, k)))


def _slow_class_loss(outputs, classes, mask, graph_of, k):
  """Per graph: the cross-entropy under each relabelling, the smallest kept; summed over
  graphs, over real nodes."""
  total = 0.0
  for g in sorted(set(graph_of[mask].tolist())):
    best = np.inf
    for perm in itertools.permutations(range(k)):
      loss = 0.0
      for n in np.flatnonzero(mask & (graph_of == g)):
        logits = np.asarray(outputs.class_logits[n], np.float64)
        log_p = logits - np.log(np.exp(logits).sum())
        loss -= log_p[perm[classes[n]]]
      best = min(best, loss)
    total += best
  return total / mask.sum()


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5), st.lists(st.integers(1, 6), min_size=1, max_size=4),
       st.integers(0, 2 ** 31 - 1))
def test_class_loss_matches_the_slow_reference_and_ignores_relabelling(k, sizes, seed):
  rng = np.random.default_rng(seed)
  nodes = sum(sizes) + 2  # Two padding nodes.
  graph_of = np.concatenate([np.repeat(np.arange(len(sizes)), sizes), [len(sizes)] * 2])
  mask = np.arange(nodes) < sum(sizes)
  classes = rng.integers(0, k, nodes)
  outputs = _outputs(rng, nodes, k)
  loss = float(prior_net.class_loss(outputs, classes, mask, graph_of, len(sizes) + 1))
  np.testing.assert_allclose(loss, _slow_class_loss(outputs, classes, mask, graph_of, k),
                             rtol=1e-5)
  relabelled = classes.copy()
  for g in range(len(sizes)):  # Each graph's classes permuted its own way.
    perm = rng.permutation(k)
    relabelled[graph_of == g] = perm[classes[graph_of == g]]
  np.testing.assert_allclose(
      float(prior_net.class_loss(outputs, relabelled, mask, graph_of, len(sizes) + 1)), loss,
      rtol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 4), st.integers(0, 2 ** 31 - 1))
def test_the_hungarian_choice_equals_trying_every_relabelling(k, seed):
  """Past `MAX_ENUMERATED` classes the loss takes the Hungarian method's relabelling: on
  class counts both paths handle, they agree."""
  rng = np.random.default_rng(seed)
  graph_of = np.repeat(np.arange(3), 5)
  mask = np.ones(15, bool)
  classes = rng.integers(0, k, 15)
  outputs = _outputs(rng, 15, k)
  enumerated = float(prior_net.class_loss(outputs, classes, mask, graph_of, 3))
  original = prior_net.MAX_ENUMERATED
  try:
    prior_net.MAX_ENUMERATED = 1
    hungarian = float(prior_net.class_loss(outputs, classes, mask, graph_of, 3))
  finally:
    prior_net.MAX_ENUMERATED = original
  np.testing.assert_allclose(hungarian, enumerated, rtol=1e-5)


def test_eight_classes_train_through_the_hungarian_choice():
  rng = np.random.default_rng(0)
  outputs = _outputs(rng, 16, 8)
  classes = rng.integers(0, 8, 16)
  grad = jax.grad(lambda logits: prior_net.class_loss(
      outputs._replace(class_logits=logits), classes, np.ones(16, bool), np.zeros(16, int),
      1))(outputs.class_logits)
  assert np.all(np.isfinite(grad)) and np.abs(grad).sum() > 0


def test_key_loss_is_the_logit_normal_likelihood():
  rng = np.random.default_rng(0)
  outputs = _outputs(rng, 5, 2)
  key = rng.uniform(0.05, 0.95, 5)
  mask = np.array([True, True, True, False, True])
  z = np.log(key / (1 - key))
  mu, sigma = np.asarray(outputs.key), np.asarray(outputs.key_spread)
  # The logit-normal density: N(z; mu, sigma) / (key (1 - key)); the last factor and the
  # constant do not depend on the parameters and are left out.
  nll = -(-0.5 * np.log(2 * np.pi) - np.log(sigma) - 0.5 * ((z - mu) / sigma) ** 2)
  reference = (nll - 0.5 * np.log(2 * np.pi))[mask].mean()
  np.testing.assert_allclose(float(prior_net.key_loss(outputs, key, mask)), reference,
                             rtol=1e-5)


def test_placement_classes_are_groups_on_grouped_devices_else_devices():
  assert prior_net.placement_classes(devices_lib.homogeneous(4)).tolist() == [0, 1, 2, 3]
  grouped = devices_lib.nvlink_two_groups(4)
  classes = prior_net.placement_classes(grouped)
  assert classes.tolist() == devices_lib.link_groups(grouped).tolist()
  assert prior_net.num_classes(grouped) == 2


def _problem(ops=12, seed=3, devices=None):
  graph = sized_graph(ops, seed)
  return performance.Problem(graph, devices or devices_lib.homogeneous(2), model="sync")


def test_labels_reproduce_the_answers_schedule_and_placement():
  problem = _problem()
  answer = np.random.default_rng(1).uniform(size=problem.layout.size).astype(np.float32)
  key, classes = prior_policy.labels(problem, answer)
  placement, _ = chromosome_lib.assignment(answer, problem.layout)
  assert classes.tolist() == placement.tolist()
  assert np.all((key > 0) & (key < 1))
  priority = chromosome_lib.decode(answer, problem.layout).op_priority
  schedule = delay_reference.priority_topological_order(problem.graph, priority)
  assert list(delay_reference.priority_topological_order(problem.graph, key)) == \
      list(schedule)


def test_the_prior_steers_priorities_and_affinities_by_class():
  problem = _problem(devices=devices_lib.nvlink_two_groups(4))
  layout = problem.layout
  rng = np.random.default_rng(2)
  outputs = _outputs(rng, layout.num_ops, 2)
  q, mean, spread = prior_net.steered_keys(outputs, layout.num_ops, layout, problem.devices,
                                           0.4)
  assert np.all(q[layout.priority_slice] == np.float32(0.4))
  assert np.all(q[layout.affinity_slice] == np.float32(0.4))
  assert np.all(q[layout.transfer_slice] == 0)
  np.testing.assert_allclose(mean[layout.priority_slice],
                             jax.nn.sigmoid(outputs.key), rtol=1e-6)
  np.testing.assert_allclose(spread[layout.priority_slice], outputs.key_spread, rtol=1e-6)
  affinity = mean[layout.affinity_slice].reshape(layout.num_ops, -1)
  groups = devices_lib.link_groups(problem.devices)
  probability = np.asarray(jax.nn.softmax(outputs.class_logits))
  for d in range(8):  # Devices of one group alike, at their group's probability.
    np.testing.assert_allclose(affinity[:, d],
                               prior_net.affinity_means(probability[:, groups[d]]), rtol=1e-6)


def test_a_prior_guide_spends_nothing_and_q_zero_is_the_unguided_search():
  problem = _problem(ops=20)
  seeded = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
  answer = guides.run_guided(problem, 600, 5, seeded).best_chromosome
  oracle = lambda p: prior_policy.label_outputs(p, answer)  # noqa: E731
  unguided = guides.run_guided(problem, 500, 7, seeded)
  off = prior_policy.PriorGuide(oracle, 0.0).guide(problem, 7, seeded)
  assert off.evaluations == 0
  same = guides.run_guided(problem, 500, 7, off)
  np.testing.assert_array_equal(same.best_chromosome, unguided.best_chromosome)
  on = guides.run_guided(problem, 500, 7, prior_policy.PriorGuide(oracle, 1.0).guide(
      problem, 7, seeded))
  assert on.evaluations <= 500 and unguided.evaluations <= 500
  assert not np.array_equal(on.best_chromosome, unguided.best_chromosome)


def test_training_fits_the_labels():
  problems = [_problem(ops=16, seed=s) for s in range(3)]
  rng = np.random.default_rng(0)
  answers = [rng.uniform(size=p.layout.size).astype(np.float32) for p in problems]
  data = prior_policy.batch(problems, answers)
  net = prior_net.PriorNet(SMALL, 2)
  start = net.init(jax.random.PRNGKey(0), data.graph)
  before = float(prior_net.loss_fn(start, net, data)[0])
  params, history = prior_policy.train(net, data, data, prior_policy.TrainSettings(steps=150))
  after = float(prior_net.loss_fn(params, net, data)[0])
  assert after < before - 0.3, (before, after)
  assert history and np.isclose(min(v for _, _, v in history), after, rtol=1e-5)


def test_brkga_prior_draws_around_the_mean():
  """The sampler the network's key distribution is trained for: logit-normal around the mean."""
  params = brkga.Params(population_size=8, num_elites=2, num_mutants=2,
                        prior_q=np.float32(1.0), prior_mean=np.float32(0.8),
                        prior_spread=np.float32(0.5))
  keys = brkga.with_prior(jax.random.PRNGKey(0), np.full((4000, 1), 0.5, np.float32), params)
  z = np.log(np.asarray(keys) / (1 - np.asarray(keys)))
  np.testing.assert_allclose(z.mean(), np.log(4), atol=0.05)
  np.testing.assert_allclose(z.std(), 0.5, atol=0.05)


def test_calibrated_affinities_place_an_op_with_its_predicted_probability():
  """On two devices the prior's affinity keys put an op on a device as often as the network
  predicts; the sharp mapping puts it on the likelier one almost always."""
  p = np.array([0.2, 0.5, 0.8, 0.95])
  probability = np.stack([p, 1 - p], axis=1)  # [ops, 2]
  draws = 20000
  for how, expected in (("calibrated", p), ("sharp", (p > 0.5) + 0.5 * (p == 0.5))):
    mean = prior_net.affinity_means(probability, how).ravel().astype(np.float32)
    params = brkga.Params(population_size=8, num_elites=2, num_mutants=2,
                          prior_q=np.float32(1.0), prior_mean=mean,
                          prior_spread=np.float32(prior_net.AFFINITY_SPREAD))
    keys = brkga.with_prior(jax.random.PRNGKey(1), np.full((draws, mean.size), 0.5,
                                                           np.float32), params)
    keys = np.asarray(keys).reshape(draws, len(p), 2)
    on_first = (keys[..., 0] > keys[..., 1]).mean(axis=0)
    np.testing.assert_allclose(on_first, expected, atol=0.03 if how == "calibrated" else 0.06)


def test_prior_seeds_carry_the_predicted_order_and_split():
  problem = _problem(ops=14, devices=devices_lib.nvlink_two_groups(2))  # 4 devices, 2 groups.
  rng = np.random.default_rng(4)
  outputs = _outputs(rng, problem.graph.num_ops, 2)
  before = guides.guidance(problem, 0, [guides.HeuristicSeeds()])
  predicted = prior_policy.PriorGuide(lambda p: outputs, 1.0, seeds="predicted").guide(
      problem, 3, before)
  added = {k: v for k, v in predicted.seeds.items() if k not in before.seeds}
  assert list(added) == ["prior/predicted"] and predicted.evaluations == 0
  placement, order = chromosome_lib.assignment(added["prior/predicted"], problem.layout)
  num_ops = problem.graph.num_ops
  assert order.tolist() == np.lexsort((np.arange(num_ops), -np.asarray(outputs.key))).tolist()
  groups = devices_lib.link_groups(problem.devices)
  assert groups[placement].tolist() == np.argmax(outputs.class_logits, -1).tolist()
  each = prior_policy.PriorGuide(lambda p: outputs, 1.0, seeds="heuristics").guide(
      problem, 3, before)
  added = [k for k in each.seeds if k not in before.seeds]
  assert len(added) == len(before.seeds) and all(k.startswith("prior/") for k in added)
  assert guides.arm_of(added[0]) == "prior"
