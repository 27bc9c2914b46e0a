"""WORKSPACE.md stays a map: at most 200 lines, naming every module of brkga/, datasets/ and
regal/ (a module added without its line fails here) and no module that is gone."""
import re

from conftest import REPO_ROOT

MAP = REPO_ROOT / "WORKSPACE.md"
PACKAGES = ("brkga", "datasets", "regal")


def _modules() -> list[str]:
  """Each module's path from the repository root (package `__init__.py` files aside)."""
  return sorted("/".join(path.relative_to(REPO_ROOT).parts)
                for package in PACKAGES for path in (REPO_ROOT / package).rglob("*.py")
                if path.name != "__init__.py")


def _named() -> set[str]:
  return set(re.findall(r"`([\w/]+\.py)`", MAP.read_text()))


def test_the_map_fits_on_a_page_and_names_every_module():
  """A module is named by its path's last one or two parts (`devices.py`, `formats/dot.py`,
  `configs/default.py`)."""
  assert len(MAP.read_text().splitlines()) <= 200
  named = _named()
  missing = [m for m in _modules()
             if not {m.rsplit("/", 1)[-1], "/".join(m.split("/")[-2:])} & named]
  assert not missing, missing


def test_the_map_names_no_module_that_is_gone():
  """Every path the map names exists: from the repository root, or as the end of a module's
  or an experiment's path."""
  files = ["/".join(p.relative_to(REPO_ROOT).parts) for top in (*PACKAGES, "experiments")
           for p in (REPO_ROOT / top).rglob("*.py")]
  gone = [name for name in _named() if not (REPO_ROOT / name).exists()
          and not any(f == name or f.endswith("/" + name) for f in files)]
  assert not gone, gone
