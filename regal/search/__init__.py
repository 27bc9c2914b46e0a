"""Search over a graph: BRKGA with local improvement (`brkga_search`), its seed arms
(`seed_arms`), tuned parameter presets (`brkga_presets`), local moves (`local_moves`) and
graph coarsening for large graphs (`coarsen`).

`regal.search.optimize(problem, ...)` is the search `regal.optimize --method brkga` runs.
"""
from regal.search.brkga_search import (MIN_DEFAULT_EVALS, REFINE_BATCH, Memetic, SearchResult,
                                       SearchSettings, bucketed, default_evals, default_params,
                                       optimize, refine_evals, search_layout,
                                       single_device_seed, swap_fraction)

__all__ = ["MIN_DEFAULT_EVALS", "REFINE_BATCH", "Memetic", "SearchResult", "SearchSettings",
           "bucketed", "default_evals", "default_params", "optimize", "refine_evals",
           "search_layout", "single_device_seed", "swap_fraction"]
