"""Pipeline max-load of a profiled workload's split (Tarnawski et al.): time per sample.

`reference` is the readable value, feasibility and bound; `native` the compiled move scoring
of the local search (`regal.baselines.pipeline_local_search`).
"""
from regal.scoring.model_record import SplitModel
from regal.scoring.throughput import reference  # NumPy alone; `native` loads with its search.

MODEL = SplitModel(
    "throughput", "pipeline max-load (time per sample)", "--objective throughput",
    reference.max_load, reference.violations, reference.lower_bound, kernel="throughput",
    # 1-6 s on the shared workloads (2-core CPU): moves are scored by change. A 2,142-op graph
    # (BERT-6 training twice, 494 classes) ended at its start with 4M moves (142.40) and
    # reached 140.46-140.54 with 8M (seeds 0-2, 9-11 s); 16K moves a class gives it 7.9M.
    default_evals=4_000_000, evals_per_class=16_000)
