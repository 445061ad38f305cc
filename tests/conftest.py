"""Shared test helpers: installing throw-away third-party plugins through real entry points."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from playground.host.manager import reset_host
from tests.postgres_server import postgres_server, postgres_url  # noqa: F401 (fixtures: a real PostgreSQL)


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
def own_response_cache(tmp_path_factory, monkeypatch):
    """Each test has its own response cache (subprocesses inherit it), so no reply cached by another test or by
    the user's runs answers for a test's model: a scripted server on a reused port may script other replies."""
    monkeypatch.setenv("PLAYGROUND_RESPONSE_CACHE", str(tmp_path_factory.mktemp("responses")))


@pytest.fixture(autouse=True)
def fresh_host():
    """Each test sees a freshly loaded host (tests change PLAYGROUND_* variables)."""
    reset_host()
    yield
    reset_host()


# -- extras: skip for users who installed less, fail in CI ----------------------------------------------------------
#
# A test that needs an optional extra calls `require_extra(EXTRA, module)` (instead of pytest.importorskip) or is
# marked with `needs_extra(EXTRA, available, why)`. Without it, the test is skipped with a reason starting
# "missing extra 'EXTRA'". When PLAYGROUND_REQUIRE_EXTRAS names the extra (`.ci/run` sets it to every extra its
# test command installs), the hooks below turn that skip into a failure naming the extra, and a required extra
# that is not installed at all stops the session before it starts.

REQUIRE_VARIABLE = "PLAYGROUND_REQUIRE_EXTRAS"
MISSING_PREFIX = "missing extra "


def required_extras() -> set[str]:
    """The extras PLAYGROUND_REQUIRE_EXTRAS names (comma-separated; empty when unset)."""
    return {name.strip() for name in os.environ.get(REQUIRE_VARIABLE, "").split(",") if name.strip()}


def missing_reason(extra: str, what: str) -> str:
    return f"{MISSING_PREFIX}{extra!r}: {what} (pip install -e '.[{extra}]')"


def require_extra(extra: str, module: str):
    """Import and return `module` from the optional `extra`; skip (fail when the extra is required) if it cannot."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.skip(missing_reason(extra, f"cannot import {module} ({exc})"), allow_module_level=True)


def needs_extra(extra: str, available: bool, what: str):
    """A skipif mark for a test that needs `extra`; the skip becomes a failure when the extra is required."""
    return pytest.mark.skipif(not available, reason=missing_reason(extra, what))


def _extra_problems(extra: str) -> list[str]:
    """What is missing of an extra: its distributions (from playground's metadata) and, for appworld, the setup."""
    from packaging.requirements import Requirement

    declared = set()
    problems = []
    extras = importlib.metadata.metadata("playground").get_all("Provides-Extra") or []
    for line in importlib.metadata.requires("playground") or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.name == "playground":
            continue
        for name in extras:
            if requirement.marker.evaluate({"extra": name}):
                declared.add(name)
                if name == extra:
                    try:
                        importlib.metadata.distribution(requirement.name)
                    except importlib.metadata.PackageNotFoundError:
                        problems.append(f"{requirement.name} is not installed")
    if extra == "appworld":
        from playground.envs.appworld import setup as appworld_setup

        if not appworld_setup.is_set_up():
            problems.append(appworld_setup.not_set_up_message())
    elif extra not in declared:
        problems.append("no such extra in playground's metadata")
    return problems


def _required_missing(reason: str) -> str | None:
    """The extra a skip reason says is missing, when that extra is required; else None."""
    reason = reason.removeprefix("Skipped: ")
    if not reason.startswith(MISSING_PREFIX):
        return None
    extra = reason[len(MISSING_PREFIX):].split(":", 1)[0].strip("'\"")
    return extra if extra in required_extras() else None


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def pytest_configure(config):
    problems = {extra: _extra_problems(extra) for extra in sorted(required_extras())}
    problems = {extra: found for extra, found in problems.items() if found}
    if problems:
        raise pytest.UsageError(f"{REQUIRE_VARIABLE} requires extras that are missing: " + "; ".join(
            f"extra {extra!r}: {', '.join(found)}" for extra, found in problems.items()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        extra = _required_missing(_skip_reason(report))
        if extra:
            report.outcome = "failed"
            report.longrepr = f"{REQUIRE_VARIABLE} requires extra {extra!r}, but: {_skip_reason(report)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        extra = _required_missing(_skip_reason(report))
        if extra:
            report.outcome = "failed"
            report.longrepr = f"{REQUIRE_VARIABLE} requires extra {extra!r}, but: {_skip_reason(report)}"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run `playground ARGS` in-process; return (exit code, stdout, stderr) as captured by `capsys`."""
    from playground.cli.main import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err
