"""Imports run one way (WORKSPACE.md): regal_datasets -> scoring -> execute -> baselines -> search ->
learning -> doppler_policy -> app -> the CLIs -> regal_experiments; regal_brkga and regal.startup (what a
process sets before JAX loads) import nothing of ours; and no modules import each other round
a loop. Every import statement counts, function-local ones included."""
import ast
import pathlib

import pytest
import source_tree

REPO_ROOT = source_tree.REPO_ROOT
# Lower number = lower layer; a module may import its own layer and those below.
LAYERS = {
    "regal_brkga": 0, "regal_datasets": 0, "regal.startup": 0,
    "regal.scoring": 1, "regal.parallelism": 1, "regal.execute": 2, "regal.baselines": 3, "regal.search": 4,
    "regal.learning": 5, "regal.doppler_policy": 6, "regal.app": 7,
    "regal.optimize": 8, "regal.train": 8, "regal": 8,
    "regal_experiments": 9,
}
OURS = tuple(source_tree.import_names().values())


def layer_of(module: str) -> tuple[str, int]:
  """The longest `LAYERS` prefix of a dotted module name."""
  parts = module.split(".")
  for end in range(len(parts), 0, -1):
    name = ".".join(parts[:end])
    if name in LAYERS:
      return name, LAYERS[name]
  raise KeyError(module)


def imported_modules(path: pathlib.Path, module: str) -> list[tuple[int, str]]:
  """(line, module) of every import of ours in the file, relative ones resolved."""
  package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
  found = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      found += [(node.lineno, alias.name) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        anchor = package.split(".")
        anchor = anchor[:len(anchor) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
      # `from regal import search` imports regal.search.
      found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
  return [(line, name) for line, name in found if name.split(".")[0] in OURS]


def _modules():
  return source_tree.modules()


def upward_imports() -> list[str]:
  problems = []
  for path, module in _modules():
    own_name, own = layer_of(module)
    for line, name in imported_modules(path, module):
      try:
        target_name, target = layer_of(name)
      except KeyError:  # `from regal import x` where x is a name, not a module: its package.
        target_name, target = layer_of(name.rsplit(".", 1)[0])
      if target > own or (own_name in ("regal_brkga", "regal_datasets") and target_name != own_name):
        problems.append(f"{path.relative_to(REPO_ROOT)}:{line}: {own_name} imports {name}")
  return problems


def test_no_import_runs_up_the_layers():
  assert upward_imports() == []


def test_the_scan_sees_an_upward_import(tmp_path, monkeypatch):
  """The scan itself: an import of the app from the scoring layer is named."""
  fake = tmp_path / "regal" / "scoring"
  fake.mkdir(parents=True)
  (fake / "bad.py").write_text("def f():\n  from regal.app import optimize_lib\n")
  assert imported_modules(fake / "bad.py", "regal.scoring.bad") == [
      (2, "regal.app.optimize_lib")]
  assert layer_of("regal.app.optimize_lib") == ("regal.app", 7)
  assert layer_of("regal.scoring.bad")[1] < layer_of("regal.app.optimize_lib")[1]
  with pytest.raises(KeyError):
    layer_of("numpy")


def import_graph() -> dict[str, set[str]]:
  """Module -> the modules of ours it imports (a name that is not a module: its package)."""
  modules = dict((module, path) for path, module in _modules())
  graph = {}
  for module, path in modules.items():
    targets = set()
    for _, name in imported_modules(path, module):
      while name and name not in modules:
        name = name.rsplit(".", 1)[0] if "." in name else ""
      if name and name != module:
        targets.add(name)
    graph[module] = targets
  return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected groups of more than one module (Tarjan), each sorted."""
  index, low, stack, on_stack, circles = {}, {}, [], set(), []

  def visit(node: str) -> None:
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in sorted(graph.get(node, ())):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      group = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        group.append(member)
        if member == node:
          break
      if len(group) > 1:
        circles.append(sorted(group))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return circles


def test_no_import_circle():
  """No two modules import each other, directly or round a loop (function-local imports
  count: one that dodges a circle still makes one)."""
  assert import_circles(import_graph()) == []


def test_the_circle_scan_sees_a_circle():
  assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
