"""What every experiment command checks before any work: no stray arguments, no flag that
`--quick` replaces by its own value (it would do nothing), an output folder it can write
(an unwritable `--out` found after an hour of measuring loses the hour); and `run_optimize`,
a `regal.optimize` run as a user starts it, for the benchmarks that time whole runs."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Sequence

from absl import flags

from regal_datasets import atomic, errors


def check(argv: Sequence[str], quick_overrides: Sequence[str] = (),
          out_flag: str | None = "out") -> None:
  """Refuses, with one line each: arguments that are not flags; with --quick, any flag of
  `quick_overrides` given; an `--out_flag` folder that cannot be written."""
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  if "quick" in flags.FLAGS and flags.FLAGS["quick"].value:
    given = [name for name in quick_overrides if flags.FLAGS[name].present]
    if given:
      raise errors.ConfigError(f"--{given[0]} would do nothing here: --quick sets its own "
                               f"value (drop --{given[0]}, or --quick)")
  if out_flag is not None:
    atomic.check_output_dir(flags.FLAGS[out_flag].value, f"--{out_flag}")


def integers(flag: str, values: Sequence[str], low: int, high: int) -> list[int]:
  """A list flag's integers, each in [low, high], at least one (else one line naming --flag)."""
  try:
    numbers = [int(value) for value in values]
  except ValueError:
    raise errors.ConfigError(f"--{flag} takes integers, got "
                             f"{errors.brief(','.join(values))}") from None
  if not numbers or not all(low <= n <= high for n in numbers):
    raise errors.ConfigError(f"--{flag} takes one or more integers from {low:,} to {high:,}, "
                             f"got {errors.brief(','.join(values))}")
  return numbers


def choices(flag: str, values: Sequence[str], known: Sequence[str]) -> list[str]:
  """A list flag's names, at least one, each one of `known` (else one line naming --flag)."""
  unknown = [value for value in values if value not in known]
  if unknown or not values:
    raise errors.ConfigError(f"--{flag}: {'unknown ' + repr(unknown[0]) if unknown else 'empty'}"
                             f"; known: {', '.join(known)}")
  return list(values)


def run_optimize(args: Sequence[str], out: str, env: dict[str, str] | None = None,
                 cwd: str | None = None) -> tuple[dict, float]:
  """(result JSON, wall seconds) of one `python -m regal.optimize ARGS --out OUT` process;
  a failed run is one error line naming its last line of stderr."""
  start = time.perf_counter()
  done = subprocess.run([sys.executable, "-m", "regal.optimize", *args, "--out", out], env=env,
                        cwd=cwd, capture_output=True, text=True)
  wall = time.perf_counter() - start
  if done.returncode != 0:
    where = f" in {cwd}" if cwd else ""
    raise errors.RegalError(f"regal.optimize {' '.join(args)}{where} failed: "
                            f"{done.stderr.strip().splitlines()[-1:]}")
  with open(out) as f:
    return json.load(f), wall
