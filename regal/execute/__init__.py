"""Running placements on real devices: programs (what each op computes), the executor (a
work-conserving event loop over `jax.devices()`), calibration and measured rewards."""
