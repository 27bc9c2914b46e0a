"""Benchmarks that print measured ratios (ours against a reference) from one run."""
