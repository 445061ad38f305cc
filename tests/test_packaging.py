"""The explicit package list in pyproject.toml must match the folders on disk."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = {"playground.plugins": "plugins", "playground.envs": "envs"}


def _packages_on_disk() -> set[str]:
    found = set()
    for prefix, folder in [("playground", "playground"), *MAPPED.items()]:
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([prefix, *rel.parts]) if rel.parts else prefix)
    return found


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == MAPPED
    assert set(config["packages"]) == _packages_on_disk()


def test_the_appworld_builders_data_ships_with_the_package():
    """build_tasks.py reads catalogue.yaml and evaluation.py.txt beside it, in a non-editable install too."""
    from playground.envs.appworld.setup import BUILDER, BUILDER_FILES

    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    data = [path for path in BUILDER_FILES if path != BUILDER]
    assert data and all(path.is_file() for path in data)
    assert all(any(fnmatch(path.name, pattern) for pattern in shipped["playground.envs.appworld"]) for path in data)
