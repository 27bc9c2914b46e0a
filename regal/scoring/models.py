"""The performance models by name, one record each (`regal.scoring.model_record`): every place
that scores, checks or describes a model reads its record here. A model is its own package
(`reference.py`, and `native.py` / `batched.py` where it has them, its record in `__init__.py`)
plus its name in the tuple at the end; nothing else branches on a model's name."""
from __future__ import annotations

from regal_datasets import errors
from regal.scoring import blocks, delay, doppler, sync, throughput, wc
from regal.scoring.model_record import Model, SplitModel

_REGISTRY: dict[str, Model | SplitModel] = {}


def register(model: Model | SplitModel) -> Model | SplitModel:
  """Adds a model under its name (a name may be registered once)."""
  if model.name in _REGISTRY:
    raise ValueError(f"model {model.name!r} is registered already")
  _REGISTRY[model.name] = model
  return model


def get(name: str) -> Model:
  """A schedule model (scoring chromosomes of a graph on a DeviceSpec)."""
  model = _REGISTRY.get(name)
  if isinstance(model, SplitModel):
    raise errors.ConfigError(f"model {name!r} scores a profiled workload's split ({model.flag}"
                             f"), not a schedule")
  if model is None:
    raise errors.ConfigError(f"unknown model {name!r}; known: {', '.join(names())}")
  return model


def get_split(name: str) -> SplitModel:
  model = _REGISTRY.get(name)
  if not isinstance(model, SplitModel):
    raise errors.ConfigError(f"unknown split model {name!r}; known: "
                             f"{', '.join(split_names())}")
  return model


def names() -> tuple[str, ...]:
  """The schedule models."""
  return tuple(name for name, model in _REGISTRY.items() if isinstance(model, Model))


def split_names() -> tuple[str, ...]:
  return tuple(name for name, model in _REGISTRY.items() if isinstance(model, SplitModel))


for _model in (wc.MODEL, sync.MODEL, doppler.MODEL, delay.MODEL,  # schedules
               throughput.MODEL, blocks.MODEL):  # a profiled workload's split
  register(_model)
