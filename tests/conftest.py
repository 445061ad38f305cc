"""Shared test helpers: installing throw-away third-party plugins through real entry points."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from playground.host.manager import reset_host


def write_plugin_dist(root: Path, dist: str, plugins: dict[str, str]) -> Path:
    """Write modules plus a `.dist-info` declaring them as `playground` entry points.

    `plugins` maps an entry-point name to the module's source. Putting `root` on
    sys.path (or PYTHONPATH) makes importlib.metadata see a real installed distribution.
    """
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = ["[playground]"]
    for name, source in plugins.items():
        module = f"{dist}_{name}".replace("-", "_")
        (root / f"{module}.py").write_text(textwrap.dedent(source))
        lines.append(f"{name} = {module}")
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return root


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m playground.cli.main ARGS` in a subprocess and return the completed process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "playground.cli.main", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=timeout)


@pytest.fixture(autouse=True)
def fresh_host():
    """Each test sees a freshly loaded host (tests change PLAYGROUND_* variables)."""
    reset_host()
    yield
    reset_host()
