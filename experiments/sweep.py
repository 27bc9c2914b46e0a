r"""Runs a named parameter sweep as Ray tasks, resumably.

  python -m experiments.sweep --sweep brkga_tuning            # 648 settings, ~2 h on 2 cores
  python -m experiments.sweep --sweep brkga_tuning --quick    # 2 settings, ~35 s
  python -m experiments.sweep --sweep selftest --local        # in this process, no Ray
  python -m experiments.sweep --sweep brkga_tuning --ray_address auto   # an existing cluster

Results: one JSON line per finished trial in `--out/<sweep>[-quick].jsonl`; rerunning skips
the finished trials. Sweeps are defined in `experiments/sweeps.py`.
"""
from __future__ import annotations

from typing import Sequence

from absl import flags

from datasets import errors

_SWEEP = flags.DEFINE_string("sweep", None, "Sweep name (experiments/sweeps.py).")
_OUT = flags.DEFINE_string("out", "experiments/results/sweeps", "Results folder.")
_QUICK = flags.DEFINE_bool("quick", False, "The sweep's reduced grid and trial size.")
_LOCAL = flags.DEFINE_bool("local", False, "Run trials in this process, one after another.")
_RAY_ADDRESS = flags.DEFINE_string("ray_address", None, "Join this Ray cluster.")
_NUM_CPUS = flags.DEFINE_integer("num_cpus", None, "CPUs of the local Ray cluster.")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  from experiments import sweep_lib, sweeps
  if _SWEEP.value not in sweeps.SWEEPS:
    raise errors.ConfigError(f"unknown sweep {_SWEEP.value!r}; known: "
                             f"{', '.join(sorted(sweeps.SWEEPS))}")
  records = sweep_lib.run(sweeps.SWEEPS[_SWEEP.value], _OUT.value, quick=_QUICK.value,
                          local=_LOCAL.value, address=_RAY_ADDRESS.value,
                          num_cpus=_NUM_CPUS.value, progress=lambda line: print(line, flush=True))
  ok = [r for r in records.values() if r["status"] == "ok"]
  if ok and "score" in ok[0]["result"]:
    best = min(ok, key=lambda r: r["result"]["score"])
    print(f"best: score {best['result']['score']:.6g} with {best['params']}")


if __name__ == "__main__":
  errors.run_cli(main)
