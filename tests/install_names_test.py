"""regal shares an environment with the usual ML stack: what the distribution installs is
reached by names no well-known package uses (regal, regal_datasets, regal_brkga,
regal_experiments), and a Hugging Face `datasets` beside it stays the `datasets` users import,
inside a checkout and out of it (a stand-in of theirs here: nothing is downloaded)."""
import configparser
import json
import os
import subprocess
import sys

import source_tree

REPO_ROOT = source_tree.REPO_ROOT
OUR_NAMES = {"regal", "regal_datasets", "regal_brkga", "regal_experiments"}
TINY_GRAPH = ('{"format": "regal.graph", "version": 1, "name": "tiny", "ops": ['
              '{"name": "a", "compute_cost": 2}, {"name": "b", "compute_cost": 3}, '
              '{"name": "c", "compute_cost": 3}], "tensors": [{"producer": "a", "size": 1, '
              '"consumers": ["b", "c"]}]}')


def _listed_packages() -> set[str]:
  config = configparser.ConfigParser()
  config.read(REPO_ROOT / "setup.cfg")
  return set(config["options"]["packages"].split())


def test_setup_lists_every_package_by_its_installed_name():
  folders = {name.rsplit(".", 1)[0] if path.name != "__init__.py" else name
             for path, name in source_tree.modules()}
  assert _listed_packages() == folders
  assert set(source_tree.import_names().values()) == OUR_NAMES


def test_a_built_distribution_holds_only_our_names(tmp_path):
  """What `pip install .` copies into site-packages (setuptools' build_py): our four names,
  the packages' data beside them, and no top-level `datasets`, `brkga` or `experiments`."""
  subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q",
                  "build_py", "-d", str(tmp_path)], cwd=REPO_ROOT, check=True,
                 capture_output=True)
  assert {p.name for p in tmp_path.iterdir()} == OUR_NAMES
  assert (tmp_path / "regal_datasets" / "graph.py").exists()
  assert (tmp_path / "regal_brkga" / "engine.py").exists()
  assert (tmp_path / "regal" / "search" / "brkga_presets.json").exists()
  # The trained priors `--policy default` runs (regal.learning.shipped), each one listed.
  policies = tmp_path / "regal" / "learning" / "policies"
  with open(policies / "index.json") as f:
    names = [entry["name"] for entry in json.load(f)["policies"]]
  assert names and all((policies / name / "prior.msgpack").exists() for name in names)


def _stand_in_hugging_face(site) -> dict[str, str]:
  """A package named `datasets` as Hugging Face's is installed (a regular package with
  `load_dataset` and a `datasets.io` of its own), first on the path like a site-packages
  entry; the environment that sees it."""
  package = site / "datasets"
  (package / "io").mkdir(parents=True)
  (package / "__init__.py").write_text("def load_dataset(*args, **kwargs):\n  return 'theirs'\n")
  (package / "io" / "__init__.py").write_text("")
  return {**os.environ, "PYTHONPATH": os.pathsep.join(
      [str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}


def test_hugging_face_datasets_stays_theirs_and_regal_runs_beside_it(tmp_path):
  env = _stand_in_hugging_face(tmp_path / "site")
  elsewhere = tmp_path / "work"
  elsewhere.mkdir()
  for cwd in (elsewhere, REPO_ROOT):
    theirs = subprocess.run([sys.executable, "-c", "import datasets; print(datasets."
                             "load_dataset())"], cwd=cwd, env=env, capture_output=True,
                            text=True)
    assert theirs.stdout.strip() == "theirs", (cwd, theirs.stderr)
  graph = elsewhere / "tiny.json"
  graph.write_text(TINY_GRAPH)
  ours = subprocess.run([sys.executable, "-m", "regal.optimize", "--graph", str(graph),
                         "--devices", "2", "--method", "heft"], cwd=elsewhere, env=env,
                        capture_output=True, text=True)
  assert ours.returncode == 0, ours.stderr
  assert "best:          objective 6  makespan 6" in ours.stdout
