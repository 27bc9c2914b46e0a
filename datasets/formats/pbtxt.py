"""A small reader and writer for protobuf text format, enough for TensorFlow's CostGraphDef.

Messages become dicts mapping a field name to the list of its values (a scalar or a nested
dict), so repeated and optional fields read alike. No schema: unknown fields are kept, and the
caller picks what it needs.
"""
from __future__ import annotations

import re
from typing import Any

from regal_datasets import errors

_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:inf|nan|0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fF]?)(?![\w.])
  | (?P<ident>[A-Za-z_][\w.]*)
  | (?P<punct>[{}<>:\[\],;])
""", re.VERBOSE)
_CLOSE = {"{": "}", "<": ">"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


def _tokens(text: str, source: str) -> list[tuple[str, str, int]]:
  tokens, position, line = [], 0, 1
  while position < len(text):
    match = _TOKEN.match(text, position)
    if not match:
      raise errors.FormatError(f"{source}:{line}: unexpected text "
                               f"{text[position:position + 20]!r}")
    kind = match.lastgroup
    if kind != "space":
      tokens.append((kind, match.group(), line))
    line += match.group().count("\n")
    position = match.end()
  return tokens


def _escape(text: str) -> str:
  """Every character `_unquote` reads back, escaped: a raw CR or tab would not survive a reader
  that translates line endings."""
  reverse = {value: key for key, value in _ESCAPES.items() if key != "'"}
  return "".join("\\" + reverse[c] if c in reverse else c for c in text)


def _unquote(token: str) -> str:
  body = token[1:-1]
  return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def _scalar(kind: str, token: str) -> Any:
  if kind == "string":
    return _unquote(token)
  if kind == "number":
    text = token.rstrip("fF") if not token.lower().startswith(("0x", "-0x", "+0x")) else token
    if re.fullmatch(r"[-+]?\d+", text):
      return int(text)
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", text):
      return int(text, 16)
    return float(text)
  if token in ("true", "True"):
    return True
  if token in ("false", "False"):
    return False
  return token  # An enum value such as DT_FLOAT.


def parse(text: str, source: str = "<pbtxt>") -> dict[str, list[Any]]:
  tokens = _tokens(text, source)
  position = 0

  def fail(message: str) -> None:
    line = tokens[min(position, len(tokens) - 1)][2] if tokens else 1
    raise errors.FormatError(f"{source}:{line}: {message}")

  def message(closer: str | None) -> dict[str, list[Any]]:
    nonlocal position
    fields: dict[str, list[Any]] = {}
    while True:
      if position >= len(tokens):
        if closer is not None:
          fail(f"missing {closer!r} at end of file")
        return fields
      kind, token, _ = tokens[position]
      if closer is not None and token == closer:
        position += 1
        return fields
      if kind != "ident":
        fail(f"expected a field name, found {token!r}")
      position += 1
      values = fields.setdefault(token, [])
      has_colon = position < len(tokens) and tokens[position][1] == ":"
      position += has_colon
      if position >= len(tokens):
        fail(f"field {token!r} has no value")
      values.extend(value_list() if tokens[position][1] == "[" else [value()])
      if position < len(tokens) and tokens[position][1] in (",", ";"):
        position += 1

  def value() -> Any:
    nonlocal position
    kind, token, _ = tokens[position]
    position += 1
    if token in _CLOSE:
      return message(_CLOSE[token])
    if kind in ("string", "number", "ident"):
      result = _scalar(kind, token)
      while kind == "string" and position < len(tokens) and tokens[position][0] == "string":
        result += _unquote(tokens[position][1])  # Adjacent strings concatenate.
        position += 1
      return result
    position -= 1
    fail(f"expected a value, found {token!r}")

  def value_list() -> list[Any]:
    nonlocal position
    position += 1
    values = []
    while position < len(tokens) and tokens[position][1] != "]":
      values.append(value())
      if position < len(tokens) and tokens[position][1] == ",":
        position += 1
    if position >= len(tokens):
      fail("missing ']'")
    position += 1
    return values

  return message(None)


def format_message(fields: dict[str, list[Any]], indent: int = 0) -> str:
  lines = []
  pad = "  " * indent
  for name, values in fields.items():
    for item in values:
      if isinstance(item, dict):
        lines.append(f"{pad}{name} {{")
        body = format_message(item, indent + 1)
        if body:
          lines.append(body)
        lines.append(f"{pad}}}")
      elif isinstance(item, str):
        escaped = _escape(item)
        lines.append(f'{pad}{name}: "{escaped}"')
      elif isinstance(item, bool):
        lines.append(f"{pad}{name}: {'true' if item else 'false'}")
      else:
        lines.append(f"{pad}{name}: {item!r}")
  return "\n".join(lines)
