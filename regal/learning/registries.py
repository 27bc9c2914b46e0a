"""The learning layer's registries (`regal_datasets.registry.Registry`), importable without JAX:
the built-in names are declared here, their records (`learners.Learner`) load with
`regal.learning.learners` on first use."""
from __future__ import annotations

from regal_datasets.registry import Registry

LEARNERS = Registry("learner")  # `regal.train`'s `config.learner`.

LEARNERS.declare("regal.learning.learners", "prior", "mutants")
