"""Scoring: how good a placement and schedule are.

A chromosome (`chromosome`) decodes to a placement, op priorities and transfer priorities
(`decoders`: the decoder registry); a performance model turns them into a `schedule.Schedule`.
`performance.Problem` names the graph, devices, model and objective, and `performance.Evaluator`
builds, once, what scores a population from the model's record in `models` (the one registry of
the models).

Each model is a package: its readable reference (`reference.py`, the test oracle), its compiled
host loop (`native.py`, numba) and its JAX version (`batched.py`) where it has them, and its
record (`__init__.py`):

| package | model | reference | native | JAX |
|---|---|---|---|---|
| `wc` | work-conserving (Doppler paper), peak memory | yes | yes | yes |
| `sync` | REGAL's synchronous transfers, peak memory | yes | yes | yes |
| `delay` | the task-scheduling literature's delay model | yes | yes | yes |
| `doppler` | the Doppler repository's simulator (SimPy) | yes | yes | - |
| `throughput` | a profiled workload's pipeline max-load | yes | yes | - |
| `blocks` | a profiled workload's single-sample latency | yes | yes | - |

Shared beside them: `reference_common` (what the references share: adjacency, memory model),
`sim_graph` / `sim_shared` / `ranked_sets` (what the JAX event models walk), `native_common`
(heaps and threads of the compiled loops), `list_decoder` / `consumer_transfers` (decoders),
`bounds`, `moves`, `parallel` (a population over the host's cores).
"""
