"""The baselines layer's registry, importable without JAX: the built-in heuristics' names are
declared here, their records (`heuristics.Heuristic`) load with `regal.baselines.heuristics`
on first use."""
from __future__ import annotations

from regal_datasets.registry import Registry

# The cheap constructive heuristics: BRKGA's seed arms (`regal.optimize --seed_arms`), the hill
# climb's starts, the policy's features.
HEURISTICS = Registry("heuristic")

HEURISTICS.declare("regal.baselines.heuristics", "single_device", "critical_path",
                   "critical_path_doppler", "heft", "gp_dfs")
