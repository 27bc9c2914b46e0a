"""Records by name, the one kind of registry the project keeps (models, decoders, methods,
priors, learners): a name is registered once, an unknown name is one line naming the known
ones, and a built-in record may be *declared* by the module that registers it, so that its
name is known (a command line's choices and help) before that module, and JAX with it, loads.
"""
from __future__ import annotations

import importlib
from typing import Generic, Iterator, TypeVar

from regal_datasets import errors

Record = TypeVar("Record")


class Registry(Generic[Record]):
  """Records (anything with a `name`) of one `kind` ("decoder", "method"), in the order they
  were declared or registered."""

  def __init__(self, kind: str):
    self.kind = kind
    self._records: dict[str, Record | None] = {}  # None: declared, its module not loaded.
    self._modules: dict[str, str] = {}  # A declared name's module.

  def declare(self, module: str, *names: str) -> None:
    """Importing `module` registers `names`: they are known now, loaded on first `get`."""
    for name in names:
      if name in self._records:
        raise ValueError(f"{self.kind} {name!r} is registered already")
      self._records[name] = None
      self._modules[name] = module

  def register(self, record: Record) -> Record:
    name = record.name  # type: ignore[attr-defined]
    if self._records.get(name) is not None:  # A declared name is free until its module loads.
      raise ValueError(f"{self.kind} {name!r} is registered already")
    self._records[name] = record
    return record

  def unregister(self, name: str) -> Record:
    """Takes a record out (a test's toy, once it is done)."""
    self._modules.pop(name, None)
    return self._records.pop(name)

  def get(self, name: str) -> Record:
    if name not in self._records:
      raise errors.ConfigError(f"unknown {self.kind} {name!r}; known: "
                               f"{', '.join(self._records)}")
    return self._loaded(name)

  def _loaded(self, name: str) -> Record:
    record = self._records[name]
    if record is None:
      importlib.import_module(self._modules[name])
      record = self._records[name]
      if record is None:
        raise RuntimeError(f"{self._modules[name]} declares {self.kind} {name!r} but does not "
                           f"register it")
    return record

  def names(self) -> tuple[str, ...]:
    return tuple(self._records)

  def values(self) -> list[Record]:
    return [self._loaded(name) for name in self._records]

  def items(self) -> list[tuple[str, Record]]:
    return [(name, self._loaded(name)) for name in self._records]

  def __contains__(self, name: object) -> bool:
    return name in self._records

  def __iter__(self) -> Iterator[str]:
    return iter(self._records)
