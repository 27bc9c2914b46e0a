r"""Trains the policy that guides the search (Ray actors by default).

  python -m regal.train --dataset synthetic                     # the learned prior (default)
  python -m regal.train --config.learner=mutants                # REGAL's REINFORCE policy
  python -m regal.train --workdir /tmp/regal --config=regal/learning/configs/default.py:paper
  python -m regal.train --config.num_actors=0 --config.num_steps=20   # in-process rollouts
  python -m regal.train --workdir runs/measured --config.reward=measured \
      --config.finetune_from=runs/regal --config.num_steps=10   # fine-tune on measured times

Rerunning with the same --workdir resumes from its checkpoint. `config.learner` names a record
of `regal.learning.learners` ("prior": a prior over the search's fresh keys imitating long
runs, then REINFORCE, `prior_train`; "mutants": REGAL's per-gene mutant distributions,
`train_lib`); one registered from elsewhere runs the same way.
"""
from __future__ import annotations

from regal_datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from regal.learning import train_lib  # noqa: E402

_INSTALLED_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def installed_config_paths(argv: list[str]) -> list[str]:
  """`argv` with a --config file under regal/ that is not there from the working directory
  read from the installed package instead, so `--config=regal/learning/configs/default.py:test`
  works from any directory (a path that exists here wins)."""
  found = []
  for arg in argv:
    if arg.startswith("--config=") and not arg.startswith("--config=/"):
      path, colon, preset = arg[len("--config="):].partition(":")
      installed = os.path.join(_INSTALLED_ROOT, path)
      if path.startswith("regal" + os.sep) and not os.path.exists(path) and os.path.exists(
          installed):
        arg = f"--config={installed}{colon}{preset}"
    found.append(arg)
  return found


sys.argv[:] = installed_config_paths(sys.argv)
try:  # ml_collections reads the --config.FIELD overrides of sys.argv here, at definition.
  _CONFIG = config_flags.DEFINE_config_file(
      "config", os.path.join(os.path.dirname(__file__), "learning", "configs", "default.py"),
      "Training configuration (path[:preset]).")
except (AttributeError, KeyError, SyntaxError) as error:
  cli.exit_bad_config(error, sys.argv)
_DATASET = flags.DEFINE_string(
    "dataset", None, "Training graphs: 'synthetic' (REGAL's generator), a built dataset folder "
    "(python -m regal_datasets.build --out DIR) or a folder of graph files in any supported format, "
    "split by content (default: the config's, synthetic).")
_WORKDIR = flags.DEFINE_string("workdir", os.path.join("runs", "regal"),
                               "Checkpoints, metrics and the report go here.")
_RAY_ADDRESS = flags.DEFINE_string("ray_address", None, "Join this Ray cluster instead of "
                                   "starting a local one.")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = _CONFIG.value
  if _DATASET.value is not None:
    config.dataset = _DATASET.value
  from regal.learning import registries  # Light: the records load without JAX.
  learner = registries.LEARNERS.get(config.learner)  # Unknown: one line naming the known.
  if config.reward == "measured":
    from regal.scoring import parallel
    parallel.use_host_devices(config.num_devices)  # Before JAX starts.
  train_lib.check_config(config)  # A value that cannot run is said before a flag it ignores.
  given = {arg[len("--config."):].split("=")[0] for arg in sys.argv[1:]
           if arg.startswith("--config.")}
  unused = learner.ignores
  for name in sorted(given):
    if name in unused or name.split(".")[0] in unused:
      raise errors.ConfigError(f"--config.{name} would do nothing here: config.learner is "
                               f"{config.learner}")
  cli.set_resume_hint(
      f"everything up to there is saved: rerun the same command to resume "
      f"(python -m regal.train {shlex.join(sys.argv[1:])})")
  if _RAY_ADDRESS.value:
    import logging as std_logging

    cli.init_ray(address=_RAY_ADDRESS.value, logging_level=std_logging.ERROR)
  print(learner.train(config, _WORKDIR.value))
  print(f"report: {os.path.join(_WORKDIR.value, 'report.json')}")


if __name__ == "__main__":
  cli.run_cli(main)
