"""Training the learned prior (`prior_net`) by imitation of long runs, and running it as a guide.

Labels (issue 68, item 1): for each training graph the best answer of `runs` unguided searches
of `label_evals` evaluations each (10x and more the evaluated budget), computed on the Ray
actors (`rollout_pool.RolloutPool`) and saved per graph as they finish, so a killed run resumes
with none lost (`workdir.per_graph_stage`). From an answer: each op's key at its schedule
position and its placement class (`prior_net.key_label`, `prior_net.placement_classes`).

Training: full-batch Adam on the training graphs' summed key and class losses; the parameters
kept are those of the step with the lowest loss on the validation graphs' labels (validation
graphs only choose; the test graphs are never seen).

`PriorGuide` is a guide of the one search (`regal.search.guides`): the graph's features (its
heuristic seeds included: no model evaluation), one forward pass, and the prior's keys
(`prior_net.steered_keys`) with probability `q`.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Callable, Sequence

import jax
import numpy as np

from regal_datasets.padding import bucket_size
from regal.learning import features as features_lib
from regal.learning import prior_net
from regal.learning import policy as policy_lib
from regal.learning import rollout
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import performance
from regal.search import guides


def answer_tasks(index: int, runs: int, evals: int, seed_base: int) -> list[rollout.Task]:
  """The long runs of graph `index`: unguided, `evals` each, seeds of their own."""
  return [rollout.Task(index, None, None, seed_base + 7919 * index + run, evals=evals, best=True)
          for run in range(runs)]


def best_answer(results: Sequence[tuple[float, np.ndarray]]) -> np.ndarray:
  """The chromosome of the lowest objective among one graph's long runs (first on ties)."""
  objectives = [objective for objective, _ in results]
  return np.asarray(results[int(np.argmin(objectives))][1], np.float32)


def labels(problem: performance.Problem, answer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(label keys [o], placement classes [o]) of one answer chromosome on the problem."""
  graph = problem.graph
  placement, _ = chromosome_lib.assignment(answer, problem.layout)
  priority = chromosome_lib.decode(np.asarray(answer, np.float32), problem.layout).op_priority
  position = features_lib.schedule_positions(graph, np.asarray(priority))[0]
  return (prior_net.key_label(position, graph.num_ops),
          prior_net.placement_classes(problem.devices)[placement])


def features(problem: performance.Problem, seed_placements: bool = True,
             seeds: dict[str, np.ndarray] | None = None):
  """The prior's features of one problem: the policy's (`features.graph_features`, the
  heuristic seeds' shares and positions included), then per heuristic seed the one-hot
  placement class of each op. The long run descends from those seeds, so which seed's split
  it keeps is most of what its placement says (on the validation graphs the class accuracy
  went from 0.83 with the shares alone to 0.95; experiments/results/learned_prior_table).
  `seed_placements=False`: the policy's features alone (that table's shares-only rows);
  `seeds`: the heuristics' chromosomes when the caller has them (else computed)."""
  from regal.baselines import heuristics  # Light at import time elsewhere.
  if seeds is None or set(seeds) != set(heuristics.HEURISTICS):
    seeds = heuristics.seeds(problem)
  else:
    seeds = {name: seeds[name] for name in heuristics.HEURISTICS}  # Their fixed order.
  graph = features_lib.graph_features(problem, features_lib.seed_features(problem, seeds))
  if not seed_placements:
    return graph
  classes = prior_net.placement_classes(problem.devices)
  one_hot = np.eye(int(classes.max()) + 1, dtype=np.float32)
  placements = [one_hot[classes[chromosome_lib.assignment(chromosome, problem.layout)[0]]]
                for chromosome in seeds.values()]
  return graph._replace(nodes=np.concatenate([graph.nodes] + placements, axis=1).astype(
      np.float32))


def batch(problems: Sequence[performance.Problem], answers: Sequence[np.ndarray],
          seed_placements: bool = True,
          seeds: Sequence[dict[str, np.ndarray]] | None = None) -> prior_net.Batch:
  """`seeds`: each problem's heuristic chromosomes when the caller has them."""
  graphs = [features(p, seed_placements, None if seeds is None else seeds[k])
            for k, p in enumerate(problems)]
  keys, classes = zip(*(labels(p, a) for p, a in zip(problems, answers)))
  nodes = sum(p.graph.num_ops for p in problems)
  edges = sum(int(g.n_edge[0]) for g in graphs)
  return prior_net.make_batch(graphs, list(keys), list(classes), bucket_size(nodes + 1),
                              bucket_size(max(edges, 1)))


@dataclasses.dataclass(frozen=True)
class TrainSettings:
  """Adam at a constant rate. `schedule="cosine"` with `clip_norm` 1: the rate decays to 0
  along a cosine and gradients are clipped; the best validation loss falls from 0.54 to 0.49
  (no more spikes), yet the search it steers did no better on the validation graphs (+2.61%
  against +2.93%, intervals overlapping; experiments/results/learned_prior_table), so the
  default stays."""
  steps: int = 400
  learning_rate: float = 3e-3
  schedule: str = "constant"  # or "cosine"
  clip_norm: float = 0.0  # 0: none.
  class_weight: float = 1.0
  seed: int = 0


def train(net: prior_net.PriorNet, train_batch: prior_net.Batch,
          valid_batch: prior_net.Batch | None, settings: TrainSettings,
          log: Callable[[int, float, float], None] | None = None):
  """(params, history): the parameters of the step with the lowest validation loss (the last
  step's without validation graphs); history rows (step, train loss, valid loss)."""
  import optax  # Local: inference (`outputs`, `PriorGuide`) needs no optimizer.
  params = net.init(jax.random.PRNGKey(settings.seed), train_batch.graph)
  rate = (optax.cosine_decay_schedule(settings.learning_rate, settings.steps)
          if settings.schedule == "cosine" else settings.learning_rate)
  optimizer = optax.adam(rate)
  if settings.clip_norm:
    optimizer = optax.chain(optax.clip_by_global_norm(settings.clip_norm), optimizer)
  opt_state = optimizer.init(params)

  @jax.jit
  def step(params, opt_state, batch):
    (loss, _), grads = jax.value_and_grad(prior_net.loss_fn, has_aux=True)(
        params, net, batch, settings.class_weight)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  evaluate = jax.jit(lambda params, batch: prior_net.loss_fn(params, net, batch,
                                                             settings.class_weight)[0])
  best, best_loss, history = params, np.inf, []
  for k in range(settings.steps):
    params, opt_state, loss = step(params, opt_state, train_batch)
    if valid_batch is not None and (k % 10 == 9 or k == settings.steps - 1):
      valid = float(evaluate(params, valid_batch))
      history.append((k + 1, float(loss), valid))
      if log is not None:
        log(k + 1, float(loss), valid)
      if valid < best_loss:
        best, best_loss = params, valid
  return (best if valid_batch is not None else params), history


_APPLY = {}


def _forward_program(net: prior_net.PriorNet):
  """The network's forward pass as a `regal_brkga.programs.Program`: a later process loads
  its executable without tracing the Flax modules again (the guide's cost:
  experiments/results/issue82/README.md);
  named by the network's configuration, so two networks of one parameter shape do not share
  an executable."""
  from regal_brkga import programs
  digest = hashlib.sha256(repr(net).encode()).hexdigest()[:16]

  def forward(params, graph):
    return net.apply(params, graph)
  forward.__name__ = forward.__qualname__ = f"prior_forward_{digest}"
  return programs.Program(forward, packages=("regal",))


def forget_compiled() -> None:
  """Drops the jitted forward passes (`outputs` traces them anew: a new process's cost)."""
  _APPLY.clear()


def outputs(net: prior_net.PriorNet, params, problem: performance.Problem,
            seed_placements: bool = True, seeds: dict[str, np.ndarray] | None = None
            ) -> prior_net.PriorOutputs:
  """The network's outputs on one problem (padded to size buckets: one compile per bucket)."""
  graph = problem.graph
  padded = policy_lib.batch_graphs([features(problem, seed_placements, seeds)],
                                   bucket_size(graph.num_ops + 1),
                                   bucket_size(max(graph.num_edges, 1)))
  if net not in _APPLY:
    _APPLY[net] = _forward_program(net)
  # As numpy: what reads them slices and maps them on the host (no eager JAX ops to compile).
  return prior_net.PriorOutputs(*(np.asarray(x) for x in _APPLY[net](params, padded)))


def label_outputs(problem: performance.Problem, answer: np.ndarray, confidence: float = 0.9,
                  spread: float = 0.5) -> prior_net.PriorOutputs:
  """The outputs of a perfect predictor of `answer`'s labels (the oracle row): its keys with
  `spread`, its classes with probability `confidence`."""
  key, classes = labels(problem, answer)
  k = prior_net.num_classes(problem.devices)
  probability = np.full((len(classes), k), (1 - confidence) / max(k - 1, 1))
  probability[np.arange(len(classes)), classes] = confidence
  return prior_net.PriorOutputs(np.log(key) - np.log1p(-key), np.full(len(key), spread),
                                np.log(probability))


PRIOR_SEEDS = ("none", "predicted", "heuristics")  # `PriorGuide.seeds`.


@dataclasses.dataclass(frozen=True)
class PriorGuide:
  """The learned prior as a guide: `outputs_of(problem)` (a trained network's forward pass, or
  an oracle's labels), fresh keys from it with probability `q`. `seeds`: also first-population
  chromosomes in the predicted order, "predicted" (the likeliest class of each op, a device
  drawn inside it with the run's seed) or "heuristics" (each heuristic seed's placement);
  "none": no seed. No model evaluation."""
  outputs_of: Callable[[performance.Problem], prior_net.PriorOutputs]
  q: float
  placement: str = "calibrated"  # `prior_net.affinity_means`.
  seeds: str = "none"

  def planned_evaluations(self, problem: performance.Problem) -> int:
    del problem
    return 0

  def guide(self, problem: performance.Problem, seed: int,
            before: guides.Guidance) -> guides.Guidance:
    outputs = self.outputs_of(problem)
    prior_q, mean, spread = prior_net.steered_keys(
        outputs, problem.graph.num_ops, problem.layout, problem.devices, self.q,
        placement=self.placement)
    return dataclasses.replace(before, prior_q=prior_q, prior_mean=mean, prior_spread=spread,
                               seeds={**before.seeds, **self._seeds(problem, outputs, seed)})

  def _seeds(self, problem: performance.Problem, outputs: prior_net.PriorOutputs,
             seed: int) -> dict[str, np.ndarray]:
    if self.seeds == "none":
      return {}
    num_ops = problem.graph.num_ops
    order = np.lexsort((np.arange(num_ops), -np.asarray(outputs.key[:num_ops])))
    if self.seeds == "predicted":
      classes = np.argmax(np.asarray(outputs.class_logits[:num_ops]), axis=-1)
      members = prior_net.placement_classes(problem.devices)
      rng = np.random.default_rng(seed)
      placement = np.array([rng.choice(np.flatnonzero(members == c)) for c in classes])
      return {"prior/predicted": chromosome_lib.encode(placement, order, problem.layout)}
    if self.seeds == "heuristics":
      from regal.baselines import heuristics
      return {f"prior/{name}": chromosome_lib.encode(placement, order, problem.layout)
              for name, (placement, _) in heuristics.assignments(problem).items()}
    raise ValueError(f"unknown prior seeds {self.seeds!r}; known: {', '.join(PRIOR_SEEDS)}")
