"""Datasets of graphs with train / valid / test splits, built once and cached on disk.

The synthetic dataset follows REGAL: graphs are drawn one after another (graph i from the seed
sequence (seed, i), so a dataset is a pure function of its config), a graph whose topology (its
in-degree sequence) was already drawn is skipped so the splits share no topology, an optional
filter drops graphs (e.g. those without room for improvement), the first `num_train` kept graphs
form the train split, the next `num_valid` the validation split, the rest the test split. Then
each split in `augment_splits` gains `augmentations` copies of each of its graphs with every
tensor size and op time multiplied by its own Uniform(0.5, 1.5) draw.

On disk a dataset is a folder: `config.json` plus one compact npz file per split.

Training (`regal.train --dataset`) also takes a folder of graph files in any supported format
(`graph_folder`): its distinct graphs are split deterministically by a hash of their content,
so a graph stored twice (e.g. Sinnen's set, one file per device count) stays in one split and
adding files never moves a graph to another split.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from typing import Callable, Iterator, Mapping

import numpy as np

from regal_datasets import atomic, errors, serialization, synthetic
from regal_datasets.graph import Graph

SPLITS = ("train", "valid", "test")
FilterFn = Callable[[Graph], bool]


@dataclasses.dataclass(frozen=True)
class SyntheticDatasetConfig:
  """How to build a synthetic dataset. The defaults build in seconds; the paper used
  num_train=10000, num_valid=1000, num_test=1000."""
  num_train: int = 64
  num_valid: int = 16
  num_test: int = 16
  augmentations: int = 1
  augment_splits: tuple[str, ...] = ("train",)
  seed: int = 0
  max_attempts_factor: int = 20  # Give up after this many draws per wanted graph.
  generator: synthetic.SyntheticSpec = synthetic.SyntheticSpec()

  def to_json_dict(self) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(self)))

  @classmethod
  def from_json_dict(cls, data: Mapping) -> "SyntheticDatasetConfig":
    data = dict(data)
    generator = dict(data.pop("generator", {}))
    if "output_count_probs" in generator:
      generator["output_count_probs"] = tuple(generator["output_count_probs"])
    data["augment_splits"] = tuple(data.get("augment_splits", ("train",)))
    return cls(generator=synthetic.SyntheticSpec(**generator), **data)


@dataclasses.dataclass(frozen=True)
class Dataset:
  name: str
  splits: Mapping[str, list[Graph]]

  def __getitem__(self, split: str) -> list[Graph]:
    if split not in self.splits:
      raise errors.ConfigError(f"dataset {self.name!r} has no split {split!r}; it has "
                               f"{', '.join(self.splits)}")
    return self.splits[split]


def _validate_config(config: SyntheticDatasetConfig) -> None:
  for field in ("num_train", "num_valid", "num_test", "augmentations"):
    if getattr(config, field) < 0:
      raise errors.ConfigError(f"{field} must be >= 0, got {getattr(config, field)}")
  unknown = set(config.augment_splits) - set(SPLITS)
  if unknown:
    raise errors.ConfigError(f"augment_splits names unknown splits {sorted(unknown)}")
  spec = config.generator
  smallest = max(spec.watts_strogatz_k + 1, spec.barabasi_albert_m + 1, spec.sbm_blocks)
  if spec.min_nodes < smallest or spec.max_nodes < spec.min_nodes:
    raise errors.ConfigError(f"node range [{spec.min_nodes}, {spec.max_nodes}] is empty or "
                             f"starts below {smallest}, the least every topology family needs")


def _distinct_graphs(config: SyntheticDatasetConfig,
                     filter_fn: FilterFn | None) -> Iterator[tuple[int, Graph]]:
  """(draw index, graph) in draw order, skipping repeated topologies and filtered-out graphs."""
  wanted = config.num_train + config.num_valid + config.num_test
  seen = set()
  for index in range(max(wanted, 1) * config.max_attempts_factor):
    rng = np.random.default_rng([config.seed, index])
    graph = synthetic.generate(rng, config.generator, name=f"synthetic_{config.seed}_{index}")
    key = synthetic.topology_key(graph)
    if key in seen:
      continue
    seen.add(key)
    if filter_fn is None or filter_fn(graph):
      yield index, graph
  raise errors.ConfigError(
      f"gave up after {max(wanted, 1) * config.max_attempts_factor} draws: the filter or the "
      f"node range leaves too few distinct graphs for {wanted} wanted")


def build_synthetic(config: SyntheticDatasetConfig = SyntheticDatasetConfig(),
                    filter_fn: FilterFn | None = None, progress: bool = False) -> Dataset:
  """Builds the synthetic dataset described by `config` (deterministic)."""
  _validate_config(config)
  counts = {"train": config.num_train, "valid": config.num_valid, "test": config.num_test}
  wanted = sum(counts.values())
  bar = _progress_bar(wanted, "graphs", progress)
  drawn = []
  if wanted:
    for index, graph in _distinct_graphs(config, filter_fn):
      drawn.append((index, graph))
      bar.update(1)
      if len(drawn) == wanted:
        break
  bar.close()
  splits, start = {}, 0
  for split in SPLITS:
    originals = drawn[start:start + counts[split]]
    start += counts[split]
    graphs = [graph for _, graph in originals]
    if split in config.augment_splits:
      for index, graph in originals:
        rng = np.random.default_rng([config.seed, index, 1])
        graphs += [synthetic.augment(graph, rng, name=f"{graph.name}_aug{copy}")
                   for copy in range(config.augmentations)]
    splits[split] = graphs
  return Dataset(name="synthetic", splits=splits)


def _progress_bar(total: int, unit: str, enabled: bool):
  from tqdm import tqdm  # Deferred: only interactive builds draw a bar.
  return tqdm(total=total, unit=f" {unit}", disable=not enabled, dynamic_ncols=True,
              desc="building")


def default_data_dir() -> str:
  """$REGAL_DATA_DIR, else $XDG_CACHE_HOME/regal/datasets, else ~/.cache/regal/datasets."""
  if os.environ.get("REGAL_DATA_DIR"):
    return os.environ["REGAL_DATA_DIR"]
  cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(cache, "regal", "datasets")


def config_fingerprint(config: SyntheticDatasetConfig, filter_id: str | None = None) -> str:
  text = json.dumps({"config": config.to_json_dict(), "filter": filter_id}, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:12]


def save(dataset: Dataset, directory: str, config_record: Mapping) -> None:
  """Writes the split files, then `config.json` last: a folder with a config is complete."""
  os.makedirs(directory, exist_ok=True)
  for split, graphs in dataset.splits.items():
    serialization.save_graphs(os.path.join(directory, f"{split}.npz"), graphs)
  atomic.write_text(os.path.join(directory, "config.json"),
                    json.dumps(dict(config_record), indent=2, sort_keys=True) + "\n")


def load(directory: str) -> tuple[Dataset, dict]:
  config_path = os.path.join(directory, "config.json")
  if not os.path.exists(config_path):
    raise errors.ConfigError(f"{directory}: not a dataset folder (no config.json)")
  with open(config_path) as f:
    record = json.load(f)
  splits = {split: serialization.load_graphs(os.path.join(directory, f"{split}.npz"))
            for split in record.get("splits", SPLITS)}
  return Dataset(name=record.get("dataset", "dataset"), splits=splits), record


def synthetic_record(config: SyntheticDatasetConfig, filter_id: str | None) -> dict:
  return {"dataset": "synthetic", "config": config.to_json_dict(), "filter": filter_id,
          "splits": list(SPLITS)}


def load_or_build_synthetic(config: SyntheticDatasetConfig = SyntheticDatasetConfig(),
                            data_dir: str | None = None, filter_fn: FilterFn | None = None,
                            filter_id: str | None = None, progress: bool = False) -> Dataset:
  """The synthetic dataset for `config`, loaded from the cache or built and cached.

  A filtered dataset is cached under `filter_id` (default: the filter's qualified name), so
  changing what a filter does needs a new id.
  """
  if filter_fn is not None and filter_id is None:
    filter_id = f"{filter_fn.__module__}.{filter_fn.__qualname__}"
  directory = os.path.join(data_dir or default_data_dir(),
                           f"synthetic-{config_fingerprint(config, filter_id)}")
  record = synthetic_record(config, filter_id)
  if os.path.exists(os.path.join(directory, "config.json")):
    try:
      dataset, stored = load(directory)
    except errors.FormatError as error:  # A cache: rebuilt, not fatal.
      print(f"rebuilding the dataset cache: {error}", file=sys.stderr)
      stored = None
    if stored == record:
      return dataset
  dataset = build_synthetic(config, filter_fn, progress)
  save(dataset, directory, record)
  return dataset


def synthetic_graph(split: str, index: int, data_dir: str | None = None) -> Graph:
  """Graph `index` of the default synthetic dataset's `split`, read alone from the cache (the
  whole dataset is built and cached first when it is not there)."""
  config = SyntheticDatasetConfig()
  directory = os.path.join(data_dir or default_data_dir(),
                           f"synthetic-{config_fingerprint(config)}")
  path = os.path.join(directory, f"{split}.npz")
  try:
    with open(os.path.join(directory, "config.json")) as f:
      cached = json.load(f) == synthetic_record(config, None)
    count = serialization.count_graphs(path) if cached else None
  except (OSError, ValueError, errors.FormatError):  # Missing or damaged: built again below.
    count = None
  graphs = None
  if count is None:
    graphs = load_or_build_synthetic(config, data_dir)[split]
    count = len(graphs)
  if not 0 <= index < count:
    raise errors.ConfigError(f"--index {index} is outside split {split!r} (0..{count - 1})")
  return graphs[index] if graphs is not None else serialization.load_graphs(path, [index])[0]


def summarize(dataset: Dataset) -> dict[str, dict[str, float]]:
  """Per-split statistics a person checks a dataset by."""
  summary = {}
  for split, graphs in dataset.splits.items():
    if not graphs:
      summary[split] = {"graphs": 0}
      continue
    ops = np.array([g.num_ops for g in graphs])
    data = sum(g.num_data_edges for g in graphs)
    control = sum(g.num_control_edges for g in graphs)
    sizes = np.concatenate([g.tensor_size for g in graphs])
    costs = np.concatenate([g.compute_cost for g in graphs])
    summary[split] = {
        "graphs": len(graphs),
        "ops_min": int(ops.min()), "ops_mean": float(ops.mean()), "ops_max": int(ops.max()),
        "tensors_mean": float(np.mean([g.num_tensors for g in graphs])),
        "edges_mean": float(np.mean([g.num_edges for g in graphs])),
        "data_edge_fraction": data / max(data + control, 1),
        "tensor_size_mean": float(sizes.mean()) if len(sizes) else 0.0,
        "compute_cost_mean": float(costs.mean()),
    }
  return summary


def graph_fingerprint(graph: Graph) -> str:
  """SHA-256 of what a placement method sees: edges, costs, sizes and memory (names aside)."""
  digest = hashlib.sha256()
  for array in (graph.compute_cost, graph.extra_memory, graph.tensor_producer,
                graph.tensor_size, graph.data_edge_tensor, graph.data_edge_consumer,
                graph.control_edge_src, graph.control_edge_dst):
    array = np.ascontiguousarray(array)
    digest.update(f"{array.dtype}{array.shape}".encode())
    digest.update(array.tobytes())
  return digest.hexdigest()


def content_split(fingerprint: str, valid_fraction: float = 0.1,
                  test_fraction: float = 0.1) -> str:
  """The split of a graph of this fingerprint: a fixed function of the content alone."""
  position = int(fingerprint[:12], 16) / 16 ** 12
  if position < test_fraction:
    return "test"
  if position < test_fraction + valid_fraction:
    return "valid"
  return "train"


def graph_folder(directory: str, num_train: int, num_valid: int, num_test: int) -> Dataset:
  """The distinct graphs of a folder of graph files, split by `content_split`, each named by
  its file; each split keeps its first `num_*` graphs in fingerprint order (a fixed
  pseudo-random subset)."""
  from regal_datasets import io as graph_io
  by_fingerprint: dict[str, Graph] = {}
  for path in graph_io.graph_files(directory):  # Sorted: duplicates keep the first name.
    graph = dataclasses.replace(graph_io.load_graph(path), name=graph_io.file_stem(path))
    by_fingerprint.setdefault(graph_fingerprint(graph), graph)
  splits: dict[str, list[Graph]] = {split: [] for split in SPLITS}
  for fingerprint in sorted(by_fingerprint):
    splits[content_split(fingerprint)].append(by_fingerprint[fingerprint])
  wanted = {"train": num_train, "valid": num_valid, "test": num_test}
  for split, graphs in splits.items():
    if not graphs and wanted[split]:
      raise errors.ConfigError(f"{directory}: too few distinct graphs "
                               f"({len(by_fingerprint)}) for a {split} split")
    splits[split] = graphs[:wanted[split]]
  return Dataset(name=os.path.basename(os.path.normpath(directory)), splits=splits)


def for_training(spec: str, num_train: int, num_valid: int, num_test: int) -> Dataset:
  """What `regal.train --dataset` names: `synthetic` (REGAL's generator, cached), a built
  dataset folder (`python -m regal_datasets.build --out DIR`; its splits, each cut to `num_*`), or a
  folder of graph files (`graph_folder`)."""
  if spec == "synthetic":
    return load_or_build_synthetic(SyntheticDatasetConfig(
        num_train=num_train, num_valid=num_valid, num_test=num_test))
  if not os.path.isdir(spec):
    raise errors.ConfigError(f"--dataset {spec}: neither 'synthetic' nor a folder")
  if os.path.exists(os.path.join(spec, "config.json")):
    dataset, _ = load(spec)
    wanted = {"train": num_train, "valid": num_valid, "test": num_test}
    for split in SPLITS:
      if not dataset[split] and wanted[split]:
        raise errors.ConfigError(f"--dataset {spec}: its {split} split is empty")
    return Dataset(name=dataset.name, splits={split: dataset[split][:wanted[split]]
                                              for split in SPLITS})
  return graph_folder(spec, num_train, num_valid, num_test)
