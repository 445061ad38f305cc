"""The layering contracts in pyproject.toml hold, and each one breaks on a planted violation."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import needs_extra

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports")

pytestmark = [pytest.mark.slow, needs_extra("test", LINT is not None, "import-linter's lint-imports is not on PATH")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A plain (non-editable) install of the checkout, where playground.plugins and playground.envs exist on disk."""
    target = tmp_path_factory.mktemp("layers")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(target),
                    str(ROOT)], check=True, capture_output=True)
    return target


def lint(target: Path) -> subprocess.CompletedProcess:
    return subprocess.run([LINT, "--no-cache", str(ROOT / "pyproject.toml")], cwd=target, capture_output=True, text=True)


def test_the_contracts_hold(installed):
    result = lint(installed)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("playground/core/loop.py", "import playground.run.runner", "core imports nothing else of playground"),
    ("playground/host/registry.py", "import playground.plugins.sentry",
     "the host reaches methods and envs only through the plugin manager"),
    ("playground/run/traces.py", "import playground.run.runner", "no import cycles anywhere"),
    ("playground/plugins/baselines/ace.py", "import playground.plugins.sentry.harness",
     "the baselines compose with Sentry by its registered name, never by importing it"),
    ("playground/plugins/darc/controls.py", "import playground.run.runner",
     "plugins and envs use only the plugin API and playground.core"),
    ("playground/envs/textworld/provider.py",
     "from playground.host.manager import Host", "plugins and envs use only the plugin API and playground.core"),
    ("playground/api.py", "import playground.run.runner",
     "the API's ground floor imports nothing above playground.core"),
    ("playground/api.py", "from playground.host_api import load_records",
     "the API's ground floor imports nothing above playground.core"),
])
def test_a_planted_violation_breaks_its_contract(installed, tmp_path, module, line, broken):
    copy = tmp_path / "site"
    shutil.copytree(installed, copy)
    path = copy / module
    path.write_text(path.read_text() + f"\n{line}  # planted\n")
    result = lint(copy)
    assert result.returncode != 0
    assert f"{broken} BROKEN" in result.stdout, result.stdout


def test_the_plugin_api_page_lists_and_counts_every_name_of_both_floors():
    """docs/plugin-api.md stays the API: every name `playground.api` and `playground.host_api` export is on it,
    every name resolves, and the page's counts are the modules' own."""
    import playground.api as api
    import playground.host_api as host_api

    page = (ROOT / "docs" / "plugin-api.md").read_text()
    for module in (api, host_api):
        missing = [name for name in module.__all__ if f"`{name}`" not in page]
        assert not missing, f"docs/plugin-api.md does not list {missing} of {module.__name__}"
        assert all(getattr(module, name) is not None for name in module.__all__)
    assert f"**{len(api.__all__)} names**" in page and f"**{len(host_api.__all__)} names**" in page


def test_the_ground_floor_imports_only_core():
    """Without import-linter too: every module `playground.api` imports is `playground.core` or outside playground."""
    import ast

    tree = ast.parse((ROOT / "playground" / "api.py").read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert {m for m in modules if m.startswith("playground") and not m.startswith("playground.core")} == set()
