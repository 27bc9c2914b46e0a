"""regal.learning.features, regal.learning.policy, regal.learning.reinforce: hand-checked features, exact dequantization,
normalized log-probabilities, finite gradients, and a bandit update toward the better arm."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets.graph import Graph
from regal_datasets.synthetic import sized_graph
from regal.learning import features, policy, reinforce
from regal.scoring import performance

SMALL = policy.PolicyConfig(hidden=16, rounds=2, placement_bins=2, priority_bins=4)


def hand_graph() -> Graph:
  # a (cost 2) -> t0 (4 bytes) -> b, c; c (cost 5) -> t1 (6 bytes) -> b; control a -> c;
  # b (cost 3) has 1 byte of extra memory.
  return Graph(op_names=["a", "b", "c"], op_types=[""] * 3, compute_cost=[2, 3, 5],
               extra_memory=[0, 1, 0], tensor_producer=[0, 2], tensor_size=[4, 6],
               data_edge_tensor=[0, 0, 1], data_edge_consumer=[1, 2, 1],
               control_edge_src=[0], control_edge_dst=[2])


def test_features_by_hand():
  graph = hand_graph()
  memory = features.memory_features(graph)
  np.testing.assert_allclose(memory, [[0, 4, 0, 0], [10, 0, 1, 0], [4, 6, 0, 1]])
  runtime = features.runtime_features(graph)
  np.testing.assert_allclose(runtime, [[0, 8, 2, 0], [7, 0, 3, 0], [2, 3, 5, 1]])
  senders, receivers, edges = features.edge_features(graph)
  assert senders.tolist() == [0, 0, 2, 0] and receivers.tolist() == [1, 2, 1, 2]
  np.testing.assert_allclose(edges, [[4, 0, 0], [4, 0, 0], [6, 0, 0], [0, 1, 0]])
  problem = performance.Problem(graph, devices_lib.homogeneous(2))
  tuple_ = features.graph_features(problem)
  # Sizes over the largest size (10), times over the largest time (8).
  np.testing.assert_allclose(tuple_.nodes[1], [1.0, 0, 0.1, 0, 7 / 8, 0, 3 / 8, 0, 0, 0, 0])
  memory_only = features.graph_features(performance.Problem(graph, devices_lib.homogeneous(2),
                                                            model="sync", objective="memory"))
  assert memory_only.nodes.shape == (3, 4 + 3)


def test_seed_features_are_shares_and_positions():
  from regal.learning import policy_runner
  problem = performance.Problem(sized_graph(10, seed=1), devices_lib.homogeneous(2))
  seeds = policy_runner.feature_seeds(problem)
  part = features.seed_features(problem, seeds)
  assert part.shape == (problem.graph.num_ops, 3)
  np.testing.assert_allclose(part[:, :2].sum(axis=1), 1.0, rtol=1e-6)
  assert (part[:, 2] >= 0).all() and (part[:, 2] <= 1).all()
  # The single-device seed alone: every op on device 0.
  single = {"single_device": seeds["single_device"]}
  np.testing.assert_array_equal(features.seed_features(problem, single)[:, 0], 1.0)


def test_brkga_features_by_hand():
  # op 0 -> op 2; op 1 is free. Priorities (0.9, 0.5, 0.1) schedule 0, 1, 2; (0.2, 0.8, 0.5)
  # schedule 1, then 0 (op 2 waits for its input despite outranking op 0), then 2.
  graph = Graph(op_names=["x", "y", "z"], op_types=[""] * 3, compute_cost=[1, 1, 1],
                extra_memory=[0] * 3, tensor_producer=[0], tensor_size=[1],
                data_edge_tensor=[0], data_edge_consumer=[2], control_edge_src=[],
                control_edge_dst=[])
  placement = np.array([[0, 1, 1], [0, 0, 1]])
  priority = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.5]])
  assert features.schedule_positions(graph, priority).tolist() == [[0, 1, 2], [1, 0, 2]]
  np.testing.assert_allclose(features.brkga_features(graph, placement, priority, 2),
                             [[1, 0, 0.25], [0.5, 0.5, 0.25], [0, 1, 1.0]])


def _slow_schedule_positions(graph: Graph, priority: np.ndarray) -> list[int]:
  done, order = set(), []
  while len(order) < graph.num_ops:
    ready = [op for op in range(graph.num_ops) if op not in done
             and all(int(p) in done for p in graph.predecessors(op))]
    op = max(ready, key=lambda v: (priority[v], -v))
    done.add(op)
    order.append(op)
  return [order.index(op) for op in range(graph.num_ops)]


def test_schedule_positions_match_a_one_solution_reference():
  graph = sized_graph(30, seed=3)
  priority = np.random.default_rng(0).random((5, graph.num_ops))
  positions = features.schedule_positions(graph, priority)
  for row in range(5):
    assert positions[row].tolist() == _slow_schedule_positions(graph, priority[row])


@pytest.mark.parametrize("bins", [2, 4, 16])
def test_dequantization_gives_the_binned_mean_and_variance(bins):
  for mean_bin, var_bin in itertools.product(range(bins), range(bins)):
    alpha, beta = (float(v) for v in policy.dequantize(mean_bin, var_bin, bins))
    assert alpha > 0 and beta > 0
    mean = alpha / (alpha + beta)
    var = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    expected_mean = (mean_bin + 0.5) / bins
    assert mean == pytest.approx(expected_mean)
    assert var == pytest.approx(expected_mean * (1 - expected_mean) * (var_bin + 0.5) / bins)


def _tiny_batch(num_graphs=2, ops=6):
  problems = [performance.Problem(sized_graph(ops, seed=s), devices_lib.homogeneous(2))
              for s in range(num_graphs)]
  graphs = [features.graph_features(p) for p in problems]
  return problems, policy.batch_graphs(graphs, node_bucket=64, edge_bucket=256)


def test_log_probabilities_are_normalized():
  graph = policy.batch_graphs([features.graph_features(performance.Problem(
      hand_graph().replace(compute_cost=np.array([1.0, 1, 1])), devices_lib.homogeneous(1)))],
      8, 8)
  config = policy.PolicyConfig(hidden=8, rounds=1, placement_bins=2, priority_bins=2)
  params = policy.Policy(config, 1).init(jax.random.key(0), graph)
  logits = policy.Policy(config, 1).apply(params, graph)
  total = 0.0
  # Node 0's four choices; a neutral mean (bin 0) chooses no variance.
  for bins in itertools.product(range(3), range(2), range(3), range(2)):
    if (bins[0] == policy.NEUTRAL and bins[1]) or (bins[2] == policy.NEUTRAL and bins[3]):
      continue
    actions = policy.greedy(logits)
    actions = policy.Actions(actions.placement_mean.at[0, 0].set(bins[0]),
                             actions.placement_var.at[0, 0].set(bins[1]),
                             actions.priority_mean.at[0].set(bins[2]),
                             actions.priority_var.at[0].set(bins[3]))
    total += float(jnp.exp(policy.node_log_prob(logits, actions)[0]))
  assert total == pytest.approx(1.0, rel=1e-5)


def test_gradients_are_finite_and_distributions_fit_the_layout():
  problems, graph = _tiny_batch()
  state = reinforce.init_state(jax.random.key(0), graph, 2, SMALL, reinforce.TrainConfig())
  logits = policy.Policy(SMALL, 2).apply(state.policy_params, graph)
  actions = policy.sample(jax.random.key(1), logits)
  mask = jnp.array([True, True, False])
  grads = jax.jit(jax.grad(reinforce.loss_fn), static_argnums=(5, 6, 7))(
      (state.policy_params, state.baseline_params), graph, actions,
      jnp.array([-1.0, -0.9, 0.0]), mask, 2, SMALL, reinforce.TrainConfig(entropy_weight=0.01))
  assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree_util.tree_leaves(grads))
  alpha, beta = policy.mutant_distributions(actions, problems[1].layout, SMALL,
                                            first_node=problems[0].graph.num_ops)
  layout = problems[1].layout
  assert alpha.shape == beta.shape == (layout.size,)
  assert (np.asarray(alpha[layout.transfer_slice]) == 1).all()
  assert (np.asarray(alpha) > 0).all() and (np.asarray(beta) > 0).all()


def test_one_update_moves_toward_the_better_arm():
  """A one-node bandit: placement mean bin 1 earns +0.5, bin 0 (neutral) -0.5; one step on both arms
  (the exact expected gradient at the start) must raise the better arm's probability."""
  graph = policy.batch_graphs([features.graph_features(performance.Problem(
      Graph(op_names=["x"], op_types=[""], compute_cost=[1.0], extra_memory=[0.0],
            tensor_producer=[], tensor_size=[], data_edge_tensor=[], data_edge_consumer=[],
            control_edge_src=[], control_edge_dst=[]), devices_lib.homogeneous(1)))] * 2, 4, 4)
  config = policy.PolicyConfig(hidden=8, rounds=1, placement_bins=2, priority_bins=2)
  train = reinforce.TrainConfig(learning_rate=0.05)
  state = reinforce.init_state(jax.random.key(3), graph, 1, config, train)

  def better_arm_probability(state):
    logits = policy.Policy(config, 1).apply(state.policy_params, graph)
    return float(jax.nn.softmax(logits.placement_mean[0, 0])[1])

  zeros = jnp.zeros(graph.nodes.shape[0], jnp.int32)
  actions = policy.Actions(jnp.array([0, 1] + [0] * (graph.nodes.shape[0] - 2))[:, None],
                           zeros[:, None], zeros, zeros)
  before = better_arm_probability(state)
  state, _ = reinforce.update(state, graph, actions, jnp.array([-0.5, 0.5, 0.0]),
                              jnp.array([True, True, False]), 1, config, train)
  assert better_arm_probability(state) > before


def test_leave_one_out_baseline_by_hand():
  rewards = np.array([1.0, 2.0, 3.0, 5.0, 4.0, 6.0])
  groups = np.array([0, 0, 0, 1, 2, 2])
  np.testing.assert_allclose(reinforce.leave_one_out(rewards, groups),
                             [2.5, 2.0, 1.5, 5.0, 6.0, 4.0])


def test_a_reference_equal_to_the_rewards_leaves_the_policy_alone():
  _, graph = _tiny_batch()
  config = SMALL
  train = reinforce.TrainConfig(learning_rate=0.05)
  state = reinforce.init_state(jax.random.key(0), graph, 2, config, train)
  actions = policy.sample(jax.random.key(1), policy.Policy(config, 2).apply(
      state.policy_params, graph))
  rewards = jnp.array([-1.3, -0.7, 0.0])
  mask = jnp.array([True, True, False])
  moved, _ = reinforce.update(state, graph, actions, rewards, mask, 2, config, train)
  still, _ = reinforce.update(state, graph, actions, rewards, mask, 2, config, train,
                              reference=rewards)
  def change(new):
    return max(float(jnp.abs(a - b).max()) for a, b in zip(
        jax.tree_util.tree_leaves(new.policy_params),
        jax.tree_util.tree_leaves(state.policy_params)))
  assert change(still) == 0.0 and change(moved) > 0.0


def test_reinforce_learns_a_per_gene_reward():
  """The whole update path (features, GNN, sampling, loss, Adam) finds what a synthetic reward
  favours: the share of ops whose device-0 affinity takes the high mean bin."""
  problems = [performance.Problem(sized_graph(20, seed=s), devices_lib.homogeneous(2))
              for s in range(4)]
  graph = policy.batch_graphs([features.graph_features(p) for p in problems], 128, 512)
  config = policy.PolicyConfig(hidden=16, rounds=1, initial_steer=0.5)
  train = reinforce.TrainConfig(learning_rate=3e-3)
  state = reinforce.init_state(jax.random.key(0), graph, 2, config, train)
  apply = jax.jit(policy.Policy(config, 2).apply)
  update = reinforce.update
  graph_of = np.repeat(np.arange(5), np.asarray(graph.n_node))
  mask = jnp.array([True] * 4 + [False])

  def high_share(actions):
    high = np.asarray(actions.placement_mean[:, 0] == config.placement_bins, float)
    return np.array([high[graph_of == k].mean() for k in range(4)])

  first = None
  for step in range(60):
    actions = policy.sample(jax.random.fold_in(jax.random.key(1), step),
                            apply(state.policy_params, graph))
    share = high_share(actions)
    first = share.mean() if first is None else first
    rewards = jnp.asarray(np.append(share - 1, 0), jnp.float32)
    state, _ = update(state, graph, actions, rewards, mask, 2, config, train,
                      jnp.full(5, share.mean() - 1, jnp.float32))  # The batch mean: b.
  assert first < 0.7 and share.mean() > 0.9


def test_an_untrained_policy_leaves_every_gene_uniform():
  """Zero last layer, neutral prior: the most likely action of every gene is neutral, so the
  mutant distributions are exactly uniform (alpha = beta = 1); sampled, about
  `initial_steer` of the genes are steered."""
  problems, graph = _tiny_batch()
  config = policy.PolicyConfig(hidden=16, rounds=2, initial_steer=0.2)
  state = reinforce.init_state(jax.random.key(0), graph, 2, config, reinforce.TrainConfig())
  logits = policy.Policy(config, 2).apply(state.policy_params, graph)
  alpha, beta = policy.mutant_distributions(policy.greedy(logits), problems[0].layout, config)
  assert (np.asarray(alpha) == 1).all() and (np.asarray(beta) == 1).all()
  sampled = policy.sample(jax.random.key(2), logits)
  steered = np.mean(np.asarray(sampled.placement_mean) != policy.NEUTRAL)
  assert 0.1 < steered < 0.3
  probability = jax.nn.softmax(logits.priority_mean, axis=-1)[:, policy.NEUTRAL]
  np.testing.assert_allclose(probability, 0.8, rtol=1e-5)


def test_guided_genes_get_their_bins_beta():
  actions = policy.Actions(jnp.array([[0, 1]]), jnp.array([[1, 0]]), jnp.array([3]),
                           jnp.array([2]))
  layout = performance.Problem(sized_graph(1), devices_lib.homogeneous(2)).layout
  config = policy.PolicyConfig(placement_bins=2, priority_bins=4)
  one = policy.Actions(*(a[:1] for a in actions))
  alpha, beta = policy.mutant_distributions(one, layout.__class__(1, 0, 2), config)
  expected = policy.dequantize(0, 0, 2)
  np.testing.assert_allclose(np.asarray(alpha)[:2], [1.0, expected[0]])
  np.testing.assert_allclose(np.asarray(beta)[:2], [1.0, expected[1]])
  np.testing.assert_allclose([float(alpha[2]), float(beta[2])], policy.dequantize(2, 2, 4))


def test_imitation_targets_steer_only_what_good_solutions_agree_on():
  """Two answers of a 3-op graph on 2 devices: ops 0 and 2 share their device, op 1 does not;
  priorities 0.9 / 0.95 share a bin of 4 (3), 0.1 / 0.6 lie two bins apart, 0.3 / 0.45 share bin 1."""
  from regal.scoring import chromosome as chromosome_lib
  layout = chromosome_lib.Layout(3, 0, 2)
  first = chromosome_lib.encode(np.array([1, 0, 0]), np.array([0, 1, 2]), layout)
  second = chromosome_lib.encode(np.array([1, 1, 0]), np.array([0, 1, 2]), layout)
  first[layout.priority_slice] = [0.9, 0.1, 0.3]
  second[layout.priority_slice] = [0.95, 0.6, 0.45]
  config = policy.PolicyConfig(placement_bins=2, priority_bins=4)
  targets = policy.imitation_targets([first, second], layout, config)
  high, low = config.placement_bins, 1
  assert np.asarray(targets.placement_mean).tolist() == [[low, high], [0, 0], [high, low]]
  assert np.asarray(targets.priority_mean).tolist() == [1 + 3, 0, 1 + 1]
  alpha, beta = policy.mutant_distributions(policy.Actions(*(jnp.asarray(t) for t in targets)),
                                            layout, config)
  mean = np.asarray(alpha) / (np.asarray(alpha) + np.asarray(beta))
  assert mean[1] > 0.5 > mean[0] and mean[4] > 0.5 > mean[5]  # Ops 0 and 2 pulled home.
  assert alpha[2] == beta[2] == alpha[3] == 1  # Op 1: uniform.


def test_imitation_moves_the_most_likely_actions_to_the_targets():
  problems, graph = _tiny_batch(num_graphs=1, ops=6)
  config = policy.PolicyConfig(hidden=16, rounds=1, placement_bins=2, priority_bins=4)
  state = reinforce.init_state(jax.random.key(0), graph, 2, config, reinforce.TrainConfig())
  nodes = graph.nodes.shape[0]
  real = problems[0].graph.num_ops
  rng = np.random.default_rng(0)
  targets = policy.Actions(jnp.asarray(rng.integers(0, 3, (nodes, 2)), jnp.int32),
                           jnp.zeros((nodes, 2), jnp.int32),
                           jnp.asarray(rng.integers(0, 5, nodes), jnp.int32),
                           jnp.zeros(nodes, jnp.int32))
  mask = jnp.arange(nodes) < real
  params = state.policy_params
  opt_state = reinforce.imitation_optimizer(1e-2).init(params)
  step = reinforce.imitation_step
  for _ in range(150):
    params, opt_state, loss = step(params, opt_state, graph, targets, mask, 2, config, 1e-2)
  greedy = policy.greedy(policy.Policy(config, 2).apply(params, graph))
  np.testing.assert_array_equal(np.asarray(greedy.placement_mean)[:real],
                                np.asarray(targets.placement_mean)[:real])
  np.testing.assert_array_equal(np.asarray(greedy.priority_mean)[:real],
                                np.asarray(targets.priority_mean)[:real])


def test_learning_table_statistics_by_hand():
  from regal_experiments import paired_stats
  rng = np.random.default_rng(0)
  constant = np.full((4, 3), 2.5)
  assert paired_stats.bootstrap_interval(constant, rng) == (2.5, 2.5)
  spread = np.array([[1.0, 3.0], [5.0, 7.0]])
  low, high = paired_stats.bootstrap_interval(spread, rng)
  assert 1.0 <= low < 4.0 < high <= 7.0
  rows = [{"unguided": [10.0, 10.0], "guided": [9.0, 11.0], "guided_evals_to_match": [5, 9],
           "guided_seconds": [1.0, 1.0], "unguided_seconds": [0.5, 0.5]},
          {"unguided": [20.0, 20.0], "guided": [19.0, 19.0], "guided_evals_to_match": [3, 3],
           "guided_seconds": [1.0, 1.0], "unguided_seconds": [0.5, 0.5]}]
  summary = paired_stats.summarize(rows, np.array([8.0, 18.0]))
  assert summary["mean_improvement_pct"] == pytest.approx((0.0 + 5.0) / 2)
  assert summary["win_rate"] == 0.75 and summary["loss_rate"] == 0.25
  # Gaps to the best known: 2 + 2 + 2 + 2 = 8; closed: 1 - 1 + 1 + 1 = 2.
  assert summary["headroom_captured"] == pytest.approx(2 / 8)
  assert summary["median_guided_evals_to_match"] == 4.0
