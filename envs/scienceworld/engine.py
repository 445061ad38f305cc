"""The one ScienceWorld engine (a JVM behind py4j) of this process, started on first use.

ScienceWorld runs in a Java VM that takes seconds and ~1.5 GB to start, so a process
starts one and every `ScienceWorldEnv` in it shares it (`engine()`); an env that finds
another env's task loaded puts its own back (see env.py). The JVM dies with this
process even on SIGKILL: py4j's `--die-on-broken-pipe` ends it when our end of its stdin
closes, and it is started with the kernel's parent-death signal
(`playground.processes.die_with_parent`; the kernel ties that signal to the thread that
started the JVM, so the first env of a process is best made on its main thread).
`shutdown()` (also at exit) stops it.

Errors a user can fix (the `scienceworld` extra or Java missing, Java too old) raise
`ScienceWorldUnavailable`, a `MissingExtra` (a `PlaygroundError`): the CLI prints it and exits with code 2.
"""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import subprocess
import threading
from typing import Any

from playground.core.errors import MissingExtra
from playground.host_api import die_with_parent

JAVA_MIN = 8  # the jar of scienceworld 1.2.3 is built for Java 8 (class file version 52)
STEP_LIMIT = 100_000  # ScienceWorld's own step limit, out of the way: the runner bounds episodes
INSTALL_HINT = "pip install 'playground[scienceworld]'"

_lock = threading.Lock()
_engine: Any = None


class ScienceWorldUnavailable(MissingExtra):
    """The ScienceWorld engine cannot start here: the extra or Java is missing, or Java is too old."""


def java_version(java: str = "java") -> int:
    """The major version of `java` on PATH; `ScienceWorldUnavailable` when there is none."""
    path = shutil.which(java)
    if path is None:
        raise ScienceWorldUnavailable(f"scienceworld: no `{java}` on PATH; ScienceWorld needs Java {JAVA_MIN} "
                                      f"or newer (e.g. apt-get install openjdk-17-jre-headless)")
    result = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=60)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        raise ScienceWorldUnavailable(f"scienceworld: cannot read the Java version from `{path} -version`")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def check_java(java: str = "java") -> None:
    """Raise `ScienceWorldUnavailable` unless `java` is Java `JAVA_MIN` or newer."""
    version = java_version(java)
    if version < JAVA_MIN:
        raise ScienceWorldUnavailable(f"scienceworld: Java {version} found; ScienceWorld needs Java {JAVA_MIN} "
                                      f"or newer")


def scienceworld_module() -> Any:
    """Import and return the `scienceworld` package; `ScienceWorldUnavailable` names the extra when missing."""
    try:
        import scienceworld
    except ImportError as exc:
        raise ScienceWorldUnavailable(f"scienceworld: the env needs the `scienceworld` package: {INSTALL_HINT} "
                                      f"({exc})") from None
    return scienceworld


def _popen_dying_with_parent(popen):
    """`subprocess.Popen` whose child asks for SIGKILL when this process dies."""
    @functools.wraps(popen)
    def start(*args, **kwargs):
        kwargs.setdefault("preexec_fn", die_with_parent)
        return popen(*args, **kwargs)
    return start


def engine() -> Any:
    """This process's `scienceworld.ScienceWorldEnv`, started on the first call (one JVM per process)."""
    global _engine
    with _lock:
        if _engine is None:
            package = scienceworld_module()
            check_java()
            import py4j.java_gateway as gateway

            popen = gateway.Popen
            gateway.Popen = _popen_dying_with_parent(popen)  # py4j's launch_gateway takes no preexec_fn
            try:
                _engine = package.ScienceWorldEnv("", envStepLimit=STEP_LIMIT)
            finally:
                gateway.Popen = popen
            atexit.register(shutdown)
        return _engine


SPECIAL_INPUTS = ("help", "objects", "task")  # answered by ScienceWorld's step before its parser sees them


def parser_reply(sw: Any, command: str) -> str:
    """What ScienceWorld's input parser says to `command` in the loaded world, without running it.

    The parser's own `parse` (the one `step` calls first), reached through py4j: "No known
    action matches that input." for a command it cannot match, an "Ambiguous request" listing
    the options for one that names several objects, else the matched action's name. Nothing
    is queued or run; an ambiguity the call leaves in the parser is cleared. Call it only
    while the engine is not asking an ambiguity question (its answers are the options).
    """
    if command.strip().lower() in SPECIAL_INPUTS:
        return command.strip().lower()
    interface = sw.server.agentInterface().get()
    parser = interface.inputParser()
    visible = interface.getAgentVisibleObjects(getattr(interface, "getAgentVisibleObjects$default$1")())
    agent = interface.agent()
    parsed = parser.parse(command, visible.productElement(1), interface.universe(), agent, interface.objMonitor(),
                          interface.task().goalSequence(), agent.getContainer().get())
    if parser.isInAmbiguousState():
        parser.clearAmbiguousState()
    return str(parsed.productElement(2))


def java_pid() -> int | None:
    """The pid of this process's JVM, or None when none is running."""
    if _engine is None:
        return None
    return _engine._gateway.java_process.pid


def shutdown() -> None:
    """Stop this process's JVM, if one runs (the next `engine()` starts a fresh one)."""
    global _engine
    with _lock:
        if _engine is None:
            return
        process = _engine._gateway.java_process
        try:
            _engine.close()
            process.wait(timeout=10)
        except Exception:  # noqa: BLE001 - a JVM that will not stop politely is killed
            process.kill()
            process.wait(timeout=10)
        _engine = None
