"""Search over a graph: BRKGA with local improvement (`brkga_search`), the guides that steer
it (`guides`: seeds and mutant distributions; `guides.run_guided` is the one search), tuned
parameter presets (`brkga_presets`) and local moves (`local_moves`); graphs too large to
search whole are coarsened first (`regal_datasets.coarsen`).

`regal.search.optimize(problem, ...)` is the search `regal.optimize --method brkga` runs.
"""
__all__ = ["MIN_DEFAULT_EVALS", "REFINE_BATCH", "Control", "Memetic", "SearchResult",
           "SearchSettings", "bucketed", "default_evals", "default_params", "optimize",
           "refine_evals", "search_layout", "single_device_seed", "swap_fraction"]


def __getattr__(name: str):
  # Loaded on first use: the package's registries (`registries`) are read without JAX.
  if name in __all__:
    from regal.search import brkga_search
    return getattr(brkga_search, name)
  raise AttributeError(f"module 'regal.search' has no attribute {name!r}")
