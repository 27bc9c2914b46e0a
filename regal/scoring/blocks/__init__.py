"""Single-sample latency of a profiled workload's split into contiguous blocks (Tarnawski et
al.).

`reference` is the readable latency, feasibility and bound; `native` the compiled scoring and
descent of the local search (`regal.baselines.pipeline_local_search`).
"""
from regal.scoring.model_record import SplitModel


def _latency(workload, split):
  from regal.scoring.blocks import reference
  return reference.latency(workload, split)


def _violations(workload, split):
  from regal.scoring.blocks import reference
  return reference.violations(workload, split)


def _lower_bound(workload):
  from regal.scoring.blocks import reference
  return reference.lower_bound(workload)


MODEL = SplitModel(
    "blocks", "single-sample latency, contiguous blocks", "--model blocks",
    _latency, _violations, _lower_bound, kernel="blocks",
    # 1-4 s on the shared workloads: each move is scored in full.
    default_evals=100_000)
