"""A generic, domain-free BRKGA (biased random-key genetic algorithm) engine in JAX.

Knows nothing about graphs: it evolves random-key chromosomes against any fitness function.
"""
from regal_brkga.engine import (BEST, BUDGET_GENERATIONS, ELITE_FRACTION, MUTANT_FRACTION,
                          RESTART_FROM, SEEDS, ImproveFn, Params, Result, State, ask,
                          beta_sample, crossover, goncalves_resende, improved, init,
                          initial_population, max_generations, mutants, run, seed_origin, tell,
                          with_prior)
from regal_brkga.host_loop import run_on_host

__all__ = ["BEST", "BUDGET_GENERATIONS", "ELITE_FRACTION", "MUTANT_FRACTION", "RESTART_FROM",
           "SEEDS", "ImproveFn", "Params", "Result", "State", "ask", "crossover",
           "goncalves_resende", "improved", "init", "initial_population", "beta_sample",
           "max_generations", "mutants", "run", "run_on_host", "seed_origin", "tell",
           "with_prior"]
