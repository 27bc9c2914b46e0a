"""The app layer's registries (`regal_datasets.registry.Registry`), importable without JAX:
the built-in names are declared here, their records (`methods.Method`) load with
`regal.app.methods` on first use. A method that takes both kinds of problem (cpsat) is in
both."""
from __future__ import annotations

from regal_datasets.registry import Registry

METHODS = Registry("method")  # `regal.optimize --method` on a graph: placement and order.
SPLIT_METHODS = Registry("split method")  # On a profiled workload: its pipeline split.

METHODS.declare("regal.app.methods", "brkga", "doppler", "critical_path",
                "critical_path_doppler", "heft", "gp_dfs", "local_search", "hill_climb",
                "random", "enumerative", "cpsat", "quickp", "data_parallel")
SPLIT_METHODS.declare("regal.app.methods", "cpsat", "search", "pipedream", "contiguous_dp",
                      "one_accelerator")
