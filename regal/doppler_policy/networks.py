"""Doppler's dual policy networks (section 4.2) in Flax: SEL selects an op, PLC places it.

Our reading of equations 2-8:
* `Encoder`: X_G through an FFNN, then message passing over the graph (forward and backward
  messages, `regal.learning.policy.Encoder`), giving node embeddings H [N, h]. It runs once per episode
  (section 4.3), not once per step.
* SEL: for op v, [H[v] || sum of H over v's b-level path || sum over its t-level path ||
  FFNN(X_V)[v]] -> LeakyReLU layer Z[v] -> score. Every input is static during an episode, so
  the scores are computed once; a step is a softmax over the scores of the ready ops.
* PLC: for the selected v and each device d, [H[v] || sum of H over the ops already on d ||
  FFNN(X_D)[d] || Z[v]] -> LeakyReLU MLP -> score; softmax over devices.
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax.numpy as jnp
import jraph
from flax import struct

from regal.doppler_policy.graph_data import EpisodeGraph
from regal.learning import policy as regal_policy


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
  hidden: int = 64
  rounds: int = 2  # Message-passing rounds.


def _leaky_mlp(features: tuple[int, ...]) -> regal_policy.MLP:
  return regal_policy.MLP(features, activation=nn.leaky_relu)


class Selector(nn.Module):
  """Per episode: (H [N, h], Z [N, h], SEL scores [N])."""
  config: NetworkConfig

  @nn.compact
  def __call__(self, g: EpisodeGraph):
    h = self.config.hidden
    graph = jraph.GraphsTuple(nodes=g.node_features, edges=g.edge_features, senders=g.senders,
                              receivers=g.receivers, n_node=jnp.array([g.node_mask.shape[0]]),
                              n_edge=jnp.array([g.senders.shape[0]]), globals=None)
    encoder_config = regal_policy.PolicyConfig(hidden=h, rounds=self.config.rounds)
    embeddings = regal_policy.Encoder(encoder_config)(graph)
    embeddings = jnp.where(g.node_mask[:, None], embeddings, 0.0)
    own = _leaky_mlp((h, h))(g.node_features)
    inputs = jnp.concatenate([embeddings, g.b_path @ embeddings, g.t_path @ embeddings, own], -1)
    z = nn.leaky_relu(nn.Dense(h)(inputs))
    scores = nn.Dense(1)(z)[:, 0]
    return embeddings, z, scores


class Placer(nn.Module):
  """Per step: device scores [D] for one selected op."""
  config: NetworkConfig

  @nn.compact
  def __call__(self, embedding, device_embeddings, device_features, z):
    h = self.config.hidden
    num_devices = device_features.shape[0]
    projected = _leaky_mlp((h, h))(device_features)
    inputs = jnp.concatenate([jnp.broadcast_to(embedding, (num_devices, h)), device_embeddings,
                              projected, jnp.broadcast_to(z, (num_devices, h))], -1)
    return _leaky_mlp((h, 1))(inputs)[:, 0]


@struct.dataclass
class PlacerTerms:
  """The placer's weights folded for one episode: its first scoring layer is linear in each of
  its four inputs, so the parts that depend only on an op (H[v], Z[v]) are computed once per
  op, the device-embedding part is carried as the running sum of the ops' images under it,
  and the X_D projection's last layer is folded into it. Per step and device that leaves one
  h x h product instead of four."""
  own: jnp.ndarray  # [N, h] H[v] K_H + Z[v] K_Z + bias, per op
  on_device: jnp.ndarray  # [N, h] H[v] K_D: what op v adds to its device's part
  project_in: dict  # X_D's first projection layer (kernel [5, h], bias [h])
  project_out: jnp.ndarray  # [h, h] the projection's last layer times K_X
  project_bias: jnp.ndarray  # [h]
  score_out: dict  # the last scoring layer (kernel [h, 1], bias [1])


def placer_terms(params, embeddings, z) -> PlacerTerms:
  """`Placer`'s parameters folded for the op embeddings H [N, h] and Z [N, h] of an episode."""
  layers = params["params"]
  project, score = layers["_MLP_0"], layers["_MLP_1"]
  h = embeddings.shape[-1]
  kernel = score["Dense_0"]["kernel"]  # [4h, h]: H[v], the device's ops, X_D projected, Z[v].
  folded = kernel[2 * h:3 * h]
  return PlacerTerms(
      own=embeddings @ kernel[:h] + z @ kernel[3 * h:] + score["Dense_0"]["bias"],
      on_device=embeddings @ kernel[h:2 * h], project_in=project["Dense_0"],
      project_out=project["Dense_1"]["kernel"] @ folded,
      project_bias=project["Dense_1"]["bias"] @ folded, score_out=score["Dense_1"])


def folded_placer_logits(terms: PlacerTerms, own, device_part, device_features):
  """Device scores [..., D] from an op's `own` row [..., h], each device's summed `on_device`
  rows [..., D, h] and X_D [..., D, 5]: `Placer` up to float rounding (a test holds them
  together)."""
  hidden = nn.leaky_relu(device_features @ terms.project_in["kernel"] + terms.project_in["bias"])
  hidden = own[..., None, :] + device_part + hidden @ terms.project_out + terms.project_bias
  return (nn.leaky_relu(hidden) @ terms.score_out["kernel"] + terms.score_out["bias"])[..., 0]
