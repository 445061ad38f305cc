"""requirements/lock.txt (the exact versions CI installs, see docs/requirements-lock.md) cannot silently go stale:
it pins every requirement of pyproject.toml that README's test command and the `train` extra install, at a version the
requirement allows, and CI installs under it."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK_FILE = ROOT / "requirements" / "lock.txt"
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
REFRESH = "scripts/lock_requirements.sh"
LEFT_OUT = {"pip", "setuptools"}  # the script leaves them out (--no-emit-package)


def _lock() -> dict[str, str]:
    pins = {}
    for line in LOCK_FILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.fullmatch(line)
        assert match, f"requirements/lock.txt: not a plain pin: {line!r}"
        pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def _locked_extras() -> list[str]:
    """The extras of README's test command (line 2 of the Quickstart block, as .ci/run reads it) and `train`."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quickstart\n\n```bash\n(.*?)```", readme, re.S).group(1)
    extras = re.search(r"\.\[([^]]*)\]", block.splitlines()[1]).group(1).split(",")
    return [*extras, "train"]


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = project["dependencies"] + [r for extra in _locked_extras() for r in project["optional-dependencies"][extra]]
    return [Requirement(r) for r in names]


def test_the_lock_pins_every_requirement_of_the_tested_extras_at_an_allowed_version():
    pins = _lock()
    missing = [str(r) for r in _requirements() if canonicalize_name(r.name) not in pins]
    assert not missing, f"not in requirements/lock.txt (run {REFRESH}): {missing}"
    outside = [f"{r} (locked {pins[canonicalize_name(r.name)]})" for r in _requirements()
               if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)]
    assert not outside, f"requirements/lock.txt pins versions pyproject.toml excludes (run {REFRESH}): {outside}"


def test_the_lock_leaves_the_project_and_build_tools_unpinned():
    """The project comes from the checkout (older pips refuse a constraint on a path install); pip and setuptools
    stay free."""
    pins = _lock()
    assert "playground" not in pins
    assert not LEFT_OUT & pins.keys()


def test_the_lock_pins_torchs_cpu_build_that_ci_installs():
    """requirements/torch.txt holds the lock to the CPU build; .ci/run installs that version."""
    held = PIN.fullmatch((ROOT / "requirements" / "torch.txt").read_text().splitlines()[-1])
    assert held and held.group(1) == "torch" and held.group(2).endswith("+cpu")
    assert _lock()["torch"] == held.group(2)
    public = held.group(2).removesuffix("+cpu")
    assert f"python -m pip install -q 'torch=={public}'" in (ROOT / ".ci" / "run").read_text()


def test_ci_installs_under_the_lock_and_readme_says_how():
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'lock="$PWD/requirements/lock.txt"' in ci
    assert 'pip() { PIP_CONSTRAINT="$lock" command pip "$@"; }' in ci
    assert ci.index("pip() {") < ci.index('eval "$test_command"')
    assert ci.count('PIP_CONSTRAINT="$lock" python -m pip install') == 2  # torch and the train extra
    readme = (ROOT / "README.md").read_text()
    assert "PIP_CONSTRAINT=requirements/lock.txt" in readme and REFRESH in readme


def test_installed_locked_packages_need_nothing_outside_the_lock():
    """Where this environment has a locked package at its locked version, everything it requires is locked too
    (catches a lock edited by hand, or one missing a dependency a new release added)."""
    pins = _lock()
    unlocked = []
    for name, version in pins.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue
        for spec in dist.requires or []:
            requirement = Requirement(spec)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue
            needed = canonicalize_name(requirement.name)
            if needed not in pins and needed not in LEFT_OUT:
                unlocked.append(f"{name} needs {requirement}")
    assert not unlocked, f"not in requirements/lock.txt (run {REFRESH}): {unlocked}"
