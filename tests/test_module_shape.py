"""One job per module: none over 500 lines, each with a docstring, none importing its own package's `__init__`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The source folders and the package each installs as (pyproject.toml's package-dir).
PACKAGES = {"playground": "playground", "plugins": "playground.plugins", "envs": "playground.envs"}
MAX_LINES = 500


def _modules() -> list[tuple[Path, str]]:
    """Every module of the three source folders with its dotted name."""
    found = []
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts or (folder == "playground" and path.parts[-2:-1] in (("plugins",), ("envs",))):
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join([package, *parts])
            found.append((path, name.removesuffix(".__init__")))
    return found


MODULES = _modules()


def test_the_walk_finds_the_three_source_folders():
    names = {name for _, name in MODULES}
    assert {"playground.run.runner", "playground.plugins.playbook.store", "playground.envs.appworld.env"} <= names


@pytest.mark.parametrize("path, name", MODULES, ids=[name for _, name in MODULES])
def test_module_is_short_and_says_its_job(path, name):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_LINES, f"{path.relative_to(ROOT)}: over {MAX_LINES} lines; split it by job"
    assert ast.get_docstring(ast.parse(text)), f"{path.relative_to(ROOT)}: no module docstring naming its job"


def _package_of(path: Path, name: str) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imports_own_init(path: Path, name: str) -> list[str]:
    """The imports in a (non-`__init__`) module that take a name from its own package's `__init__` rather than from
    a submodule: `from pkg import name` or `from . import name` where `name` is not a module of `pkg`."""
    if path.name == "__init__.py":
        return []
    package = _package_of(path, name)
    folder = path.parent
    submodules = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level == 1 and not source:
                source = package
            elif node.level:
                continue  # deeper relative imports name a submodule path explicitly
            if source == package:
                bad += [alias.name for alias in node.names if alias.name not in submodules]
        elif isinstance(node, ast.Import):
            bad += [alias.name for alias in node.names if alias.name == package and alias.asname is None]
    return bad


@pytest.mark.parametrize("path, name", MODULES, ids=[name for _, name in MODULES])
def test_no_module_imports_its_own_packages_init(path, name):
    bad = _imports_own_init(path, name)
    assert not bad, f"{path.relative_to(ROOT)} imports {bad} from its own package's __init__ (a package loop)"


def test_the_loop_check_catches_a_planted_import(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text('"""A package."""\nVALUE = 1\n')
    (package / "part.py").write_text('"""A part."""\nfrom pkg import VALUE\nfrom pkg import other\n')
    (package / "other.py").write_text('"""Another part."""\n')
    assert _imports_own_init(package / "part.py", "pkg.part") == ["VALUE"]
