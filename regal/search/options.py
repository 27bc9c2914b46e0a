"""What `--method brkga` reads besides the budget, seed and time limit: its own options, as
`regal.doppler_policy.options` holds Doppler's (issue 84). `regal.app.methods.RunConfig`
carries one; the method record's `reads` names the flags behind it."""
from __future__ import annotations

import dataclasses

from regal.baselines import heuristics
from regal.search import brkga_presets, schedule_polish
from regal.search import progress as search_progress

POLISH = tuple(schedule_polish.MOVE_SETS) + ("off",)


@dataclasses.dataclass(frozen=True)
class BrkgaOptions:
  """`arms`: the seed arms whose answers enter the first population; `policy_dir`: a trained
  policy or prior steering the search; `prior`: a parameter-free prior over fresh keys
  (`search.registries.PRIORS`); `preset`: BRKGA's named settings; `decoder`: instead of the
  preset's; `compare_unguided`: the same search without the policy beside it, in the details;
  `exact_solver`: "auto" runs CP-SAT beside the search where `portfolio.worth_starting`, "off"
  never; `polish`: the moves that polish the answer where `schedule_polish.applies` (`POLISH`:
  "auto" insertions and exact windows, "insertions", "pairs", ... or "off"); `progress`: where
  the search says it starts and shows its live line (None: silent)."""
  arms: tuple[str, ...] = heuristics.HEURISTICS
  policy_dir: str | None = None
  prior: str = "none"
  preset: str = brkga_presets.DEFAULT
  decoder: str | None = None
  compare_unguided: bool = False
  exact_solver: str = "auto"
  polish: str = "auto"
  progress: search_progress.Reporter | None = dataclasses.field(default=None, compare=False)
