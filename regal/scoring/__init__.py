"""Scoring: how good a placement and schedule are.

A chromosome (`chromosome`) decodes to a placement, op priorities and transfer priorities; a
performance model turns them into a `schedule.Schedule`. `performance.Problem` names the graph,
devices, model and objective, and `performance` picks the engine that scores a population from
the model's record in `models` (the one registry of the models):

| model | readable reference (test oracle) | JAX engine | native (numba) engine |
|---|---|---|---|
| wc (work-conserving, Doppler paper) | `reference_models.simulate_wc` | `wc_model` | `native_wc` |
| sync (REGAL's, with peak memory) | `reference_models.simulate_synchronous` | `sync_model` | `native_sync` |
| doppler (the Doppler repository's simulator) | `doppler_sim` (SimPy) | - | `native_doppler` |
| delay (task-scheduling literature) | `reference_models.simulate_delay` | `delay_model` | `native_delay` |

The JAX engines walk the padded work lists of `sim_graph` (shared steps in `sim_shared`,
bit-set helpers in `ranked_sets`); `list_decoder` is the list-scheduling decoder; `parallel`
spreads a population over the host's cores (one host device per core).
"""
