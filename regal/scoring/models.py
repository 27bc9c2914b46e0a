"""The performance models by name, one record each (`regal.scoring.model_record`): every place
that scores, checks or describes a model reads its record here. A model is its own package
(`reference.py`, and `native.py` / `batched.py` where it has them, its record in `__init__.py`)
plus its name declared in `registries` and its record in the tuple at the end; nothing else
branches on a model's name."""
from __future__ import annotations

from regal_datasets import errors
from regal.scoring import blocks, delay, doppler, sync, throughput, wc
from regal.scoring.model_record import Model, SplitModel
from regal.scoring.registries import MODELS, SPLIT_MODELS


def register(model: Model | SplitModel) -> Model | SplitModel:
  """Adds a model under its name (a name may be registered once)."""
  if model.name in (MODELS if isinstance(model, SplitModel) else SPLIT_MODELS):
    raise ValueError(f"model {model.name!r} is registered already")
  return (SPLIT_MODELS if isinstance(model, SplitModel) else MODELS).register(model)


def unregister(name: str) -> Model | SplitModel:
  """Takes a model out (a test's toy, once it is done)."""
  return (SPLIT_MODELS if name in SPLIT_MODELS else MODELS).unregister(name)


def get(name: str) -> Model:
  """A schedule model (scoring chromosomes of a graph on a DeviceSpec)."""
  if name in SPLIT_MODELS:
    raise errors.ConfigError(f"model {name!r} scores a profiled workload's split "
                             f"({SPLIT_MODELS.get(name).flag}), not a schedule")
  return MODELS.get(name)


def get_split(name: str) -> SplitModel:
  return SPLIT_MODELS.get(name)


names = MODELS.names  # The schedule models.
split_names = SPLIT_MODELS.names


for _model in (wc.MODEL, sync.MODEL, doppler.MODEL, delay.MODEL,  # schedules
               throughput.MODEL, blocks.MODEL):  # a profiled workload's split
  register(_model)
