r"""Builds a dataset and prints its summary statistics.

  python -m regal_datasets.build                       # the default synthetic dataset, in the cache
  python -m regal_datasets.build --dataset synthetic --out /tmp/synth \
      --num_train 10000 --num_valid 1000 --num_test 1000   # the paper's sizes
"""
from __future__ import annotations

import json
import os
import time
from typing import Sequence

from regal_datasets import cli, errors

if __name__ == "__main__":  # A command: an interrupt while the libraries load is one line.
  cli.watch_signals()

from absl import flags  # noqa: E402

from regal_datasets import dataset as dataset_lib  # noqa: E402
from regal_datasets import atomic  # noqa: E402

_DATASET = flags.DEFINE_enum("dataset", "synthetic", ["synthetic"], "Which dataset to build.")
_OUT = flags.DEFINE_string("out", None, "Output folder (default: a folder in --data_dir named "
                           "by the config's fingerprint, as training looks it up).")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Dataset cache (default "
                                "$REGAL_DATA_DIR or ~/.cache/regal/datasets).")
# Every split is needed by regal.train; a million graphs is far past the paper's 12,000.
_MOST = 1_000_000
_NUM_TRAIN = flags.DEFINE_integer("num_train", 64, "Distinct training graphs (paper: 10000).",
                                  lower_bound=1, upper_bound=_MOST)
_NUM_VALID = flags.DEFINE_integer("num_valid", 16, "Validation graphs (paper: 1000).",
                                  lower_bound=1, upper_bound=_MOST)
_NUM_TEST = flags.DEFINE_integer("num_test", 16, "Test graphs (paper: 1000).", lower_bound=1,
                                 upper_bound=_MOST)
_AUGMENTATIONS = flags.DEFINE_integer("augmentations", 1, "Augmented copies per training graph.",
                                      lower_bound=0, upper_bound=100)
_SEED = flags.DEFINE_integer("seed", 0, "Dataset seed (0 to 2^32 - 1).", lower_bound=0,
                             upper_bound=errors.MAX_SEED)


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise errors.ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = dataset_lib.SyntheticDatasetConfig(
      num_train=_NUM_TRAIN.value, num_valid=_NUM_VALID.value, num_test=_NUM_TEST.value,
      augmentations=_AUGMENTATIONS.value, seed=_SEED.value)
  if _OUT.value:
    atomic.check_output_dir(_OUT.value, "--out")
    if _DATA_DIR.value:
      raise errors.ConfigError("--data_dir would do nothing here: --out names the folder")
  else:
    atomic.check_output_dir(_DATA_DIR.value or dataset_lib.default_data_dir(), "--data_dir")
  start = time.perf_counter()
  if _OUT.value:
    dataset = dataset_lib.build_synthetic(config, progress=True)
    dataset_lib.save(dataset, _OUT.value, dataset_lib.synthetic_record(config, None))
    directory = _OUT.value
  else:
    data_dir = _DATA_DIR.value or dataset_lib.default_data_dir()
    dataset = dataset_lib.load_or_build_synthetic(config, data_dir, progress=True)
    directory = os.path.join(data_dir, f"synthetic-{dataset_lib.config_fingerprint(config)}")
  summary = dataset_lib.summarize(dataset)
  print(format_summary(summary))
  atomic.write_text(os.path.join(directory, "summary.json"),
                    json.dumps({"dataset": _DATASET.value, "splits": summary}, indent=2) + "\n")
  print(f"dataset {_DATASET.value!r} in {directory} ({time.perf_counter() - start:.1f} s); "
        f"statistics in summary.json")


def format_summary(summary: dict) -> str:
  columns = ("graphs", "ops_min", "ops_mean", "ops_max", "edges_mean", "data_edge_fraction",
             "tensor_size_mean", "compute_cost_mean")
  header = "split  " + " ".join(f"{c:>18}" for c in columns)
  rows = [header]
  for split, stats in summary.items():
    cells = []
    for column in columns:
      value = stats.get(column, "")
      cells.append(f"{value:>18.3f}" if isinstance(value, float) else f"{value!s:>18}")
    rows.append(f"{split:<6} " + " ".join(cells))
  return "\n".join(rows)


if __name__ == "__main__":
  cli.run_cli(main)
