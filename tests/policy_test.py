"""regal.learning.features, regal.learning.policy, regal.learning.reinforce: hand-checked features, exact dequantization,
normalized log-probabilities, finite gradients, and a bandit update toward the better arm."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from datasets import devices as devices_lib
from datasets.graph import Graph
from datasets.synthetic import sized_graph
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


def test_brkga_features_are_shares_and_positions():
  problem = performance.Problem(sized_graph(10, seed=1), devices_lib.homogeneous(2))
  part = features.run_brkga_features(problem, evals=400)
  assert part.shape == (problem.graph.num_ops, 3)
  np.testing.assert_allclose(part[:, :2].sum(axis=1), 1.0, rtol=1e-6)
  assert (part[:, 2] >= 0).all() and (part[:, 2] <= 1).all()


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
  for bins in itertools.product(range(2), repeat=4):  # Node 0's four choices.
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
  grads = jax.grad(reinforce.loss_fn)((state.policy_params, state.baseline_params), graph,
                                      actions, jnp.array([-1.0, -0.9, 0.0]), mask, 2, SMALL,
                                      reinforce.TrainConfig(entropy_weight=0.01))
  assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree_util.tree_leaves(grads))
  alpha, beta = policy.mutant_distributions(actions, problems[1].layout, SMALL,
                                            first_node=problems[0].graph.num_ops)
  layout = problems[1].layout
  assert alpha.shape == beta.shape == (layout.size,)
  assert (np.asarray(alpha[layout.transfer_slice]) == 1).all()
  assert (np.asarray(alpha) > 0).all() and (np.asarray(beta) > 0).all()


def test_one_update_moves_toward_the_better_arm():
  """A one-node bandit: placement mean bin 1 earns -1, bin 0 earns -2; one step on both arms
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
  state, _ = reinforce.update(state, graph, actions, jnp.array([-2.0, -1.0, 0.0]),
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
  config = policy.PolicyConfig(hidden=16, rounds=1)
  train = reinforce.TrainConfig(learning_rate=3e-3)
  state = reinforce.init_state(jax.random.key(0), graph, 2, config, train)
  apply = jax.jit(policy.Policy(config, 2).apply)
  update = jax.jit(reinforce.update, static_argnums=(5, 6, 7))
  graph_of = np.repeat(np.arange(5), np.asarray(graph.n_node))
  mask = jnp.array([True] * 4 + [False])

  def high_share(actions):
    high = np.asarray(actions.placement_mean[:, 0] == 1, float)
    return np.array([high[graph_of == k].mean() for k in range(4)])

  first = None
  for step in range(60):
    actions = policy.sample(jax.random.fold_in(jax.random.key(1), step),
                            apply(state.policy_params, graph))
    share = high_share(actions)
    first = share.mean() if first is None else first
    state, _ = update(state, graph, actions, jnp.asarray(np.append(share - 1, 0), jnp.float32),
                      mask, 2, config, train)
  assert first < 0.7 and share.mean() > 0.9
