r"""Trains REGAL's policy with REINFORCE on BRKGA rollouts (Ray actors by default).

  python -m regal.train --dataset synthetic                     # ~6 minutes on 2 CPU cores
  python -m regal.train --workdir /tmp/regal --config=regal/learning/configs/default.py:paper
  python -m regal.train --config.num_actors=0 --config.num_steps=20   # in-process rollouts
  python -m regal.train --workdir runs/measured --config.reward=measured \
      --config.finetune_from=runs/regal --config.num_steps=10   # fine-tune on measured times

Rerunning with the same --workdir resumes from its checkpoint. Logic lives in
`regal.learning.train_lib.train_and_evaluate`.
"""
from __future__ import annotations

from datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

import os  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
from typing import Sequence  # noqa: E402

from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from regal.learning import train_lib  # noqa: E402

try:  # ml_collections reads the --config.FIELD overrides of sys.argv here, at definition.
  _CONFIG = config_flags.DEFINE_config_file(
      "config", os.path.join(os.path.dirname(__file__), "learning", "configs", "default.py"),
      "Training configuration (path[:preset]).")
except (AttributeError, KeyError, SyntaxError) as error:
  cli.exit_bad_config(error, sys.argv)
_DATASET = flags.DEFINE_string(
    "dataset", None, "Training graphs: 'synthetic' (REGAL's generator), a built dataset folder "
    "(python -m datasets.build --out DIR) or a folder of graph files in any supported format, "
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
  if config.reward == "measured":
    from regal.scoring import parallel
    parallel.use_host_devices(config.num_devices)  # Before JAX starts.
  cli.set_resume_hint(
      f"everything up to there is saved: rerun the same command to resume "
      f"(python -m regal.train {shlex.join(sys.argv[1:])})")
  if _RAY_ADDRESS.value:
    import logging as std_logging

    import ray
    ray.init(address=_RAY_ADDRESS.value, logging_level=std_logging.ERROR)
  report = train_lib.train_and_evaluate(config, _WORKDIR.value)
  print(train_lib.verdict(report, config.eval_seeds))
  print(f"report: {os.path.join(_WORKDIR.value, 'report.json')}")


if __name__ == "__main__":
  cli.run_cli(main)
