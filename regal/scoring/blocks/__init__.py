"""Single-sample latency of a profiled workload's split into contiguous blocks (Tarnawski et
al.).

`reference` is the readable latency, feasibility and bound; `native` the compiled scoring and
descent of the local search (`regal.baselines.pipeline_local_search`).
"""
from regal.scoring.blocks import native, reference  # noqa: F401  (the package's parts)
from regal.scoring.model_record import SplitModel

MODEL = SplitModel(
    "blocks", "single-sample latency, contiguous blocks", "--model blocks",
    reference.latency, reference.violations, reference.lower_bound, kernel="blocks",
    # 1-4 s on the shared workloads: each move is scored in full.
    default_evals=100_000)
