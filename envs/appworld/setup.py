"""`playground envs setup appworld`: AppWorld's own virtual environment and the embedded task set.

Creates `$PLAYGROUND_CACHE/appworld/venv` (python -m venv), installs `appworld` into it,
runs `appworld install` (unpacks AppWorld's bundled apps, offline), then runs
`build_tasks.py` with that venv's python to build the API docs and the embedded task set
under `$PLAYGROUND_CACHE/appworld/root` and check that every scripted solution passes
AppWorld's `evaluate()` and that doing nothing fails. Nothing of AppWorld's code or data
is committed to this repository; it is all made here, on the user's machine.

`APPWORLD_PYTHON` may name the python of an existing AppWorld venv instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Callable

from playground.core.task_sets import cache_root, path_from_env

APPWORLD_REQUIREMENT = "appworld==0.1.3.post1"
BUILDER = Path(__file__).with_name("build_tasks.py")
BUILDER_FILES = (BUILDER, BUILDER.with_name("catalogue.yaml"), BUILDER.with_name("evaluation.py.txt"))
MARKER = ".playground-built.json"
SETUP_COMMAND = "playground envs setup appworld"


def home() -> Path:
    """Where the AppWorld venv and the embedded task root live."""
    return cache_root() / "appworld"


def venv_python() -> Path:
    """The python of AppWorld's venv (`APPWORLD_PYTHON`, else the one setup creates)."""
    return path_from_env("APPWORLD_PYTHON") or home() / "venv" / "bin" / "python"


def embedded_root() -> Path:
    """The APPWORLD_ROOT of the embedded task set."""
    return home() / "root"


def builder_hash() -> str:
    """A hash of the task builder and its data: a change to either means the task set must be rebuilt."""
    digest = hashlib.sha256()
    for path in BUILDER_FILES:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:12]


def is_set_up() -> bool:
    """True when the venv exists and the embedded task set was built by this builder."""
    marker = embedded_root() / MARKER
    if not _is_program(venv_python()) or not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("builder") == builder_hash()
    except (OSError, json.JSONDecodeError):
        return False


def _is_program(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def not_set_up_message() -> str:
    """What to run when AppWorld is not set up (or what is wrong with APPWORLD_PYTHON)."""
    if os.environ.get("APPWORLD_PYTHON", "").strip() and not _is_program(venv_python()):
        return f"APPWORLD_PYTHON={venv_python()} is not an executable file; name the python of an AppWorld venv"
    return f"AppWorld is not set up here (no venv or embedded task set under {home()}); run: {SETUP_COMMAND}"


def _run(command: list[str], progress: Callable[[str], None], **kwargs) -> None:
    progress("  $ " + " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{command[0]} {' '.join(command[1:3])} failed with code {done.returncode}:\n{tail}")


def setup(progress: Callable[[str], None], force: bool = False) -> None:
    """Create the venv, install AppWorld, build and check the embedded task set.

    Idempotent: when the venv exists and the task set was built by the current builder,
    nothing is done unless `force`.
    """
    if is_set_up() and not force:
        progress(f"appworld: already set up in {home()} (venv and embedded task set)")
        return
    python = venv_python()
    if not _is_program(python):
        if os.environ.get("APPWORLD_PYTHON", "").strip():
            raise RuntimeError(f"APPWORLD_PYTHON={python} is not an executable file")
        progress(f"appworld: creating a virtual environment in {python.parents[1]}")
        venv.EnvBuilder(with_pip=True).create(python.parents[1])
    check = subprocess.run([str(python), "-c", "import appworld"], capture_output=True)
    if check.returncode != 0:
        progress(f"appworld: installing {APPWORLD_REQUIREMENT} (pydantic 1, SQLAlchemy 1.4, FastAPI) into its venv")
        # AppWorld's venv has its own pins (pydantic 1): a constraint file for playground's venv must not reach it.
        own_pins = {k: v for k, v in os.environ.items() if k not in ("PIP_CONSTRAINT", "PIP_REQUIREMENT")}
        _run([str(python), "-m", "pip", "install", "--quiet", APPWORLD_REQUIREMENT, "uvicorn"], progress, env=own_pins)
    progress("appworld: unpacking AppWorld's apps (appworld install)")
    root = embedded_root()
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "APPWORLD_ROOT": str(root)}
    _run([str(python), "-m", "appworld.cli", "install"], progress, env=env)
    progress(f"appworld: building and checking the embedded task set in {root} (about a minute)")
    (root / MARKER).unlink(missing_ok=True)
    _run([str(python), str(BUILDER), "--root", str(root)], progress, env=env)
    (root / MARKER).write_text(json.dumps({"builder": builder_hash(), "appworld": APPWORLD_REQUIREMENT,
                                           "python": sys.version.split()[0]}))
    progress("appworld: ready")
