"""Records by name, as the project's registries keep them (decoders, methods): a name is
registered once, and an unknown name is one line naming the known ones."""
from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from regal_datasets import errors

Record = TypeVar("Record")


class Registry(Generic[Record]):
  """Records (anything with a `name`) of one `kind` ("decoder", "method"), in the order they
  were registered."""

  def __init__(self, kind: str):
    self.kind = kind
    self._records: dict[str, Record] = {}

  def register(self, record: Record) -> Record:
    name = record.name  # type: ignore[attr-defined]
    if name in self._records:
      raise ValueError(f"{self.kind} {name!r} is registered already")
    self._records[name] = record
    return record

  def get(self, name: str) -> Record:
    if name not in self._records:
      raise errors.ConfigError(f"unknown {self.kind} {name!r}; known: "
                               f"{', '.join(self._records)}")
    return self._records[name]

  def pop(self, name: str) -> Record:
    """Takes a record out (a test's toy, once it is done)."""
    return self._records.pop(name)

  def names(self) -> tuple[str, ...]:
    return tuple(self._records)

  def values(self):
    return self._records.values()

  def items(self):
    return self._records.items()

  def __contains__(self, name: object) -> bool:
    return name in self._records

  def __iter__(self) -> Iterator[str]:
    return iter(self._records)
