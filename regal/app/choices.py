"""The names `python -m regal.optimize` offers, importable without JAX, numba or Ray.

The registries (`regal.scoring.registries`, `search.registries`, `app.registries`) declare
their built-in names in modules that load nothing else; the records, and the scorers and
solvers they name, load on first use. The command line needs only the names to define its
flags, so that a mistyped flag or a missing file is refused before any of them loads (well
under a second). What is not a registry yet is listed here, held equal to its home by
`tests/cli_contract_test.py`.
"""
from regal.app import registries as app_registries
from regal.baselines import registries as baseline_registries
from regal.doppler_policy import options as doppler_options
from regal.parallelism import registries as parallelism_registries
from regal.scoring import registries as scoring_registries
from regal.search import registries as search_registries

# Registered names as the process starts (`--help`); a flag's value is checked against the
# registry when the flags are read, so one registered later is accepted too.
MODEL_REGISTRY = scoring_registries.MODELS  # Schedule models.
DECODER_REGISTRY = scoring_registries.DECODERS
METHOD_REGISTRY = app_registries.METHODS
SPLIT_METHOD_REGISTRY = app_registries.SPLIT_METHODS
PRIOR_REGISTRY = search_registries.PRIORS
CONFIGURATION_REGISTRY = parallelism_registries.CONFIGURATIONS  # A training step's meshes.


class Registries:
  """Several registries' names as one: what `--method` accepts besides a placement method."""

  def __init__(self, *registries):
    self.registries = registries

  def __contains__(self, name: object) -> bool:
    return any(name in registry for registry in self.registries)

  def __iter__(self):
    return iter(dict.fromkeys(n for registry in self.registries for n in registry))


MODELS = MODEL_REGISTRY.names()
DECODERS = DECODER_REGISTRY.names()
METHODS = METHOD_REGISTRY.names()
SPLIT_METHODS = SPLIT_METHOD_REGISTRY.names()
SPLIT_MODEL = "blocks"  # `pipeline_lib.MODEL`: a profiled workload's single-sample latency.
OBJECTIVES = scoring_registries.OBJECTIVES
SPLIT_OBJECTIVE = "throughput"  # `pipeline_lib.OBJECTIVE`: a profiled workload's pipeline.
ENGINES = scoring_registries.ENGINES
HEURISTIC_REGISTRY = baseline_registries.HEURISTICS  # BRKGA's seed arms, with Doppler's policy.
DEFAULT_ARMS = HEURISTIC_REGISTRY.names()  # `methods.DEFAULT_ARMS`: every built-in one.
ARMS = (*DEFAULT_ARMS, doppler_options.NAME)  # As the process starts: `methods.known_arms()`.
PRIORS = PRIOR_REGISTRY.names()  # Parameter-free priors of fresh keys.
MAX_EVALS = 10 ** 9  # `methods.MAX_EVALS`.
SHARD_MODES = ("off", "auto")  # `--shard`: these or a shard count (`regal.app.sharding`).
MAX_DOPPLER_SAMPLES = doppler_options.MAX_SAMPLES
