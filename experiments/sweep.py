r"""Runs a named parameter sweep as Ray tasks, resumably.

  python -m regal_experiments.sweep --sweep brkga_tuning            # 648 settings, ~2 h on 2 cores
  python -m regal_experiments.sweep --sweep brkga_tuning --quick    # 2 settings, ~35 s
  python -m regal_experiments.sweep --sweep selftest --local        # in this process, no Ray
  python -m regal_experiments.sweep --sweep brkga_tuning --ray_address auto   # an existing cluster
  python -m regal_experiments.sweep --sweep search_tuning --local --save_preset default
      # the search's defaults (decoder, local improvement) on training graphs, ~20 min
  python -m regal_experiments.sweep --sweep brkga_tuning --subsample 32 --save_preset tuned
      # 32 of the 648 settings drawn at random (a reduced sweep, ~7 min on 2 cores); the best
      # becomes the BRKGA preset "tuned" (regal/search/brkga_presets.json)

Results: one JSON line per finished trial in `--out/<sweep>[-quick][-subsampleN].jsonl`, and a
Markdown summary beside it (the best trials, the command and the date); rerunning skips
the finished trials. Sweeps are defined in `experiments/sweeps.py`. Exit status: 0 when every
trial finished, 4 when some failed and 5 when all did (the summary and one `error:` line say
how many; `selftest` fails one on purpose, so it exits 4).
"""
from __future__ import annotations

import datetime
import os
import sys
from typing import Sequence

from regal_datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from absl import flags  # noqa: E402

from regal_datasets import atomic  # noqa: E402

_SWEEP = flags.DEFINE_string("sweep", None, "Sweep name (experiments/sweeps.py).")
_OUT = flags.DEFINE_string("out", "experiments/results/sweeps", "Results folder.")
_QUICK = flags.DEFINE_bool("quick", False, "The sweep's reduced grid and trial size.")
_LOCAL = flags.DEFINE_bool("local", False, "Run trials in this process, one after another.")
_RAY_ADDRESS = flags.DEFINE_string("ray_address", None, "Join this Ray cluster.")
_NUM_CPUS = flags.DEFINE_integer("num_cpus", None, "CPUs of the local Ray cluster "
                                 "(default: all).", lower_bound=1, upper_bound=4096)
_SUBSAMPLE = flags.DEFINE_integer("subsample", 0, "Run this many of the settings, drawn at "
                                  "random (0: all).", lower_bound=0, upper_bound=1_000_000)
_PRESETS_FILE = flags.DEFINE_string("presets_file", None, "Where --save_preset writes (default: "
                                    "regal/search/brkga_presets.json).")
_SAVE_PRESET = flags.DEFINE_string("save_preset", None, "Save the best setting as this BRKGA "
                                   "preset (brkga_tuning; search_tuning saves 'default').")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  from regal_experiments import sweep_lib, sweeps
  if _SWEEP.value not in sweeps.SWEEPS:
    raise errors.ConfigError(f"unknown sweep {_SWEEP.value!r}; known: "
                             f"{', '.join(sorted(sweeps.SWEEPS))}")
  sweep = sweeps.SWEEPS[_SWEEP.value]
  if _SAVE_PRESET.value and _SWEEP.value not in ("brkga_tuning", "search_tuning"):
    raise errors.ConfigError("--save_preset needs --sweep brkga_tuning or search_tuning")
  if (_SAVE_PRESET.value == "default") != (_SWEEP.value == "search_tuning") and \
      _SAVE_PRESET.value:
    raise errors.ConfigError("search_tuning saves the default preset's search settings "
                             "(--save_preset default); brkga_tuning saves other presets")
  if _LOCAL.value:
    for name in ("ray_address", "num_cpus"):
      if flags.FLAGS[name].present:
        raise errors.ConfigError(f"--{name} would do nothing here: --local runs the trials in "
                                 f"this process, without Ray")
  elif _RAY_ADDRESS.value and flags.FLAGS["num_cpus"].present:
    raise errors.ConfigError("--num_cpus would do nothing here: it sizes a local Ray cluster, "
                             "and --ray_address joins an existing one")
  if _PRESETS_FILE.value and not _SAVE_PRESET.value:
    raise errors.ConfigError("--presets_file would do nothing here: it is where --save_preset "
                             "writes")
  if _SAVE_PRESET.value:
    from regal.search import brkga_presets
    presets = _PRESETS_FILE.value or brkga_presets.PRESETS_FILE
    atomic.check_output(presets, "--presets_file")
    brkga_presets.load_all(presets)  # A malformed presets file is named before the trials.
  atomic.check_output_dir(_OUT.value, "--out")
  records = sweep_lib.run(sweep, _OUT.value, quick=_QUICK.value, local=_LOCAL.value,
                          address=_RAY_ADDRESS.value, num_cpus=_NUM_CPUS.value,
                          progress=lambda line: print(line, flush=True),
                          subsample=_SUBSAMPLE.value)
  path = sweep_lib.results_path(sweep, _OUT.value, _QUICK.value, _SUBSAMPLE.value)
  command = "python -m regal_experiments.sweep " + " ".join(sys.argv[1:])
  date = datetime.date.today().isoformat()
  grid_size = len(sweep_lib.expand(sweep, _QUICK.value))
  mode = ("quick" if _QUICK.value else "full-size trials") + (
      f"; reduced grid: {_SUBSAMPLE.value} of the {grid_size} settings drawn at random"
      if 0 < _SUBSAMPLE.value < grid_size else "")
  summary = sweep_lib.summary_markdown(sweep, records, command, date,
                                       os.path.basename(path), mode=mode)
  atomic.write_text(path[:-len(".jsonl")] + ".md", summary)
  ok = [r for r in records.values() if r["status"] == "ok" and "score" in r["result"]]
  if ok:
    best = min(ok, key=lambda r: r["result"]["score"])
    print(f"best: score {best['result']['score']:.6g} with {best['params']}")
    if _SAVE_PRESET.value:
      from regal.search import brkga_presets
      setting, chosen = best["params"], {}
      if sweep.name == "search_tuning":
        setting, chosen = sweeps.search_preset(ok)
      brkga_presets.save(_SAVE_PRESET.value, setting, {
          "sweep": os.path.basename(path), "command": command, "date": date,
          "score": best["result"]["score"], "trials": len(ok),
          "grid_size": grid_size, "mode": mode, **chosen},
          _PRESETS_FILE.value)
      print(f"saved BRKGA preset {_SAVE_PRESET.value!r} -> "
            f"{_PRESETS_FILE.value or brkga_presets.PRESETS_FILE}")
  elif _SAVE_PRESET.value:
    raise errors.ConfigError("no finished trial to save as a preset")
  failed = sum(r["status"] != "ok" for r in records.values())
  cli.exit_if_failed(failed, len(records), "trials")

if __name__ == "__main__":
  cli.run_cli(main)
