"""What a run asks of Doppler's policy, without loading it: the options of `--method doppler`
and of the doppler seed arm, and the arm's name (the registries read these before anything
heavy loads; `method` and `guide` run them)."""
from __future__ import annotations

import dataclasses
from typing import Any

NAME = "doppler"  # The arm's name (`guides.arm_of`) and `--seed_arms` entry.
MAX_SAMPLES = 1024  # Sampled assignments beyond a few populations' worth only cost.


@dataclasses.dataclass(frozen=True)
class DopplerOptions:
  """Where the policy comes from, for `--method doppler` and for the Doppler seeds guide: a
  checkpoint, else training with `evals` episodes; `samples` sampled assignments (seeds).
  `--method doppler` alone: `save` the trained policy there; `measured`, a reward source of
  measured run times for its stage III (`stage3_steps` batches of episodes)."""
  checkpoint: str | None = None
  evals: int = 1024
  samples: int = 8
  save: str | None = None
  stage3_steps: int = 0
  measured: Any = dataclasses.field(default=None, compare=False)
