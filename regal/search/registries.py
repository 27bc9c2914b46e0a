"""The search layer's registries (`regal_datasets.registry.Registry`), importable without JAX:
the built-in names are declared here, their records (`guides.Prior`) load with
`regal.search.guides` on first use."""
from __future__ import annotations

from regal_datasets.registry import Registry

PRIORS = Registry("prior")  # `regal.optimize --prior`: parameter-free priors of fresh keys.

PRIORS.declare("regal.search.guides", "none", "bottom_level", "group_island")
