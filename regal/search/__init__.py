"""Search over a graph: BRKGA with local improvement (`brkga_search`), the guides that steer
it (`guides`: seeds and mutant distributions; `guides.run_guided` is the one search), tuned
parameter presets (`brkga_presets`) and local moves (`local_moves`); graphs too large to
search whole are coarsened first (`regal_datasets.coarsen`).

`regal.search.optimize(problem, ...)` is the search `regal.optimize --method brkga` runs.
"""
from regal.search.brkga_search import (MIN_DEFAULT_EVALS, REFINE_BATCH, Memetic, SearchResult,
                                       SearchSettings, bucketed, default_evals, default_params,
                                       optimize, refine_evals, search_layout,
                                       single_device_seed, swap_fraction)

__all__ = ["MIN_DEFAULT_EVALS", "REFINE_BATCH", "Memetic", "SearchResult", "SearchSettings",
           "bucketed", "default_evals", "default_params", "optimize", "refine_evals",
           "search_layout", "single_device_seed", "swap_fraction"]
