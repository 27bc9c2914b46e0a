"""The names `python -m regal.optimize` offers, importable without JAX, numba or Ray.

The registries (`regal.scoring.models` and `performance`, `app.methods`,
`doppler_policy.method`) load the scorers and solvers they name; the command line needs only
the names to define its flags, so that a mistyped flag or a missing file is refused before
any of them loads (well under a second). A test (`tests/cli_contract_test.py`) holds these
names equal to the registries'.
"""
MODELS = ("wc", "sync", "doppler", "delay")  # `performance.MODELS`, the schedule models.
SPLIT_MODEL = "blocks"  # `pipeline_lib.MODEL`: a profiled workload's single-sample latency.
OBJECTIVES = ("runtime", "memory", "runtime_under_memory")  # `performance.OBJECTIVES`.
SPLIT_OBJECTIVE = "throughput"  # `pipeline_lib.OBJECTIVE`: a profiled workload's pipeline.
ENGINES = ("auto", "jax", "native")  # `performance.ENGINES`.
DECODERS = ("direct", "list", "consumer")  # `regal.scoring.decoders.BUILT_IN`.
METHODS = ("brkga", "doppler", "critical_path", "critical_path_doppler", "heft", "gp_dfs",
           "local_search", "hill_climb", "random", "enumerative", "cpsat",
           "quickp", "data_parallel")  # `methods.METHODS`.
SPLIT_METHODS = ("cpsat", "search", "pipedream", "contiguous_dp",
                 "one_accelerator")  # `methods.SPLIT_METHODS`.
ARMS = ("single_device", "critical_path", "critical_path_doppler", "heft", "gp_dfs",
        "doppler")  # `methods.ARMS`: BRKGA's seed arms.
DEFAULT_ARMS = ARMS[:-1]  # `methods.DEFAULT_ARMS`: every cheap one.
PRIORS = ("none", "bottom_level", "group_island")  # `guides.PRIORS`: parameter-free priors of fresh keys.
MAX_EVALS = 10 ** 9  # `methods.MAX_EVALS`.
SHARD_MODES = ("off", "auto")  # `--shard`: these or a shard count (`regal.app.sharding`).
MAX_DOPPLER_SAMPLES = 1024  # `doppler_policy.method.MAX_SAMPLES`.
