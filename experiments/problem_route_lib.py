"""The tracer behind `regal_experiments.problem_route` (its doc says what a stop, a climb and a
crossing are): no flags, so tests import it; run as a script with `--trace_only` it traces
the tree its imports resolve to (a baseline worktree) and prints the figures as JSON."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEARCH, SCORING = "regal.search", "regal.scoring"


def _layers() -> dict[str, int]:
  """The layers `tests/layering_test.py` enforces (lower number: lower layer), read from it."""
  path = os.path.join(REPO, "tests", "layering_test.py")
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  return next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
              and any(getattr(target, "id", None) == "LAYERS" for target in node.targets))


LAYERS = _layers()


def layer_of(module: str) -> tuple[str, int] | None:
  parts = module.split(".")
  for end in range(len(parts), 0, -1):
    name = ".".join(parts[:end])
    if name in LAYERS:
      return name, LAYERS[name]
  return None


def trace(ops: int, evals: int) -> list[tuple[str, str]]:
  """(module, function) of each stop of a default BRKGA run, in call order."""
  from regal_datasets import devices as devices_lib
  from regal_datasets import synthetic
  from regal.app import methods, optimize_lib
  from regal.scoring import performance

  root = os.path.dirname(os.path.dirname(os.path.abspath(methods.__file__)))
  stops, active = [], [None]

  def holds_problem(value) -> bool:
    return (isinstance(value, performance.Problem)
            or isinstance(getattr(value, "problem", None), performance.Problem)
            or isinstance(getattr(getattr(value, "evaluator", None), "problem", None),
                          performance.Problem))

  def profile(frame, event, arg):
    code = frame.f_code
    if active[0] is None:
      if event != "call" or code.co_name != "_run_brkga":
        return
      active[0] = frame
    if event == "return" and frame is active[0]:
      active[0] = None
      return
    if event != "call" or not code.co_filename.startswith(root):
      return
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    if any(holds_problem(frame.f_locals.get(name)) for name in names):
      stops.append((frame.f_globals.get("__name__", ""), code.co_name))

  graph = synthetic.sized_graph(ops)
  config = methods.RunConfig(evals=evals, seed=0)
  sys.setprofile(profile)
  try:
    optimize_lib.run(graph, devices_lib.homogeneous(2), config)
  finally:
    sys.setprofile(None)
  return stops


def route_figures(stops: list[tuple[str, str]]) -> dict:
  """Stops, files, climbs and crossings of a route; the route with repeats of a layer merged."""
  layers = [layer_of(module) for module, _ in stops]
  kept = [(stop, layer) for stop, layer in zip(stops, layers) if layer is not None]
  pairs = list(zip(kept, kept[1:]))
  merged: list[list] = []
  for (module, function), (name, _) in kept:
    if merged and merged[-1][0] == name:
      merged[-1][1].append(function)
    else:
      merged.append([name, [function]])
  return {"stops": len(kept), "modules": len({module for (module, _), _ in kept}),
          "climbs": sum(b[1][1] > a[1][1] for a, b in pairs),
          "search_to_scoring": sum(a[1][0] == SEARCH and b[1][0] == SCORING for a, b in pairs),
          "scoring_to_search": sum(a[1][0] == SCORING and b[1][0] == SEARCH for a, b in pairs),
          "route": [f"{name}: {', '.join(dict.fromkeys(functions))}"
                    for name, functions in merged]}


def traced_at(revision: str, ops: int, evals: int) -> dict:
  """`route_figures` of `revision`, traced by this file in a worktree of it."""
  with tempfile.TemporaryDirectory() as folder:
    tree = os.path.join(folder, "tree")
    subprocess.run(["git", "worktree", "add", "--detach", "-q", tree, revision], cwd=REPO,
                   check=True, capture_output=True, text=True)
    try:
      done = subprocess.run(
          [sys.executable, os.path.abspath(__file__), "--trace_only", f"--ops={ops}",
           f"--evals={evals}"], cwd=tree, capture_output=True, text=True,
          env={**os.environ, "PYTHONPATH": tree})
    finally:
      subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=REPO,
                     capture_output=True)
  if done.returncode:
    raise RuntimeError(f"tracing {revision} failed: {done.stderr.strip()[-500:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__" and "--trace_only" in sys.argv:
  # A baseline's trace (`traced_at`): its own tree's modules, JSON on the last line.
  arguments = dict(arg.lstrip("-").split("=") for arg in sys.argv[1:] if "=" in arg)
  print(json.dumps(route_figures(trace(int(arguments["ops"]), int(arguments["evals"])))))
