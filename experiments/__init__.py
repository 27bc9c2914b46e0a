"""Sweeps, paper-table reproductions, benchmarks and reports. See WORKSPACE.md."""
