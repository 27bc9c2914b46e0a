"""The scoring layer's registries (`regal_datasets.registry.Registry`), importable without JAX
or numba: the built-in names are declared here, their records load with the module that
registers them on first use. `models` and `decoders` hold the records and their functions."""
from __future__ import annotations

from regal_datasets.registry import Registry

MODELS = Registry("model")  # Schedule models: a graph's placement and order scored.
SPLIT_MODELS = Registry("split model")  # A profiled workload's split scored.
DECODERS = Registry("decoder")  # Chromosome -> placement, op and transfer priorities.

MODELS.declare("regal.scoring.models", "wc", "sync", "doppler", "delay")
SPLIT_MODELS.declare("regal.scoring.models", "throughput", "blocks")
DECODERS.declare("regal.scoring.decoders", "direct", "list", "consumer")

# Not records, names: what a problem minimises (`performance.objective_value` says how) and how
# its batched scoring runs (`performance.scoring_engine`).
OBJECTIVES = ("runtime", "memory", "runtime_under_memory")
ENGINES = ("auto", "jax", "native")
