"""What every command of the project shares, checked on the source of each: it takes SIGINT and
SIGTERM before its heavy imports and runs through `regal_datasets.cli.run_cli` (one line and the
documented exit for a signal or bad input, never a traceback), and every numeric flag is
bounded (a budget of 10^20 once ran on for minutes; absl lets NaN through any bound, so
`run_cli` refuses non-finite floats for every flag)."""
import ast
import sys

import pytest
from conftest import REPO_ROOT

PACKAGES = ("datasets", "regal", "experiments")
# Library modules that are commands too: others import them, so they take the signals
# in their `__main__` block, after their own imports.
LIBRARY_COMMANDS = {"datasets/sharded.py", "datasets/zoo.py"}
# Numeric flags without absl bounds, and where their range is checked instead (each with a
# bad-input case in tests/bad_input_test.py).
CHECKED_ELSEWHERE = {
    ("regal/optimize.py", "evals"): "optimize_cli.check_flags and split_config: 1 to MAX_EVALS",
    ("regal/optimize.py", "doppler_evals"): "optimize_cli.check_flags: 0 to MAX_EVALS",
    ("regal/optimize.py", "time_limit"): "check_flags and split_config: positive and finite",
    ("regal/optimize.py", "memory_limit"): "check_flags: positive and finite",
    ("regal/parallelism/hardware.py", "devices"): "hardware.resolve: 1 to devices.MAX_DEVICES",
    **{("datasets/sharded.py", name): "sharded.generate: positive, at most 2^31 - 1" for name in (
        "devices", "dtype_bytes", "flops_per_byte", "size", "seq_len", "hidden", "heads", "mlp",
        "ffnn_batch", "ffnn_width")},
}


def _sources():
  return sorted(path for package in PACKAGES for path in (REPO_ROOT / package).rglob("*.py"))


def _is_main_guard(node) -> bool:
  return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
          and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def _is_call(node, text: str) -> bool:
  return isinstance(node, ast.Expr) and ast.unparse(node.value) == text


COMMANDS = [path for path in _sources() if any(_is_main_guard(node) for node in
                                               ast.parse(path.read_text()).body)]


def _name(path) -> str:
  return str(path.relative_to(REPO_ROOT))


@pytest.mark.parametrize("path", COMMANDS, ids=_name)
def test_a_command_takes_the_signals_first_and_runs_through_run_cli(path):
  tree = ast.parse(path.read_text())
  guards = [node for node in tree.body if _is_main_guard(node)]
  last = guards[-1]
  assert any("cli.run_cli(main" in ast.unparse(node) for node in last.body), _name(path)
  assert "app.run(" not in path.read_text(), _name(path)
  if _name(path) in LIBRARY_COMMANDS:
    assert _is_call(last.body[0], "cli.watch_signals()"), _name(path)
    return
  # Only the docstring, the standard library and `from regal_datasets import cli` (and errors, both
  # light) before the guard that takes the signals.
  first = next(k for k, node in enumerate(tree.body) if _is_main_guard(node))
  assert [ast.unparse(node.body[0]) for node in [tree.body[first]]] == ["cli.watch_signals()"]
  for node in tree.body[:first]:
    light = (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) or (
        isinstance(node, ast.Import) and all(_stdlib(a.name) for a in node.names)) or (
        isinstance(node, ast.ImportFrom) and (_stdlib(node.module) or (
            node.module == "regal_datasets" and {a.name for a in node.names} <= {"cli", "errors"})))
    assert light, f"{_name(path)}: {ast.unparse(node)} runs before the signals are taken"


def _stdlib(module: str) -> bool:
  return module.split(".")[0] in sys.stdlib_module_names


def _numeric_flags(path):
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(
        ("DEFINE_integer", "DEFINE_float")):
      yield node.args[0].value, {keyword.arg for keyword in node.keywords}


FLAGS = [(path, name, keywords) for path in _sources() for name, keywords in
         _numeric_flags(path)]


@pytest.mark.parametrize("path, name, keywords", FLAGS,
                         ids=[f"{_name(p)}:{n}" for p, n, _ in FLAGS])
def test_every_numeric_flag_is_bounded(path, name, keywords):
  if (_name(path), name) in CHECKED_ELSEWHERE:
    assert not {"lower_bound", "upper_bound"} <= keywords  # Else: drop it from the list.
    return
  assert {"lower_bound", "upper_bound"} <= keywords, f"{_name(path)} --{name}"


def test_there_are_commands_to_check():
  assert len(COMMANDS) >= 25 and len(FLAGS) >= 80


def test_the_optimizer_checks_its_flags_before_the_libraries_load():
  """`regal.optimize` defines its flags from `regal.app.choices` without JAX, numba or Ray
  (so a mistake answers at once), and those names are the registries' own."""
  import subprocess
  loaded = subprocess.run(
      [sys.executable, "-c", "import sys, regal.optimize; "
       "print(sorted(m for m in ('jax', 'numba', 'ray', 'flax') if m in sys.modules))"],
      capture_output=True, text=True, check=True).stdout.strip()
  assert loaded == "[]"
  from regal.app import choices, methods, pipeline_lib
  from regal.doppler_policy import method as doppler_method
  from regal.scoring import decoders, performance
  # Each registry's declared names are its records' (loading them checks it, name by name).
  for registry in (choices.MODEL_REGISTRY, choices.DECODER_REGISTRY, choices.METHOD_REGISTRY,
                   choices.SPLIT_METHOD_REGISTRY, choices.PRIOR_REGISTRY,
                   choices.HEURISTIC_REGISTRY):
    assert [record.name for record in registry.values()] == list(registry.names())
  assert choices.MODELS == tuple(performance.MODELS)
  assert choices.SPLIT_MODEL == pipeline_lib.MODEL
  assert choices.SPLIT_OBJECTIVE == pipeline_lib.OBJECTIVE
  assert choices.DECODERS == decoders.BUILT_IN == tuple(performance.DECODERS)
  assert choices.METHODS == tuple(methods.METHODS)
  assert choices.SPLIT_METHODS == methods.SPLIT_METHODS
  assert (choices.ARMS, choices.DEFAULT_ARMS) == (methods.known_arms(),
                                                  tuple(methods.DEFAULT_ARMS))
  assert choices.MAX_DOPPLER_SAMPLES == doppler_method.MAX_SAMPLES
  assert choices.MAX_EVALS == methods.MAX_EVALS
  assert choices.PRIORS == ("none", "bottom_level", "group_island")
