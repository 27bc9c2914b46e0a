"""One Doppler episode (section 4.1) as a `lax.scan` over steps; `vmap` it over many episodes.

State: which ops are assigned, their devices and delay-model start / end times, per device the
time it frees up, the compute assigned to it and the sum of the embeddings of its ops (kept as
its image under the placer's first layer, `networks.PlacerTerms`). A step:
the candidate set C_h is the unassigned ops whose predecessors are all assigned (C_0: the entry
ops); SEL picks one; its device features X_D (appendix E.2) are computed on every device; PLC
picks a device; the op starts there as early as the delay model allows (after the device's last
op and after its inputs arrive: the critical-path heuristic's bookkeeping). Padding ops are
never candidates, so the steps past the last real op change nothing.

Actions are sampled (epsilon-greedy: with probability epsilon a uniform choice), greedy, or
forced (teacher forcing for imitation, or replaying a recorded trajectory). The greedy and
forced modes return the log-probabilities and entropies of the policies at every step; sampling
only draws (in proportion to exp(score), two-level inverse CDF, no normalization), since the
policy gradient weighs a sampled trajectory afterwards with `replay`, all steps at once. On a CPU
the per-step normalization over N ops was most of an episode's time.

X_D for candidate v on device d, divided by the graph's time scale: total compute assigned to
d; compute of v's predecessors on d; the earliest start and the latest end of those
predecessors (0 when d holds none); v's earliest start time on d.
"""
from __future__ import annotations

import math
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
  device_part: jnp.ndarray  # [D, h] the placer's term of the ops on each device
  missing: jnp.ndarray  # [N] int32 predecessors not yet assigned


class Episode(NamedTuple):
  """Per step t: the op and device chosen (`valid` False past the last op), the log-
  probabilities of both choices, the policies' entropies, the greedy choices (for imitation
  accuracy; sampled episodes record 0, 0 and -1 there: `replay` weighs them) and the device
  features X_D the placer saw (what `replay` needs). `makespan` is the delay model's;
  `placement` is per op."""
  nodes: jnp.ndarray  # [N]
  devices: jnp.ndarray  # [N]
  valid: jnp.ndarray  # [N] bool
  sel_log_prob: jnp.ndarray  # [N]
  plc_log_prob: jnp.ndarray  # [N]
  entropy: jnp.ndarray  # [N]
  greedy_nodes: jnp.ndarray  # [N]
  greedy_devices: jnp.ndarray  # [N]
  device_features: jnp.ndarray  # [N, D, 5]
  placement: jnp.ndarray  # [N] int32
  makespan: jnp.ndarray  # []


def ready_mask(g: EpisodeGraph, assigned: jnp.ndarray) -> jnp.ndarray:
  """The candidate set's definition (the scan keeps it incrementally, by predecessor counts)."""
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


def _inclusive_sums(values: jnp.ndarray) -> jnp.ndarray:
  """Running sums of a short vector as one product with a triangular matrix (on a CPU, inside
  the episode scan, XLA's cumsum costs several times more)."""
  n = values.shape[-1]
  return values @ jnp.triu(jnp.ones((n, n), values.dtype))


def _positive_from(weights: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
  """The first entry at or after `index` whose weight is positive, else the last positive one
  (some weight is positive). The running sums are independent float32 dot products, so they
  can disagree with each other by a rounding: a target on a boundary between two entries (or
  rows) can then land on a zero-weight one, which must never be drawn."""
  positions = jnp.arange(weights.shape[0])
  positive = weights > 0
  last = jnp.max(jnp.where(positive, positions, 0))
  first_after = jnp.min(jnp.where(positive & (positions >= index), positions,
                                  weights.shape[0]))
  return jnp.where(first_after < weights.shape[0], first_after, last)


def _near_square_divisor(n: int) -> int:
  """The largest divisor of n not above its square root (the buckets' sizes m * 2**k have one
  near it): the rows of `_draw`'s grid, the block size of `_parts_before`."""
  return max(b for b in range(1, math.isqrt(n) + 1) if n % b == 0)


def _draw(weights: jnp.ndarray, uniform: jnp.ndarray) -> jnp.ndarray:
  """An index drawn with probability proportional to `weights` (>= 0, some positive) by
  inverting their running sum at one uniform number: one random number per draw, where a
  Gumbel draw (`jax.random.categorical`) takes one per entry. The running sum is taken in two
  levels (the weights as a near-square grid: which row, then which entry of it), so a draw over
  N entries costs O(N) where a cumsum inside the episode scan costs several times more on a
  CPU; rounding never picks a zero-weight entry (`_positive_from`)."""
  rows = _near_square_divisor(weights.shape[0])
  grid = weights.reshape(rows, -1)
  row_totals = grid.sum(axis=1)
  row_ends = _inclusive_sums(row_totals)
  target = uniform * row_ends[-1]
  row = _positive_from(row_totals, jnp.sum(row_ends <= target))
  within = target - (row_ends[row] - row_totals[row])
  column = _positive_from(grid[row], jnp.sum(_inclusive_sums(grid[row]) <= within))
  return row * grid.shape[1] + column


def _sample(uniforms: jnp.ndarray, logits: jnp.ndarray, allowed: jnp.ndarray,
            epsilon) -> jnp.ndarray:
  """Epsilon-greedy over the allowed entries (some): with probability epsilon uniform, else
  the softmax of the logits; `uniforms` [2]: whether to explore, and the draw. The weights are
  shifted by the allowed maximum and never normalized (only `replay` needs log-probabilities)."""
  top = jnp.max(jnp.where(allowed, logits, -jnp.inf))
  weights = jnp.where(uniforms[0] < epsilon, 1.0, jnp.exp(logits - top))
  return _draw(jnp.where(allowed, weights, 0.0), uniforms[1])


def _log_probs(logits, allowed):
  """(log-probabilities over the allowed entries, 0 elsewhere; entropy; greedy index)."""
  masked = jnp.where(allowed, logits, -jnp.inf)
  log_probs = jnp.where(allowed, jax.nn.log_softmax(masked, axis=-1), 0.0)
  entropy = -jnp.sum(jnp.exp(log_probs) * log_probs * allowed, axis=-1)
  return log_probs, entropy, jnp.argmax(masked, axis=-1)


def _choose(logits, allowed, mode, forced):
  """(action, log-prob of it, entropy, greedy action) over the allowed entries of logits, for
  the greedy and forced modes."""
  log_probs, entropy, greedy = _log_probs(logits, allowed)
  action = greedy if mode == GREEDY else forced
  return action, log_probs[action], entropy, greedy


def initial_state(g: EpisodeGraph, hidden: int) -> EpisodeState:
  n, d = g.node_mask.shape[0], g.speed.shape[0]
  return EpisodeState(assigned=jnp.zeros(n, bool), device=jnp.full(n, -1, jnp.int32),
                      start=jnp.zeros(n), end=jnp.zeros(n), device_free=jnp.zeros(d),
                      device_compute=jnp.zeros(d), device_part=jnp.zeros((d, hidden)),
                      missing=jnp.sum(g.pred_mask, axis=1, dtype=jnp.int32))


def run_episode(params, g: EpisodeGraph, key: jax.Array, config: networks.NetworkConfig,
                mode: str = SAMPLE, epsilon: float | jnp.ndarray = 0.0,
                forced_nodes: jnp.ndarray | None = None,
                forced_devices: jnp.ndarray | None = None) -> Episode:
  """A whole episode (`mode` static). `params`: {"selector": ..., "placer": ...}; forced
  actions [N] per step (entries past the last real op are ignored)."""
  n = g.node_mask.shape[0]
  embeddings, z, scores = networks.Selector(config).apply(params["selector"], g)
  terms = networks.placer_terms(params["placer"], embeddings, z)
  if forced_nodes is None:
    forced_nodes = jnp.zeros(n, jnp.int32)
    forced_devices = jnp.zeros(n, jnp.int32)

  num_real = jnp.sum(g.node_mask)

  def step(state: EpisodeState, inputs):
    t, uniforms, forced_node, forced_device = inputs
    valid = t < num_real  # Every step assigns one op, so the real ops last num_real steps.
    ready = g.node_mask & ~state.assigned & (state.missing == 0)
    if mode == SAMPLE:
      node = _sample(uniforms[:2], scores, ready, epsilon)
      sel_log_prob, sel_entropy, greedy_node = 0.0, 0.0, -1
    else:
      node, sel_log_prob, sel_entropy, greedy_node = _choose(scores, ready, mode, forced_node)
    earliest, duration, features = device_view(g, state, node)
    logits = networks.folded_placer_logits(terms, terms.own[node], state.device_part, features)
    if mode == SAMPLE:
      device = _sample(uniforms[2:], logits, jnp.ones_like(logits, bool), epsilon)
      plc_log_prob, plc_entropy, greedy_device = 0.0, 0.0, -1
    else:
      device, plc_log_prob, plc_entropy, greedy_device = _choose(
          logits, jnp.ones_like(logits, bool), mode, forced_device)
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
        device_part=put(state.device_part, device,
                        state.device_part[device] + terms.on_device[node]),
        # Padding successor slots point at the padding op N-1, which is never ready.
        missing=state.missing.at[g.succ_index[node]].add(-valid.astype(jnp.int32)))
    out = (node, device, valid, jnp.where(valid, sel_log_prob, 0.0),
           jnp.where(valid, plc_log_prob, 0.0), jnp.where(valid, sel_entropy + plc_entropy, 0.0),
           greedy_node, greedy_device, jnp.where(valid, features, 0.0))
    return new, out

  uniforms = jax.random.uniform(key, (n, 4))  # Per step: explore op?, draw, explore device?, draw
  final, (nodes, devices, valid, sel_lp, plc_lp, entropy, greedy_nodes, greedy_devices,
          device_features) = jax.lax.scan(step, initial_state(g, config.hidden),
                                          (jnp.arange(n), uniforms, forced_nodes,
                                           forced_devices))
  makespan = jnp.max(jnp.where(g.node_mask, final.end, 0.0))
  return Episode(nodes=nodes, devices=devices, valid=valid, sel_log_prob=sel_lp,
                 plc_log_prob=plc_lp, entropy=entropy, greedy_nodes=greedy_nodes,
                 greedy_devices=greedy_devices, device_features=device_features,
                 placement=final.device, makespan=makespan)


def _parts_before(rows: jnp.ndarray, on: jnp.ndarray) -> jnp.ndarray:
  """[N, D, h]: for every step t and device d, the sum of `rows` [N, h] over the steps before t
  whose `on` [N, D] (0/1) marks d. Steps go in blocks: within a block one product with the
  strictly triangular matrix masked by each device, then each block's offset from the block
  totals the same way. Differentiated, that is a few small matrix products, where a scan over
  N steps (or XLA's cumsum) costs several times more on a CPU, and the one-hot [N, D, h]
  addends are never built."""
  n, d = on.shape
  size = _near_square_divisor(n)
  count = n // size
  row_blocks = rows.reshape(count, size, -1)
  on_blocks = on.reshape(count, size, d)
  earlier = jnp.tri(size, k=-1, dtype=rows.dtype)  # [i, j]: step j comes before step i
  # [block, i, device, j]: step j of the block is before i and on the device.
  masks = earlier[None, :, None, :] * jnp.swapaxes(on_blocks, 1, 2)[:, None, :, :]
  within = jnp.einsum("bidj,bjh->bidh", masks, row_blocks)
  totals = jnp.einsum("bjd,bjh->bdh", on_blocks, row_blocks)
  before = jnp.einsum("cb,bdh->cdh", jnp.tri(count, k=-1, dtype=rows.dtype), totals)
  return (within + before[:, None]).reshape(n, d, -1)


class Replayed(NamedTuple):
  """What a recorded episode's actions weigh under a policy, per step [N]."""
  log_prob: jnp.ndarray  # SEL's and PLC's log-probabilities of the recorded actions, summed
  entropy: jnp.ndarray  # SEL's and PLC's entropies, summed
  greedy_nodes: jnp.ndarray
  greedy_devices: jnp.ndarray


def _selection_replay(scores, ready, valid, nodes):
  """SEL at every step at once: (log-probability of the chosen op [N], entropy [N], greedy op
  [N]) from the scores [N] and the candidate sets `ready` [N steps, N ops]. The softmax is
  written as its normalizer: a max (not differentiated), then one pass of exponentials whose
  sums give both the log-probability and the entropy."""
  masked = jnp.where(ready, scores[None], -jnp.inf)
  top = jax.lax.stop_gradient(jnp.where(valid, jnp.max(masked, axis=1), 0.0))
  shifted = jnp.where(ready, scores[None] - top[:, None], 0.0)  # <= 0 where ready
  exponentials = jnp.where(ready, jnp.exp(shifted), 0.0)
  total = jnp.where(valid, exponentials.sum(axis=1), 1.0)
  log_total = jnp.log(total)
  entropy = log_total - jnp.sum(exponentials * shifted, axis=1) / total
  return scores[nodes] - top - log_total, entropy, jnp.argmax(masked, axis=1)


def replay(params, g: EpisodeGraph, config: networks.NetworkConfig, nodes, devices, valid,
           device_features) -> Replayed:
  """A recorded episode (`run_episode`'s nodes, devices, valid steps and device features)
  scored under `params` with every step at once, no scan: what the policy gradient and
  imitation differentiate. Equal to the forced scan's log-probabilities and entropies up to
  float rounding. The candidate set at step t is the ops not chosen before t whose
  predecessors all were; the ops on a device before t sum to that device's embedding."""
  n, d = g.node_mask.shape[0], g.speed.shape[0]
  embeddings, z, scores = networks.Selector(config).apply(params["selector"], g)
  steps = jnp.arange(n)
  position = jnp.full(n, n, jnp.int32).at[jnp.where(valid, nodes, n)].set(steps, mode="drop")
  last_input = jnp.max(jnp.where(g.pred_mask, position[g.pred_index], -1), axis=1)
  ready = (g.node_mask[None] & (position[None] >= steps[:, None])
           & (last_input[None] < steps[:, None]))  # [N steps, N ops]
  sel_log_prob, sel_entropy, greedy_nodes = _selection_replay(scores, ready, valid, nodes)
  terms = networks.placer_terms(params["placer"], embeddings, z)
  on = ((devices[:, None] == jnp.arange(d)) & valid[:, None]).astype(terms.on_device.dtype)
  device_part = _parts_before(terms.on_device[nodes], on)  # The ops on each device so far.
  logits = networks.folded_placer_logits(terms, terms.own[nodes], device_part, device_features)
  plc_log_probs, plc_entropy, greedy_devices = _log_probs(logits, jnp.ones_like(logits, bool))
  plc_log_prob = jnp.take_along_axis(plc_log_probs, devices[:, None], axis=1)[:, 0]
  return Replayed(log_prob=jnp.where(valid, sel_log_prob + plc_log_prob, 0.0),
                  entropy=jnp.where(valid, sel_entropy + plc_entropy, 0.0),
                  greedy_nodes=greedy_nodes, greedy_devices=greedy_devices)


def init_params(key: jax.Array, g: EpisodeGraph, config: networks.NetworkConfig) -> dict:
  selector_key, placer_key = jax.random.split(key)
  selector = networks.Selector(config).init(selector_key, g)
  d, h = g.speed.shape[0], config.hidden
  placer = networks.Placer(config).init(placer_key, jnp.zeros(h), jnp.zeros((d, h)),
                                        jnp.zeros((d, 5)), jnp.zeros(h))
  return {"selector": selector, "placer": placer}
