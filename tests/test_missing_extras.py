"""An env whose extra or engine is missing: one line that says what to install, exit 2, nothing played; and
`playground envs` marks it."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import cli

REAL_FIND_SPEC = importlib.util.find_spec


def _hide(monkeypatch, *names: str) -> None:
    """Make `importlib.util.find_spec` say these packages are not installed."""
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] in names else REAL_FIND_SPEC(name, *a))


@pytest.mark.parametrize("env, package, install", [
    ("alfworld", "alfworld", "pip install 'playground[alfworld]'"),
    ("scienceworld", "scienceworld", "pip install 'playground[scienceworld]'"),
])
def test_a_missing_extra_is_one_line_and_exit_2(capsys, monkeypatch, tmp_path, env, package, install):
    _hide(monkeypatch, package)
    code, out, err = cli(capsys, "run", "--env", env, "--agent", "noisy", "--episodes", "1", "--quiet",
                         "--out", str(tmp_path / "run"))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and install in lines[0] and f"env '{env}'" in lines[0], err
    assert "Traceback" not in err and not (tmp_path / "run").exists()
    code, out, _ = cli(capsys, "envs")
    listing = out.splitlines()
    at = next(i for i, line in enumerate(listing) if line.startswith(f"{env}:"))
    assert listing[at + 1].strip().startswith("NOT INSTALLED:") and install in listing[at + 1]


def test_appworld_not_set_up_is_marked_with_its_setup_command(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("APPWORLD_PYTHON", raising=False)
    code, out, _ = cli(capsys, "envs")
    listing = out.splitlines()
    at = next(i for i, line in enumerate(listing) if line.startswith("appworld:"))
    assert code == 0 and "NOT INSTALLED" in listing[at + 1] and "playground envs setup appworld" in listing[at + 1]


def test_installed_envs_are_not_marked(capsys):
    code, out, _ = cli(capsys, "envs")
    listing = out.splitlines()
    at = next(i for i, line in enumerate(listing) if line.startswith("tiny:"))
    assert code == 0 and "NOT INSTALLED" not in listing[at + 1]
