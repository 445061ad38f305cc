"""No silent skips in CI: a test skipped for a missing extra fails when PLAYGROUND_REQUIRE_EXTRAS names that extra,
and a required extra that is not installed stops the session, naming it. Users who installed less still get skips."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_VARIABLE, _extra_problems

ROOT = Path(__file__).resolve().parents[1]

TESTS = '''
import pytest
from tests.conftest import needs_extra, require_extra

def test_needs_a_module_that_is_missing():
    require_extra("{extra}", "no_such_module_for_playground_tests")

@needs_extra("{extra}", False, "the thing is absent")
def test_marked_as_needing_it():
    pass

def test_plain():
    pass
'''
MODULE_LEVEL = '''
from tests.conftest import require_extra
require_extra("{extra}", "no_such_module_for_playground_tests")

def test_never_collected():
    pass
'''
CONFTEST = "from tests.conftest import *  # noqa: F403\nfrom tests.conftest import pytest_configure, " \
           "pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"


@pytest.fixture(scope="module")
def extra():
    """An extra that is fully installed here (the session check must pass for it)."""
    for name in ("test", "alfworld", "local"):
        if not _extra_problems(name):
            return name
    pytest.skip("no optional extra is installed here to exercise the check with")


def pytest_in(tmp_path: Path, files: dict[str, str], required: str | None) -> subprocess.CompletedProcess:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_VARIABLE}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if required is not None:
        env[REQUIRE_VARIABLE] = required
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_without_the_variable_a_missing_extra_is_a_skip_that_names_it(tmp_path, extra):
    result = pytest_in(tmp_path, {"conftest.py": CONFTEST, "test_x.py": TESTS.format(extra=extra)}, None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 2 skipped" in result.stdout
    assert result.stdout.count(f"missing extra '{extra}'") == 2


def test_a_required_extra_turns_its_skips_into_failures(tmp_path, extra):
    result = pytest_in(tmp_path, {"conftest.py": CONFTEST, "test_x.py": TESTS.format(extra=extra)}, extra)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed, 1 error" in result.stdout  # the mark's skip happens at setup: an error
    assert result.stdout.count(f"{REQUIRE_VARIABLE} requires extra '{extra}'") >= 2
    assert "no_such_module_for_playground_tests" in result.stdout and "the thing is absent" in result.stdout


def test_requiring_another_extra_leaves_these_skips_alone(tmp_path, extra):
    other = "appworld" if extra != "appworld" and not _extra_problems("appworld") else None
    if other is None:
        pytest.skip("needs a second installed extra")
    result = pytest_in(tmp_path, {"conftest.py": CONFTEST, "test_x.py": TESTS.format(extra=extra)}, other)
    assert result.returncode == 0 and "1 passed, 2 skipped" in result.stdout, result.stdout + result.stderr


def test_a_module_level_requirement_fails_collection(tmp_path, extra):
    files = {"conftest.py": CONFTEST, "test_m.py": MODULE_LEVEL.format(extra=extra),
             "test_p.py": "def test_p():\n    pass\n"}
    assert pytest_in(tmp_path, files, None).returncode == 0  # skipped for a user
    result = pytest_in(tmp_path, files, extra)
    assert result.returncode != 0 and f"{REQUIRE_VARIABLE} requires extra '{extra}'" in result.stdout, result.stdout


def test_a_required_extra_that_is_not_installed_stops_the_session(tmp_path):
    result = pytest_in(tmp_path, {"conftest.py": CONFTEST, "test_p.py": "def test_p():\n    pass\n"},
                       "no-such-extra")
    assert result.returncode == 4  # a usage error: nothing ran
    assert "extra 'no-such-extra'" in result.stderr and "no such extra" in result.stderr
