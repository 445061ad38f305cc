"""Deadlines for plugin hook calls: a hook that never returns becomes a named fault instead of a hung run.

`watch(seconds)` is a context manager around one hook call. A single daemon thread checks the
calls being watched twice a second; when one passes its deadline, it raises `DeadlineExceeded`
in the thread making the call (CPython's `PyThreadState_SetAsyncExc`), which stops a hook busy
in Python code at its next bytecode. A hook blocked inside one C call (a socket read with no
timeout, `time.sleep` of a day) is stopped only when that call returns; in a worker process
(`--workers`), which calls `exit_when_stuck`, a call still running `grace` seconds after its
deadline fired ends the process (exit code STUCK_EXIT), and the pool replaces it and leaves its
episode unfinished. `DeadlineExceeded` derives from BaseException, so a plugin's `except
Exception` does not swallow it.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


class DeadlineExceeded(BaseException):
    """Raised in a thread whose watched call ran past its deadline."""


class HookDeadlineExceeded(DeadlineExceeded):
    """A plugin's hook call ran past `--hook-deadline`."""


class EpisodeDeadlineExceeded(DeadlineExceeded):
    """An episode ran past `--episode-deadline`."""


STUCK_EXIT = 75  # the exit code of a worker process ended by `exit_when_stuck`


@dataclass
class _Watch:
    thread: int
    due: float
    error: type[DeadlineExceeded]
    fired: bool = False


class _Watchdog:
    """The calls being watched, and the one thread that checks them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[int, _Watch] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self.stuck_grace: float | None = None  # `exit_when_stuck`: end the process this long after a deadline fired

    def add(self, seconds: float, error: type[DeadlineExceeded]) -> int:
        with self._lock:
            self._next += 1
            self._watches[self._next] = _Watch(threading.get_ident(), time.monotonic() + seconds, error)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hook-deadlines", daemon=True)
                self._thread.start()
            return self._next

    def remove(self, key: int) -> bool:
        """Stop watching; True when the deadline had fired (the pending exception is then cleared here)."""
        with self._lock:
            watch = self._watches.pop(key)
            if watch.fired:  # it may not have reached the thread yet: clear it, the caller raises it itself
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(watch.thread), None)
            return watch.fired

    def _run(self) -> None:
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            with self._lock:
                for watch in self._watches.values():
                    if watch.fired and self.stuck_grace is not None and now >= watch.due + self.stuck_grace:
                        _end_stuck_process(self.stuck_grace)
                    if not watch.fired and now >= watch.due:
                        watch.fired = True
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(watch.thread),
                                                                   ctypes.py_object(watch.error))


_WATCHDOG = _Watchdog()


def exit_when_stuck(grace: float) -> None:
    """In this process (a worker's), a watched call still running `grace` seconds after its deadline fired (blocked
    in one C call the raised exception cannot interrupt) ends the process with exit code STUCK_EXIT."""
    _WATCHDOG.stuck_grace = grace


def _end_stuck_process(grace: float) -> None:
    try:
        os.write(2, f"a call ran {grace:g} s past its deadline inside a call that cannot be interrupted; this worker "
                    f"process ends (exit code {STUCK_EXIT})\n".encode())
    finally:
        os._exit(STUCK_EXIT)


@contextmanager
def watch(seconds: float | None, error: type[DeadlineExceeded] = DeadlineExceeded) -> Iterator[None]:
    """Raise `error` in this thread if the block runs longer than `seconds` (None or 0: no deadline)."""
    if not seconds:
        yield
        return
    key = _WATCHDOG.add(seconds, error)
    fired = False
    try:
        yield
    finally:
        fired = _WATCHDOG.remove(key)  # whatever ends the block, it is no longer watched
    if fired:  # it ended normally, but only after the deadline had fired
        raise error()
