"""A generic, domain-free BRKGA (biased random-key genetic algorithm) engine in JAX.

Knows nothing about graphs: it evolves random-key chromosomes against any fitness function.
The engine itself arrives with the BRKGA issue; see WORKSPACE.md for the plan.
"""
