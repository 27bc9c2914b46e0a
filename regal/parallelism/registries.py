"""The parallelism layer's registry, importable without JAX: the configurations' names are
declared here, their records (`configurations.Configuration`) load on first use."""
from __future__ import annotations

from regal_datasets.registry import Registry

CONFIGURATIONS = Registry("configuration")  # `regal.optimize --method` on a training step.
CONFIGURATIONS.declare("regal.parallelism.configurations", "data_parallel", "fsdp",
                       "tensor_parallel", "tensor_data", "pipeline_data", "auto")
