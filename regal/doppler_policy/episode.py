"""One Doppler episode (section 4.1) as a `lax.scan` over steps; `vmap` it over many episodes.

State: which ops are assigned, their devices and delay-model start / end times, per device the
time it frees up, the compute assigned to it and the sum of the embeddings of its ops. A step:
the candidate set C_h is the unassigned ops whose predecessors are all assigned (C_0: the entry
ops); SEL picks one; its device features X_D (appendix E.2) are computed on every device; PLC
picks a device; the op starts there as early as the delay model allows (after the device's last
op and after its inputs arrive: the critical-path heuristic's bookkeeping). Padding ops are
never candidates, so the steps past the last real op change nothing.

Actions are sampled (epsilon-greedy: with probability epsilon a uniform choice), greedy, or
forced (teacher forcing for imitation, or replaying a recorded trajectory); every mode returns
the log-probabilities of the taken actions under the policy, so one function serves sampling,
imitation and the policy gradient.

X_D for candidate v on device d, divided by the graph's time scale: total compute assigned to
d; compute of v's predecessors on d; the earliest start and the latest end of those
predecessors (0 when d holds none); v's earliest start time on d.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from regal.doppler_policy import networks
from regal.doppler_policy.graph_data import EpisodeGraph, transfer_times

GREEDY, SAMPLE, FORCED = "greedy", "sample", "forced"


@struct.dataclass
class EpisodeState:
  assigned: jnp.ndarray  # [N] bool
  device: jnp.ndarray  # [N] int32, -1 unassigned
  start: jnp.ndarray  # [N]
  end: jnp.ndarray  # [N]
  device_free: jnp.ndarray  # [D]
  device_compute: jnp.ndarray  # [D]
  device_embedding: jnp.ndarray  # [D, h]


class Episode(NamedTuple):
  """Per step t: the op and device chosen (`valid` False past the last op), the log-
  probabilities of both choices, the policies' entropies, and the greedy choices (for
  imitation accuracy). `makespan` is the delay model's; `placement` is per op."""
  nodes: jnp.ndarray  # [N]
  devices: jnp.ndarray  # [N]
  valid: jnp.ndarray  # [N] bool
  sel_log_prob: jnp.ndarray  # [N]
  plc_log_prob: jnp.ndarray  # [N]
  entropy: jnp.ndarray  # [N]
  greedy_nodes: jnp.ndarray  # [N]
  greedy_devices: jnp.ndarray  # [N]
  placement: jnp.ndarray  # [N] int32
  makespan: jnp.ndarray  # []


def ready_mask(g: EpisodeGraph, assigned: jnp.ndarray) -> jnp.ndarray:
  inputs_done = jnp.all(assigned[g.pred_index] | ~g.pred_mask, axis=1)
  return g.node_mask & ~assigned & inputs_done


def device_view(g: EpisodeGraph, state: EpisodeState, op: jnp.ndarray):
  """(earliest start [D], duration [D], X_D [D, 5]) of `op` on every device."""
  num_devices = g.speed.shape[0]
  preds, mask = g.pred_index[op], g.pred_mask[op]
  pred_device = jnp.where(mask, state.device[preds], 0)
  delays = transfer_times(g.pred_bytes[op], pred_device, g.latency, g.bandwidth, num_devices)
  arrival = jnp.where(mask[:, None], state.end[preds][:, None] + delays, 0.0)
  earliest = jnp.maximum(state.device_free, arrival.max(axis=0, initial=0.0))
  duration = g.cost[op] / g.speed
  on = mask[:, None] & (pred_device[:, None] == jnp.arange(num_devices))  # [K, D]
  pred_duration = (state.end - state.start)[preds]
  pred_compute = jnp.sum(jnp.where(on, pred_duration[:, None], 0.0), axis=0)
  first_start = jnp.min(jnp.where(on, state.start[preds][:, None], jnp.inf), axis=0)
  last_end = jnp.max(jnp.where(on, state.end[preds][:, None], -jnp.inf), axis=0)
  any_on = on.any(axis=0)
  features = jnp.stack([state.device_compute, pred_compute,
                        jnp.where(any_on, first_start, 0.0), jnp.where(any_on, last_end, 0.0),
                        earliest], axis=1) / g.time_scale
  return earliest, duration, features


def _choose(key, logits, allowed, mode, forced, epsilon):
  """(action, log-prob of it, entropy, greedy action) over the allowed entries of logits."""
  masked = jnp.where(allowed, logits, -jnp.inf)
  log_probs = jax.nn.log_softmax(masked)
  log_probs = jnp.where(allowed, log_probs, 0.0)  # No NaN when nothing is allowed.
  greedy = jnp.argmax(masked)
  if mode == GREEDY:
    action = greedy
  elif mode == FORCED:
    action = forced
  else:
    explore_key, uniform_key, policy_key = jax.random.split(key, 3)
    uniform = jax.random.categorical(uniform_key, jnp.where(allowed, 0.0, -jnp.inf))
    sampled = jax.random.categorical(policy_key, masked)
    action = jnp.where(jax.random.uniform(explore_key) < epsilon, uniform, sampled)
  entropy = -jnp.sum(jnp.exp(log_probs) * log_probs * allowed)
  return action, log_probs[action], entropy, greedy


def initial_state(g: EpisodeGraph, hidden: int) -> EpisodeState:
  n, d = g.node_mask.shape[0], g.speed.shape[0]
  return EpisodeState(assigned=jnp.zeros(n, bool), device=jnp.full(n, -1, jnp.int32),
                      start=jnp.zeros(n), end=jnp.zeros(n), device_free=jnp.zeros(d),
                      device_compute=jnp.zeros(d), device_embedding=jnp.zeros((d, hidden)))


def run_episode(params, g: EpisodeGraph, key: jax.Array, config: networks.NetworkConfig,
                mode: str = SAMPLE, epsilon: float | jnp.ndarray = 0.0,
                forced_nodes: jnp.ndarray | None = None,
                forced_devices: jnp.ndarray | None = None) -> Episode:
  """A whole episode (`mode` static). `params`: {"selector": ..., "placer": ...}; forced
  actions [N] per step (entries past the last real op are ignored)."""
  n = g.node_mask.shape[0]
  embeddings, z, scores = networks.Selector(config).apply(params["selector"], g)
  placer = networks.Placer(config)
  if forced_nodes is None:
    forced_nodes = jnp.zeros(n, jnp.int32)
    forced_devices = jnp.zeros(n, jnp.int32)

  def step(state: EpisodeState, inputs):
    step_key, forced_node, forced_device = inputs
    sel_key, plc_key = jax.random.split(step_key)
    ready = ready_mask(g, state.assigned)
    valid = ready.any()
    node, sel_log_prob, sel_entropy, greedy_node = _choose(
        sel_key, scores, ready, mode, forced_node, epsilon)
    earliest, duration, features = device_view(g, state, node)
    logits = placer.apply(params["placer"], embeddings[node], state.device_embedding,
                          features, z[node])
    allowed = jnp.ones_like(logits, bool)
    device, plc_log_prob, plc_entropy, greedy_device = _choose(
        plc_key, logits, allowed, mode, forced_device, epsilon)
    start = earliest[device]
    end = start + duration[device]

    def put(array, index, value):
      return array.at[index].set(jnp.where(valid, value, array[index]))

    new = EpisodeState(
        assigned=put(state.assigned, node, True),
        device=put(state.device, node, device.astype(jnp.int32)),
        start=put(state.start, node, start), end=put(state.end, node, end),
        device_free=put(state.device_free, device, end),
        device_compute=put(state.device_compute, device,
                           state.device_compute[device] + duration[device]),
        device_embedding=put(state.device_embedding, device,
                             state.device_embedding[device] + embeddings[node]))
    out = (node, device, valid, jnp.where(valid, sel_log_prob, 0.0),
           jnp.where(valid, plc_log_prob, 0.0), jnp.where(valid, sel_entropy + plc_entropy, 0.0),
           greedy_node, greedy_device)
    return new, out

  keys = jax.random.split(key, n)
  final, (nodes, devices, valid, sel_lp, plc_lp, entropy, greedy_nodes, greedy_devices) = (
      jax.lax.scan(step, initial_state(g, config.hidden), (keys, forced_nodes, forced_devices)))
  makespan = jnp.max(jnp.where(g.node_mask, final.end, 0.0))
  return Episode(nodes=nodes, devices=devices, valid=valid, sel_log_prob=sel_lp,
                 plc_log_prob=plc_lp, entropy=entropy, greedy_nodes=greedy_nodes,
                 greedy_devices=greedy_devices, placement=final.device, makespan=makespan)


def init_params(key: jax.Array, g: EpisodeGraph, config: networks.NetworkConfig) -> dict:
  selector_key, placer_key = jax.random.split(key)
  selector = networks.Selector(config).init(selector_key, g)
  d, h = g.speed.shape[0], config.hidden
  placer = networks.Placer(config).init(placer_key, jnp.zeros(h), jnp.zeros((d, h)),
                                        jnp.zeros((d, 5)), jnp.zeros(h))
  return {"selector": selector, "placer": placer}
