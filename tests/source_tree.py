"""The source folders and the names they are imported by: setup.cfg's `package_dir` installs
datasets/, brkga/ and experiments/ as regal_datasets, regal_brkga and regal_experiments (names
no well-known package uses); regal/ is regal. Tests that read the source go through here."""
import configparser
import pathlib
from typing import Iterator

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ("brkga", "datasets", "regal", "experiments")


def import_names() -> dict[str, str]:
  """Folder -> the top-level name it is imported by."""
  config = configparser.ConfigParser()
  config.read(REPO_ROOT / "setup.cfg")
  renamed = {}
  for line in config["options"]["package_dir"].strip().splitlines():
    name, folder = (part.strip() for part in line.split("="))
    renamed[folder] = name
  return {folder: renamed.get(folder, folder) for folder in FOLDERS}


def module_name(path: pathlib.Path) -> str:
  """The dotted name a source file is imported by."""
  parts = path.relative_to(REPO_ROOT).with_suffix("").parts
  parts = parts[:-1] if parts[-1] == "__init__" else parts
  return ".".join((import_names()[parts[0]], *parts[1:]))


def modules(folders=FOLDERS) -> Iterator[tuple[pathlib.Path, str]]:
  """(path, dotted name) of every source file in the folders."""
  for folder in folders:
    for path in sorted((REPO_ROOT / folder).rglob("*.py")):
      yield path, module_name(path)
