"""The decoder registry: a decoder added here, through `decoders.register` alone (its functions in
this file, no other edit), reads the search's chromosomes in `regal.optimize`'s code path, and
its answers come back re-encoded for the direct decoder."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from regal_datasets import devices as devices_lib
from regal_datasets import errors, synthetic
from regal.app import methods, optimize_lib
from regal.scoring import chromosome as chromosome_lib
from regal.scoring import decoders, performance


CALLS = {"host": 0, "traced": 0}


def _mirror(chromosomes, layout):
  """Each op on the device of its *smallest* affinity key; priorities as the genes say."""
  CALLS["traced" if isinstance(chromosomes, jax.core.Tracer) else "host"] += 1
  direct = chromosome_lib.decode(chromosomes, layout)
  affinity = chromosomes[..., layout.affinity_slice].reshape(
      *chromosomes.shape[:-1], layout.num_ops, layout.num_devices)
  placement = jnp.argmin(affinity, axis=-1).astype(jnp.int32)
  return chromosome_lib.Decoded(placement, direct.op_priority, direct.transfer_priority)


@pytest.fixture(scope="module")
def mirror():
  decoder = decoders.register(decoders.Decoder(
      "mirror_test",
      host=lambda problem, bias: lambda c: jax.tree_util.tree_map(
          np.asarray, _mirror(jnp.asarray(c, jnp.float32), problem.layout)),
      traced=lambda problem, chromosomes, bias: jax.vmap(
          lambda c: _mirror(c, problem.layout))(chromosomes),
      shardable=True))
  yield decoder
  decoders.unregister(decoder.name)


def test_a_registered_decoder_reads_the_search_and_its_answer_is_re_encoded(mirror):
  graph = synthetic.generate(np.random.default_rng(3),
                             synthetic.SyntheticSpec(min_nodes=12, max_nodes=12))
  devices = devices_lib.homogeneous(2)
  problem = performance.Problem(graph, devices)
  genes = np.random.default_rng(0).random((4, problem.layout.size)).astype(np.float32)
  affinity = genes[:, problem.layout.affinity_slice].reshape(4, graph.num_ops, 2)
  decoded = performance.host_decoder(problem, mirror.name)(genes)
  np.testing.assert_array_equal(decoded.placement, affinity.argmin(-1))
  # The jitted fitness reads the genes through it too.
  mirrored = chromosome_lib.encode(np.asarray(decoded.placement[0]),
                                   chromosome_lib.priority_order(decoded.op_priority[0]),
                                   problem.layout)
  fitness = performance.make_fitness_fn(problem, mirror.name)
  assert float(fitness(genes[:1])[0]) == pytest.approx(
      performance.score_reference(problem, mirrored)[0], rel=1e-6)
  CALLS.update(host=0, traced=0)
  report = optimize_lib.run(graph, devices, methods.RunConfig(
      evals=600, brkga=methods.BrkgaOptions(decoder=mirror.name)))
  assert report.result.settings["brkga"]["decoder"] == mirror.name
  assert CALLS["host"] + CALLS["traced"] > 0  # The search read its chromosomes with it.
  placement, order, makespan = report.assignments["best"]
  chromosome = chromosome_lib.encode(placement, order, problem.layout)  # For the direct one.
  assert performance.score_reference(problem, chromosome)[1].makespan == pytest.approx(makespan)


def test_the_registry_refuses_a_name_twice_and_an_unknown_one(mirror):
  with pytest.raises(ValueError, match="registered already"):
    decoders.register(mirror)
  with pytest.raises(errors.ConfigError, match="unknown decoder 'nope'; known: direct"):
    decoders.get("nope")
