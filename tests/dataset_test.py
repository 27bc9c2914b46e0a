"""Synthetic dataset building: determinism, disjoint splits, augmentation, filter, cache."""
import json

import numpy as np
import pytest

from datasets import dataset as dataset_lib
from datasets import errors, synthetic

SMALL = dataset_lib.SyntheticDatasetConfig(num_train=6, num_valid=3, num_test=3,
                                           augmentations=2, seed=5)


@pytest.fixture(scope="module")
def small_dataset():
  return dataset_lib.build_synthetic(SMALL)


def test_split_sizes_and_augmentation(small_dataset):
  assert [len(small_dataset[s]) for s in dataset_lib.SPLITS] == [6 * 3, 3, 3]
  train = small_dataset["train"]
  originals = [g for g in train if "augmented_from" not in g.metadata]
  copies = [g for g in train if "augmented_from" in g.metadata]
  assert len(originals) == 6 and len(copies) == 12
  by_name = {g.name: g for g in originals}
  for copy in copies:
    source = by_name[copy.metadata["augmented_from"]]
    assert np.array_equal(copy.edge_src, source.edge_src)
    assert np.array_equal(copy.edge_dst, source.edge_dst)
    ratio = copy.tensor_size / source.tensor_size
    assert ratio.min() >= 0.5 and ratio.max() <= 1.5


def test_splits_share_no_topology(small_dataset):
  keys = {split: {synthetic.topology_key(g) for g in small_dataset[split]}
          for split in dataset_lib.SPLITS}
  assert not keys["train"] & keys["valid"]
  assert not keys["train"] & keys["test"]
  assert not keys["valid"] & keys["test"]
  assert len(keys["train"]) == 6  # Augmented copies keep their original's topology.


def test_deterministic_by_seed(small_dataset):
  again = dataset_lib.build_synthetic(SMALL)
  for split in dataset_lib.SPLITS:
    assert again[split] == small_dataset[split]
  other = dataset_lib.build_synthetic(dataset_lib.SyntheticDatasetConfig(
      num_train=6, num_valid=3, num_test=3, augmentations=2, seed=6))
  assert other["train"] != small_dataset["train"]


def test_duplicate_topologies_are_skipped():
  # Tiny graphs repeat topologies often; every kept graph must still be distinct.
  tiny = dataset_lib.SyntheticDatasetConfig(
      num_train=20, num_valid=5, num_test=5, augmentations=0,
      generator=synthetic.SyntheticSpec(min_nodes=5, max_nodes=8))
  built = dataset_lib.build_synthetic(tiny)
  keys = [synthetic.topology_key(g) for s in dataset_lib.SPLITS for g in built[s]]
  assert len(keys) == 30 and len(set(keys)) == 30


def test_filter_is_applied():
  def wide(graph):
    return graph.num_ops > 120
  built = dataset_lib.build_synthetic(
      dataset_lib.SyntheticDatasetConfig(num_train=4, num_valid=2, num_test=2), wide)
  assert all(g.num_ops > 120 for s in dataset_lib.SPLITS for g in built[s])


def test_impossible_filter_gives_up_clearly():
  with pytest.raises(errors.ConfigError, match="gave up after 160 draws"):
    dataset_lib.build_synthetic(
        dataset_lib.SyntheticDatasetConfig(num_train=4, num_valid=2, num_test=2,
                                           max_attempts_factor=20), lambda g: False)


def test_cache_round_trip_and_rebuild(tmp_path, small_dataset):
  built = dataset_lib.load_or_build_synthetic(SMALL, str(tmp_path))
  (folder,) = list(tmp_path.iterdir())
  assert sorted(p.name for p in folder.iterdir()) == ["config.json", "test.npz", "train.npz",
                                                      "valid.npz"]
  stamp = (folder / "train.npz").stat().st_mtime_ns
  loaded = dataset_lib.load_or_build_synthetic(SMALL, str(tmp_path))
  assert (folder / "train.npz").stat().st_mtime_ns == stamp  # Loaded, not rebuilt.
  for split in dataset_lib.SPLITS:
    assert loaded[split] == built[split] == small_dataset[split]
  # A folder whose stored config disagrees is rebuilt, never trusted.
  record = json.loads((folder / "config.json").read_text())
  record["config"]["seed"] = 99
  (folder / "config.json").write_text(json.dumps(record))
  rebuilt = dataset_lib.load_or_build_synthetic(SMALL, str(tmp_path))
  assert rebuilt["test"] == small_dataset["test"]
  assert json.loads((folder / "config.json").read_text())["config"]["seed"] == 5


def test_config_json_round_trip():
  assert dataset_lib.SyntheticDatasetConfig.from_json_dict(SMALL.to_json_dict()) == SMALL


def test_bad_configs():
  with pytest.raises(errors.ConfigError, match="num_test must be >= 0"):
    dataset_lib.build_synthetic(dataset_lib.SyntheticDatasetConfig(num_test=-1))
  with pytest.raises(errors.ConfigError, match="starts below 5"):
    dataset_lib.build_synthetic(dataset_lib.SyntheticDatasetConfig(
        generator=synthetic.SyntheticSpec(min_nodes=2)))
  with pytest.raises(errors.ConfigError, match="unknown splits"):
    dataset_lib.build_synthetic(dataset_lib.SyntheticDatasetConfig(augment_splits=("dev",)))
  with pytest.raises(errors.ConfigError, match="has no split 'dev'"):
    dataset_lib.build_synthetic(SMALL)["dev"]


def test_summary(small_dataset):
  summary = dataset_lib.summarize(small_dataset)
  assert summary["valid"]["graphs"] == 3
  assert 50 + 2 <= summary["train"]["ops_min"] <= summary["train"]["ops_max"] <= 202
  assert 0.5 < summary["test"]["data_edge_fraction"] < 0.9
