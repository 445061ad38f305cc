"""The explicit package list in pyproject.toml must match the folders on disk."""

from __future__ import annotations

import tomllib
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
