r"""Our JAX BRKGA against brkga-mp-ipr on one 200-op synthetic graph, 5000 evaluations.

  pip install brkga-mp-ipr==0.9.1   # the reference library (not a regal dependency)
  python -m regal_experiments.bench.brkga [--seeds 5] [--evals 5000] [--engines native,jax]

Both search the same chromosomes with the same budget and the same hyperparameters (Goncalves &
Resende defaults, rho = 0.7, one population), scored by the same WC model: ours under `jit` with
the default scoring engine on a CPU (`native`: the compiled host event loop,
`regal.scoring.wc.native`) and, for comparison, the lockstep JAX model (`jax`); the library one
chromosome at a time with our readable reference model (`regal.scoring.wc.reference`), as a
user wiring the library to a Python decoder would. It prints, per seed and on average: our
search and compile wall times per engine, the library's wall time, the best makespans, and the
speed ratio. Each evaluation the library asks for is counted; it stops before a generation that
would exceed the budget. Both engines score a chromosome bit for bit alike, but the native one
searches chromosomes padded to a size bucket (one compiled search per bucket), so its random
draws, and hence its best, differ from the JAX engine's.
"""
from __future__ import annotations

from regal_datasets import cli

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from regal.scoring import parallel  # noqa: E402

parallel.use_all_cpu_cores()  # Before JAX starts.

import json  # noqa: E402
import time  # noqa: E402
from typing import Sequence  # noqa: E402

import numpy as np  # noqa: E402
from absl import flags  # noqa: E402

from regal_datasets import atomic, errors  # noqa: E402
from regal_datasets import devices as devices_lib  # noqa: E402
from regal_datasets.synthetic import sized_graph  # noqa: E402
from regal_experiments import command  # noqa: E402
from regal import search  # noqa: E402
from regal.scoring import performance  # noqa: E402

_SEEDS = flags.DEFINE_integer("seeds", 5, "Seeds to average over.", lower_bound=1, upper_bound=1000)
_EVALS = flags.DEFINE_integer("evals", 5000, "Evaluation budget per search.",
                              lower_bound=1, upper_bound=1_000_000_000)
_JSON = flags.DEFINE_string("json", None, "Also write the figures here as JSON.")
_ENGINES = flags.DEFINE_list("engines", ["native", "jax"], "Our scoring engines to time (the "
                             "first is the headline).")


def check_peer() -> None:
  """The peer this benchmark compares with, installed (else one line, before any work)."""
  import importlib.util
  if importlib.util.find_spec("brkga_mp_ipr") is None:
    raise errors.ConfigError('brkga-mp-ipr is not installed: pip install -e ".[bench]" (the '
                             'peer this benchmark compares with)')


def library_search(problem: performance.Problem, params, budget: int, seed: int):
  """brkga-mp-ipr with our reference decoder; returns (best objective, seconds, evaluations)."""
  from brkga_mp_ipr.algorithm import BrkgaMpIpr
  from brkga_mp_ipr.enums import Sense
  from brkga_mp_ipr.types import BrkgaParams

  class Decoder:
    calls = 0

    def decode(self, chromosome, rewrite: bool) -> float:
      del rewrite
      Decoder.calls += 1
      return performance.score_reference(problem, np.asarray(chromosome, np.float32))[0]

  settings = BrkgaParams()
  settings.population_size = params.population_size
  settings.elite_percentage = params.num_elites / params.population_size
  settings.mutants_percentage = params.num_mutants / params.population_size
  settings.num_elite_parents = 1
  settings.total_parents = 2
  settings.num_independent_populations = 1
  start = time.perf_counter()
  brkga = BrkgaMpIpr(decoder=Decoder(), sense=Sense.MINIMIZE, seed=seed,
                     chromosome_size=problem.layout.size, params=settings)
  rho = float(np.asarray(params.rho))
  brkga.set_bias_custom_function(lambda rank: rho if rank == 1 else 1.0 - rho)
  brkga.initialize()
  per_generation = params.population_size - params.num_elites
  while Decoder.calls + per_generation <= budget:
    brkga.evolve(1)
  return brkga.get_best_fitness(), time.perf_counter() - start, Decoder.calls


def main(argv: Sequence[str]) -> None:
  command.check(argv, out_flag=None)
  command.choices("engines", _ENGINES.value, performance.ENGINES)
  check_peer()
  if _JSON.value:
    atomic.check_output(_JSON.value, "--json")
  graph = sized_graph(200)
  problems = {engine: performance.Problem(graph, devices_lib.homogeneous(2), engine=engine)
              for engine in _ENGINES.value}
  headline = _ENGINES.value[0]
  problem = problems[headline]
  params = search.default_params(problem)
  print(f"graph: {graph.num_ops} ops, {graph.num_edges} edges; population "
        f"{params.population_size}, elites {params.num_elites}, mutants {params.num_mutants}; "
        f"budget {_EVALS.value}; engines {', '.join(_ENGINES.value)}")
  rows = []
  for seed in range(_SEEDS.value):
    row = {"seed": seed}
    for engine, engine_problem in problems.items():
      ours = search.optimize(performance.Evaluator.of(engine_problem), evals=_EVALS.value,
                             seed=seed, params=params)
      row.update({f"{engine}_search_s": ours.search_seconds,
                  f"{engine}_compile_s": ours.compile_seconds,
                  f"{engine}_makespan": ours.objective, f"{engine}_evals": ours.evaluations})
    theirs, seconds, calls = library_search(problem, params, _EVALS.value, seed)
    row.update({"library_s": seconds, "library_makespan": theirs, "library_evals": calls})
    rows.append(row)
    ours_text = " | ".join(
        f"ours ({engine}) {row[f'{engine}_search_s']:.3f} s search "
        f"(+{row[f'{engine}_compile_s']:.1f} s compile), makespan "
        f"{row[f'{engine}_makespan']:.0f} in {row[f'{engine}_evals']} evals"
        for engine in problems)
    print(f"seed {seed}: {ours_text} | brkga-mp-ipr {seconds:.2f} s, makespan {theirs:.0f} in "
          f"{calls} evals", flush=True)
  mean = lambda key: float(np.mean([r[key] for r in rows]))  # noqa: E731
  engines_text = ", ".join(f"{engine} {mean(f'{engine}_search_s'):.3f} s" for engine in problems)
  print(f"mean search: ours {engines_text}; library {mean('library_s'):.2f} s "
        f"({mean('library_s') / mean(f'{headline}_search_s'):.1f}x slower than ours "
        f"({headline})); makespan ours {mean(f'{headline}_makespan'):.1f} vs library "
        f"{mean('library_makespan'):.1f}")
  if _JSON.value:
    atomic.write_text(_JSON.value, json.dumps({"rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
  cli.run_cli(main, stop_searches_early=False)
