"""Synthetic dataset building: determinism, disjoint splits, augmentation, filter, cache."""
import json

import numpy as np
import pytest

from regal_datasets import dataset as dataset_lib
from regal_datasets import errors, synthetic

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


def _graph_folder(tmp_path, count: int, duplicate_every: int = 0):
  """`count` distinct synthetic graphs as JSON files, plus a second file of every
  `duplicate_every`-th graph, as Sinnen stores one graph per device count."""
  from regal_datasets import io as graph_io
  folder = tmp_path / "graphs"
  folder.mkdir(parents=True)
  spec = synthetic.SyntheticSpec(min_nodes=6, max_nodes=9)
  for i in range(count):
    graph = synthetic.generate(np.random.default_rng(i), spec)
    graph_io.save_graph(graph, str(folder / f"g{i:03d}.json"))
    if duplicate_every and i % duplicate_every == 0:
      graph_io.save_graph(graph, str(folder / f"g{i:03d}-copy.json"))
  (folder / "optimal.csv").write_text("not a graph\n")
  return folder


def test_a_graph_folder_splits_by_content_deterministically(tmp_path):
  folder = _graph_folder(tmp_path, 60, duplicate_every=4)
  whole = dataset_lib.graph_folder(str(folder), 1000, 1000, 1000)
  fingerprints = {split: [dataset_lib.graph_fingerprint(g) for g in whole[split]]
                  for split in dataset_lib.SPLITS}
  # Every distinct graph exactly once (copies dropped), and no graph in two splits.
  assert sum(len(f) for f in fingerprints.values()) == 60
  assert len(set().union(*fingerprints.values())) == 60
  assert all(len(f) > 0 for f in fingerprints.values())
  for split, values in fingerprints.items():
    assert all(dataset_lib.content_split(v) == split for v in values)
  # The same folder gives the same splits; a cut keeps a prefix of each; a new file moves
  # no graph to another split.
  cut = dataset_lib.graph_folder(str(folder), 5, 2, 2)
  assert [g.name for g in cut["train"]] == [g.name for g in whole["train"][:5]]
  from regal_datasets import io as graph_io
  graph_io.save_graph(synthetic.generate(np.random.default_rng(999), synthetic.SyntheticSpec(
      min_nodes=6, max_nodes=9)), str(folder / "new.json"))
  grown = dataset_lib.graph_folder(str(folder), 1000, 1000, 1000)
  for split in dataset_lib.SPLITS:
    assert set(fingerprints[split]) <= {dataset_lib.graph_fingerprint(g) for g in grown[split]}


def test_for_training_reads_every_kind_of_dataset(tmp_path):
  folder = _graph_folder(tmp_path, 40)
  from_folder = dataset_lib.for_training(str(folder), 3, 2, 2)
  assert [len(from_folder[s]) for s in dataset_lib.SPLITS] == [3, 2, 2]
  built = dataset_lib.build_synthetic(SMALL)
  dataset_lib.save(built, str(tmp_path / "built"), dataset_lib.synthetic_record(SMALL, None))
  from_built = dataset_lib.for_training(str(tmp_path / "built"), 4, 3, 1)
  assert [g.name for g in from_built["train"]] == [g.name for g in built["train"][:4]]
  assert [len(from_built[s]) for s in dataset_lib.SPLITS] == [4, 3, 1]
  with pytest.raises(errors.ConfigError, match="neither 'synthetic' nor a folder"):
    dataset_lib.for_training(str(tmp_path / "missing"), 1, 1, 1)
  with pytest.raises(errors.ConfigError, match="too few distinct graphs"):
    dataset_lib.for_training(str(_graph_folder(tmp_path / "one", 1)), 1, 1, 1)


def test_one_graph_of_the_default_dataset_reads_alone_as_in_the_whole(tmp_path):
  """`synthetic_graph` (what `regal.optimize` runs by default): built and cached when missing,
  then one graph read from the cache, equal to the whole dataset's; an index past the split is
  one line."""
  data_dir = str(tmp_path / "data")
  first = dataset_lib.synthetic_graph("test", 3, data_dir)  # Builds the cache.
  again = dataset_lib.synthetic_graph("test", 3, data_dir)  # Reads one graph from it.
  whole = dataset_lib.load_or_build_synthetic(data_dir=data_dir)["test"][3]
  for graph in (first, again):
    assert graph.name == whole.name and graph.op_names == whole.op_names
    for field in ("compute_cost", "tensor_size", "tensor_producer", "data_edge_consumer"):
      np.testing.assert_array_equal(getattr(graph, field), getattr(whole, field))
  size = len(dataset_lib.load_or_build_synthetic(data_dir=data_dir)["test"])
  with pytest.raises(errors.ConfigError, match=rf"outside split 'test' \(0..{size - 1}\)"):
    dataset_lib.synthetic_graph("test", size, data_dir)
