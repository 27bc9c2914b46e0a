"""regal.doppler_policy: hand-checked features, the scan against a step-by-step reference,
imitation of critical path, a policy-gradient step toward an obviously best placement,
checkpoints, and the seeding arm's lineage in regal.optimize's result."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal_datasets import analysis
from regal_datasets import devices as devices_lib
from regal_datasets import errors
from regal_datasets.graph import Graph
from regal_datasets.synthetic import sized_graph
from regal.app import methods, optimize_lib
from regal.baselines import list_scheduling
from regal.doppler_policy import episode as episode_lib
from regal.doppler_policy import graph_data, method, networks, training
from regal.scoring import performance
from regal.scoring.delay import reference as delay_reference
from regal.doppler_policy import guide as doppler_guide

SMALL = training.DopplerConfig(hidden=16, rounds=1, episodes_per_step=16)
# Jitted (op by op, a replay takes seconds); tests of one graph and batch share its compilation.
replay_jit = jax.jit(training.replay_episodes, static_argnums=2)


def diamond() -> Graph:
  # a (2) -> b (3) -> d (1); a -> c (5) -> d; tensors of 4, 6, 2 and 8 bytes.
  return Graph(op_names=list("abcd"), op_types=[""] * 4, compute_cost=[2, 3, 5, 1],
               extra_memory=[0] * 4, tensor_producer=[0, 0, 1, 2], tensor_size=[4, 6, 2, 8],
               data_edge_tensor=[0, 1, 2, 3], data_edge_consumer=[1, 2, 3, 3],
               control_edge_src=[], control_edge_dst=[])


def test_static_features_by_hand():
  features, b_next, t_prev = graph_data.static_features(diamond(), devices_lib.homogeneous(2))
  # compute, comm in, comm out, t-level, b-level (bandwidth 1: a transfer takes its bytes).
  np.testing.assert_allclose(features, [[2, 0, 10, 0, 22], [3, 4, 2, 6, 6], [5, 6, 8, 8, 14],
                                        [1, 10, 0, 21, 1]])
  assert b_next.tolist() == [2, 3, 3, -1] and t_prev.tolist() == [-1, 0, 0, 2]
  g = graph_data.episode_graph(diamond(), devices_lib.homogeneous(2))
  assert float(g.time_scale) == 22.0
  np.testing.assert_allclose(g.node_features[:4], features / 22.0, rtol=1e-6)
  assert g.b_path[0, :4].tolist() == [1, 0, 1, 1] and g.t_path[3, :4].tolist() == [1, 0, 1, 1]
  assert not g.node_mask[4:].any()


def test_device_features_by_hand():
  g = jax.tree_util.tree_map(jnp.asarray,
                             graph_data.episode_graph(diamond(), devices_lib.homogeneous(2)))
  n = g.node_mask.shape[0]
  # a on device 0 (0-2), c on device 1 (inputs arrive at 2 + 6: 8-13), b on device 0 (2-5).
  state = episode_lib.initial_state(g, 4).replace(
      assigned=jnp.arange(n) < 3, device=jnp.array([0, 0, 1] + [-1] * (n - 3)),
      start=jnp.zeros(n).at[:3].set([0, 2, 8]), end=jnp.zeros(n).at[:3].set([2, 5, 13]),
      device_free=jnp.array([5.0, 13.0]), device_compute=jnp.array([5.0, 5.0]))
  earliest, duration, features = episode_lib.device_view(g, state, jnp.asarray(3))
  # d on device 0 waits for c's 8 bytes (13 + 8); on device 1 for c itself (b's 2 bytes come
  # at 7).
  np.testing.assert_allclose(earliest, [21, 13])
  np.testing.assert_allclose(duration, [1, 1])
  np.testing.assert_allclose(features * 22, [[5, 3, 2, 5, 21], [5, 5, 8, 13, 13]], rtol=1e-6)
  assert bool(episode_lib.ready_mask(g, state.assigned)[3])


def _reference_greedy_episode(params, graph: Graph, devices, config):
  """Step by step in Python: ready ops, greedy SEL, delay-model device view, greedy PLC."""
  g = graph_data.episode_graph(graph, devices)
  embeddings, z, scores = (np.asarray(x) for x in networks.Selector(config).apply(
      params["selector"], jax.tree_util.tree_map(jnp.asarray, g)))
  deps = analysis.Dependencies.of(graph)
  d = devices.num_devices
  placement = np.full(graph.num_ops, -1)
  start, end = np.zeros(graph.num_ops), np.zeros(graph.num_ops)
  free, compute, device_embedding = np.zeros(d), np.zeros(d), np.zeros((d, config.hidden))
  nodes, chosen = [], []
  for _ in range(graph.num_ops):
    ready = [v for v in range(graph.num_ops) if placement[v] < 0
             and all(placement[p] >= 0 for p in deps.preds[v])]
    v = max(ready, key=lambda op: (scores[op], -op))
    rows = []
    for device in range(d):
      here = [p for p in deps.preds[v] if placement[p] == device]
      ready_time = delay_reference.input_ready_time(v, device, placement, end, deps, devices)
      rows.append([compute[device], sum(end[p] - start[p] for p in here),
                   min((start[p] for p in here), default=0.0),
                   max((end[p] for p in here), default=0.0), max(free[device], ready_time)])
    rows = np.asarray(rows) / float(g.time_scale)
    logits = np.asarray(networks.Placer(config).apply(
        params["placer"], embeddings[v], device_embedding, rows.astype(np.float32), z[v]))
    device = int(np.argmax(logits))
    placement[v], start[v] = device, rows[device, 4] * float(g.time_scale)
    end[v] = start[v] + graph.compute_cost[v] / devices.speed[device]
    free[device] = end[v]
    compute[device] += graph.compute_cost[v] / devices.speed[device]
    device_embedding[device] += embeddings[v]
    nodes.append(v)
    chosen.append(device)
  return nodes, chosen, end.max()


def test_batched_greedy_episodes_match_the_step_by_step_reference():
  # Slow links, so input arrivals (not only device queues) decide start times.
  graph, devices = sized_graph(14, seed=5), devices_lib.homogeneous(3, bandwidth=0.02)
  problem = performance.Problem(graph, devices)
  agent = training.Agent.create(problem, SMALL)
  for seed in range(2):
    params = training.init_params(jax.random.key(seed), agent)
    batched = jax.jit(training.episode_runner(agent, episode_lib.GREEDY))
    episodes = batched(params, jax.random.split(jax.random.key(9), 2), 0.0,
                       jnp.zeros((2, 1)), jnp.zeros((2, 1)))
    nodes, devices_chosen, makespan = _reference_greedy_episode(params, graph, devices,
                                                                SMALL.network)
    o = graph.num_ops
    for row in range(2):  # Greedy: the key does not matter.
      assert np.asarray(episodes.nodes[row, :o]).tolist() == nodes
      assert np.asarray(episodes.devices[row, :o]).tolist() == devices_chosen
      assert float(episodes.makespan[row]) == pytest.approx(makespan, rel=1e-5)
    assert int(episodes.valid[0].sum()) == o


def test_forcing_the_teacher_reproduces_its_schedule():
  graph, devices = sized_graph(20, seed=2), devices_lib.homogeneous(2, bandwidth=0.02)
  agent = training.Agent.create(performance.Problem(graph, devices), SMALL)
  nodes, chosen, placement = agent.teacher()
  assert 0 < placement.sum() < graph.num_ops  # Both devices used: transfers happen.
  _, order = list_scheduling.critical_path_assignment(graph, devices)
  planned, _, _ = list_scheduling.simulate_in_order(graph, devices, placement, order)
  params = training.init_params(jax.random.key(0), agent)
  forced = jax.jit(training.episode_runner(agent, episode_lib.FORCED))(
      params, jax.random.split(jax.random.key(0), 1), 0.0, jnp.asarray(nodes)[None],
      jnp.asarray(chosen)[None])
  assert np.asarray(forced.placement[0, :graph.num_ops]).tolist() == placement.tolist()
  assert float(forced.makespan[0]) == pytest.approx(planned, rel=1e-5)


def test_replay_weighs_recorded_episodes_as_the_step_by_step_scan():
  """The vectorized replay (what REINFORCE and imitation differentiate) against the forced
  scan, step by step, on sampled episodes of a random policy; and the split placer against the
  readable module."""
  # The forcing test's graph and devices: the forced runner's compilation is shared.
  graph, devices = sized_graph(20, seed=2), devices_lib.homogeneous(2, bandwidth=0.02)
  agent = training.Agent.create(performance.Problem(graph, devices), SMALL)
  params = training.init_params(jax.random.key(3), agent)
  keys = jax.random.split(jax.random.key(4), 6)
  zeros = jnp.zeros((6, 1))
  sampled = training.episode_runner(agent, episode_lib.SAMPLE)(params, keys, 0.3, zeros, zeros)
  forced = training.episode_runner(agent, episode_lib.FORCED)(
      params, keys, 0.0, sampled.nodes, sampled.devices)
  replayed = replay_jit(params, agent.graph, SMALL.network, sampled)
  np.testing.assert_array_equal(forced.placement, sampled.placement)
  np.testing.assert_allclose(replayed.log_prob, forced.sel_log_prob + forced.plc_log_prob,
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(replayed.entropy, forced.entropy, rtol=1e-5, atol=1e-5)
  valid = np.asarray(sampled.valid)
  assert valid.sum() == 6 * graph.num_ops and np.all(np.asarray(replayed.log_prob)[~valid] == 0)
  # The policy gradient: the replay's derivatives equal the scan's, which takes a log-softmax
  # at every step (weights per step and episode, as advantages and the entropy bonus give).
  w_prob, w_entropy = (jnp.asarray(rng_weights, jnp.float32) for rng_weights in
                       np.random.default_rng(5).normal(size=(2,) + sampled.valid.shape))

  def replay_objective(p):
    r = training.replay_episodes(p, agent.graph, SMALL.network, sampled)
    return jnp.sum(r.log_prob * w_prob + r.entropy * w_entropy)

  def scan_objective(p):
    f = training.run_episodes(p, keys, 0.0, sampled.nodes, sampled.devices, g=agent.graph,
                              network=SMALL.network, mode=episode_lib.FORCED)
    return jnp.sum((f.sel_log_prob + f.plc_log_prob) * w_prob + f.entropy * w_entropy)
  replay_grads, scan_grads = (jax.tree_util.tree_leaves(jax.jit(jax.grad(objective))(params))
                              for objective in (replay_objective, scan_objective))
  for ours, reference in zip(replay_grads, scan_grads):
    np.testing.assert_allclose(ours, reference, rtol=2e-3, atol=2e-3)
  # Greedy choices agree but for near-ties that float rounding breaks either way.
  for field in ("greedy_nodes", "greedy_devices"):
    agree = np.asarray(getattr(replayed, field))[valid] == np.asarray(getattr(forced, field))[valid]
    assert agree.mean() >= 0.97, (field, agree.mean())
  rng = np.random.default_rng(0)
  h = SMALL.hidden
  embedding, z, on_devices, features = (jnp.asarray(rng.normal(size=shape), jnp.float32)
                                        for shape in ((h,), (h,), (3, 2, h), (3, 5)))
  # Op 0 is placed (three devices); ops 1-6 sit two by two on them.
  terms = networks.placer_terms(params["placer"],
                                jnp.concatenate([embedding[None], on_devices.reshape(6, h)]),
                                jnp.concatenate([z[None], jnp.zeros((6, h))]))
  folded = networks.folded_placer_logits(terms, terms.own[0],
                                         terms.on_device[1:].reshape(3, 2, h).sum(1), features)
  np.testing.assert_allclose(folded, networks.Placer(SMALL.network).apply(
      params["placer"], embedding, on_devices.sum(1), features, z), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [5, 12, 13])
def test_draws_follow_the_weights_and_never_pick_a_zero_weight(size):
  # 5 and 13 entries make a one-row grid; 12 a 3 x 4 one.
  weights = np.zeros(size, np.float32)
  weights[[1, 3, size - 2]] = [1.0, 3.0, 4.0]
  uniforms = jax.random.uniform(jax.random.key(0), (40000,))
  picks = np.asarray(jax.vmap(episode_lib._draw, (None, 0))(jnp.asarray(weights), uniforms))
  assert set(picks.tolist()) == {1, 3, size - 2}
  np.testing.assert_allclose(np.bincount(picks, minlength=size) / len(picks),
                             weights / weights.sum(), atol=0.01)
  # A uniform number at the top of [0, 1) still picks the last positive weight.
  top = jnp.float32(np.nextafter(1, 0, dtype=np.float32))
  assert int(episode_lib._draw(jnp.asarray(weights), top)) == size - 2


def test_a_draw_on_a_boundary_between_rows_never_picks_a_zero_weight():
  # The running sums are separate float32 dot products, so a target on the end of a row can
  # come out below the next row's start by a rounding; each row's first entry is zero here.
  rng = np.random.default_rng(0)
  size, count = 64, 2048
  rows = episode_lib._near_square_divisor(size)
  weights = np.exp(rng.normal(0.0, 4.0, (count, size))).astype(np.float32)
  weights *= rng.random((count, size)) < rng.uniform(0.05, 0.9, (count, 1))
  weights.reshape(count, rows, -1)[:, :, 0] = 0.0
  weights.reshape(count, rows, -1)[:, :, -1] += 1.0
  row_ends = np.asarray(jax.vmap(episode_lib._inclusive_sums)(
      jnp.asarray(weights.reshape(count, rows, -1).sum(2))))
  boundary = rng.integers(0, rows - 1, count)
  uniforms = (row_ends[np.arange(count), boundary] / row_ends[:, -1]).astype(np.float32)
  picks = []
  for nudge in (-1.0, 0.0, 2.0):  # One float below, on and above each boundary.
    nudged = np.nextafter(uniforms, np.float32(nudge)) if nudge else uniforms
    picks.append(np.asarray(jax.jit(jax.vmap(episode_lib._draw))(
        jnp.asarray(weights), jnp.asarray(np.minimum(nudged, np.float32(1 - 2**-24))))))
  assert all((weights[np.arange(count), p] > 0).all() for p in picks)


def _join() -> Graph:
  # a, b, c are entries; d reads a: the orders are the 12 that put a before d.
  return Graph(op_names=list("abcd"), op_types=[""] * 4, compute_cost=[2, 3, 5, 1],
               extra_memory=[0] * 4, tensor_producer=[0], tensor_size=[4.0],
               data_edge_tensor=[0], data_edge_consumer=[3], control_edge_src=[],
               control_edge_dst=[])


def test_sampled_episodes_follow_the_policy():
  """Sampling draws without normalizing; the frequencies of whole trajectories (op order and
  the first op's device) must still be the policy's: per step (1 - epsilon) times the softmax,
  as the forced scan computes it, plus epsilon times uniform over the candidates (epsilon 1/2
  weighs both branches)."""
  epsilon = 0.5
  graph, devices = _join(), devices_lib.homogeneous(2)
  config = dataclasses.replace(SMALL, hidden=8)
  agent = training.Agent.create(performance.Problem(graph, devices), config)
  params = training.init_params(jax.random.key(1), agent)
  last = params["selector"]["params"]["Dense_1"]
  last["kernel"] = last["kernel"] * 5.0  # Scores some nats apart: neither uniform nor certain.
  count = 20000
  zeros = jnp.zeros((count, 1))
  sampled = training.episode_runner(agent, episode_lib.SAMPLE)(
      params, jax.random.split(jax.random.key(8), count), epsilon, zeros, zeros)
  nodes, chosen = np.asarray(sampled.nodes)[:, :4], np.asarray(sampled.devices)[:, :4]
  outcomes = {}
  for row in range(count):
    outcome = (tuple(nodes[row]), int(chosen[row, 0]))
    outcomes[outcome] = outcomes.get(outcome, 0) + 1
  # Every trajectory with a sampled order and first device, the other devices summed out.
  keys = sorted(outcomes)
  combos = [(order, (first, *rest)) for order, first in keys for rest in np.ndindex(2, 2, 2)]
  n = sampled.nodes.shape[1]
  forced = training.episode_runner(agent, episode_lib.FORCED)(
      params, jax.random.split(jax.random.key(0), len(combos)), 0.0,
      jnp.asarray([list(order) + [0] * (n - 4) for order, _ in combos]),
      jnp.asarray([list(placed) + [0] * (n - 4) for _, placed in combos]))
  sel, plc = np.exp(np.asarray(forced.sel_log_prob)), np.exp(np.asarray(forced.plc_log_prob))
  expected = dict.fromkeys(keys, 0.0)
  for row, (order, placed) in enumerate(combos):
    probability = 1.0
    for step in range(4):
      before = set(order[:step])
      candidates = sum(op not in before and (op != 3 or 0 in before) for op in range(4))
      probability *= ((1 - epsilon) * sel[row, step] + epsilon / candidates) * (
          (1 - epsilon) * plc[row, step] + epsilon / 2)
    expected[(order, placed[0])] += probability
  assert len(outcomes) <= 24 and sum(expected.values()) <= 1 + 1e-4
  observed = np.array([outcomes[k] / count for k in keys])
  np.testing.assert_allclose(observed, np.array([expected[k] for k in keys]), atol=0.012)


def test_sampling_and_replay_survive_a_huge_score_range():
  """A trained selector spans ~1,400 nats over a 300-op graph (ops never ready together drift
  apart): sampling must still pick ready ops as the policy does, and the replay stay finite."""
  graph, devices = sized_graph(20, seed=2), devices_lib.homogeneous(2, bandwidth=0.02)
  agent = training.Agent.create(performance.Problem(graph, devices), SMALL)
  params = training.init_params(jax.random.key(3), agent)
  last = params["selector"]["params"]["Dense_1"]
  last["kernel"] = last["kernel"] * 2000.0  # The scores' spread grows 2000-fold.
  _, _, scores = networks.Selector(SMALL.network).apply(params["selector"], agent.graph)
  assert float(np.ptp(np.asarray(scores)[:graph.num_ops])) > 500
  zeros = jnp.zeros((6, 1))  # The replay test's graph and batch: their compilations are shared.
  sampled = training.episode_runner(agent, episode_lib.SAMPLE)(
      params, jax.random.split(jax.random.key(1), 6), 0.0, zeros, zeros)
  assert (np.asarray(sampled.placement)[:, :graph.num_ops] >= 0).all()  # Every op placed.
  replayed = replay_jit(params, agent.graph, SMALL.network, sampled)
  assert np.isfinite(np.asarray(replayed.log_prob)).all()
  # Near-deterministic: no sampled choice is unlikely (only near-ties remain to chance).
  assert np.asarray(replayed.log_prob).min() > -2.0
  assert np.isfinite(np.asarray(replayed.entropy)).all()


def test_imitation_agrees_with_critical_path():
  graph, devices = sized_graph(16, seed=4), devices_lib.homogeneous(2)
  agent = training.Agent.create(performance.Problem(graph, devices), SMALL)
  config = dataclasses.replace(SMALL, imitation_steps=400, imitation_target=0.97,
                               hidden=32)
  agent = training.Agent.create(performance.Problem(graph, devices), config)
  params = training.init_params(jax.random.key(0), agent)
  _, info = training.imitate(params, [agent], config)
  assert info["node_agreement"] >= 0.95 and info["device_agreement"] >= 0.95


def test_policy_gradient_raises_the_obviously_best_placement():
  # Two ops joined by a huge tensor: putting the second beside the first is clearly best.
  graph = Graph(op_names=["x", "y"], op_types=["", ""], compute_cost=[1.0, 1.0],
                extra_memory=[0, 0], tensor_producer=[0], tensor_size=[1000.0],
                data_edge_tensor=[0], data_edge_consumer=[1], control_edge_src=[],
                control_edge_dst=[])
  problem = performance.Problem(graph, devices_lib.homogeneous(2))
  config = dataclasses.replace(SMALL, learning_rate=0.05, epsilon=0.0, entropy_weight=0.0,
                               reinforce_steps=3, episodes_per_step=32)
  agent = training.Agent.create(problem, config)
  params = training.init_params(jax.random.key(1), agent)
  forced = jax.jit(training.episode_runner(agent, episode_lib.FORCED))

  def colocated_probability(params):
    nodes, chosen = agent.pad_actions([0, 1], [0, 0])
    run = forced(params, jax.random.split(jax.random.key(0), 1), 0.0, jnp.asarray(nodes)[None],
                 jnp.asarray(chosen)[None])
    return float(jnp.exp(run.plc_log_prob[0, 1]))

  before = colocated_probability(params)
  trained, best, _ = training.reinforce(params, agent, config, training.ModelReward(problem),
                                        jax.random.key(2))
  assert colocated_probability(trained) > before
  assert best.placement[0] == best.placement[1]


def test_checkpoints_round_trip_and_refuse_another_config(tmp_path):
  problem = performance.Problem(sized_graph(10, seed=1), devices_lib.homogeneous(2))
  agent = training.Agent.create(problem, SMALL)
  params = training.init_params(jax.random.key(0), agent)
  path = str(tmp_path / "policy")
  method.save_checkpoint(path, params, SMALL, 2)
  loaded = method.load_checkpoint(path, params, SMALL)
  for a, b in zip(jax.tree_util.tree_leaves(loaded), jax.tree_util.tree_leaves(params)):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(errors.ConfigError, match="hidden=16"):
    method.load_checkpoint(path, params, dataclasses.replace(SMALL, hidden=32))
  with pytest.raises(errors.ConfigError, match="unreadable"):
    method.load_checkpoint(str(tmp_path / "missing"), params, SMALL)
  truncated = tmp_path / "truncated"
  truncated.write_bytes(open(path, "rb").read()[:100])
  with pytest.raises(errors.ConfigError, match="corrupt|unreadable"):
    method.load_checkpoint(str(truncated), params, SMALL)


def test_doppler_seed_arm_in_regal_optimize(tmp_path):
  """A saved (untrained) policy seeds BRKGA on another graph; the result names each arm's
  score and the arm the winner descends from."""
  config = training.DopplerConfig()
  graph = sized_graph(12, seed=3)
  problem = performance.Problem(graph, devices_lib.homogeneous(2))
  agent = training.Agent.create(performance.Problem(sized_graph(12, seed=0),
                                                    devices_lib.homogeneous(2)), config)
  path = str(tmp_path / "policy")
  method.save_checkpoint(path, training.init_params(jax.random.key(0), agent), config, 2)
  arm = method.DopplerOptions(checkpoint=path, evals=33, samples=2)  # One batch of episodes.
  report = optimize_lib.run(
      graph, problem.devices,
      methods.RunConfig(evals=400, doppler=arm,
                        brkga=methods.BrkgaOptions(arms=("single_device", "doppler"))))
  details = report.result.details
  assert set(details["seed_arms"]) == {"single_device", "doppler"}
  # The budget is checked before the arm trains, from what it will spend: exactly this (the
  # critical-path teacher, one batch of 32 episodes, the greedy assignment), and the search
  # spends the rest.
  assert details["arm_evaluations"] == doppler_guide.DopplerSeeds(arm).planned_evaluations(
      problem) == 34
  assert report.result.evaluations <= 400
  assert doppler_guide.DopplerSeeds(method.DopplerOptions(evals=70)).planned_evaluations(
      problem) == 66
  with pytest.raises(errors.ConfigError, match="after the guides spend 1026"):
    optimize_lib.run(graph, problem.devices, methods.RunConfig(
        evals=1040, brkga=methods.BrkgaOptions(arms=("doppler",))))
  # Each arm's score is its own chromosomes' reference score (the arm rerun apart, same
  # seed), and the search starts from them, so its own answer is no worse.
  from regal.search import guides
  alone = doppler_guide.DopplerSeeds(arm).guide(problem, 0, guides.Guidance()).seeds
  assert details["seed_arms"]["doppler"] == min(
      performance.score_reference(problem, c)[0] for c in alone.values())
  assert details["seed_arms"]["single_device"] == float(graph.compute_cost.sum())
  assert report.result.search_objective <= min(details["seed_arms"].values())
  with pytest.raises(errors.ConfigError, match="unknown seed arm"):
    methods.parse_arms("critical_path,oracle")
