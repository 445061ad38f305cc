"""AppWorld's own environment server, run from its own virtual environment, and a stdlib client.

AppWorld pins pydantic 1 and old SQLAlchemy/FastAPI, so it never shares this process's
environment: `playground envs setup appworld` creates a dedicated venv (see `setup.py`),
and `AppWorldServer` runs `serve.py` with that venv's python: AppWorld's
`appworld.serve.environment:app` under uvicorn on 127.0.0.1 and a free port, behind a
per-run token. Requests are plain JSON over HTTP (urllib) and carry the token.

No server outlives its run:

- the server dies with the process that started it (`serve.py` sets the Linux
  parent-death signal), so a run killed with `kill -9` takes it along; the signal follows
  the starting thread, so start it from one that lives as long as the server should;
- it runs in its own process group, stopped at exit: SIGTERM, then SIGKILL after
  `STOP_GRACE` seconds (AppWorld alone can take seconds to exit);
- each server has a pid file under `<cache>/appworld/servers/` naming it (pid, start
  time, port, token) and the process that started it; before a server starts, any
  server whose starter is gone is stopped (`stop_stale_servers`), and a live run's
  server is left alone.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.host_api import is_running, process_start_time, stop_process_group

START_TIMEOUT = 120.0
STOP_GRACE = 2.0
SERVE = Path(__file__).with_name("serve.py")
TOKEN_ENV = "PLAYGROUND_APPWORLD_TOKEN"  # read by serve.py, in AppWorld's venv
PARENT_ENV = "PLAYGROUND_PARENT_PID"
TOKEN_HEADER = "X-Playground-Token"
WHOAMI = "/_playground"  # answered by serve.py itself: {"pid": ...}, with the right token only


class AppWorldError(PlaygroundError, RuntimeError):
    """The AppWorld server could not be started, or a request to it failed (the message says which)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppWorldServer:
    """One AppWorld environment server process (one task world at a time)."""

    def __init__(self, python: Path, root: Path, log_path: Path | None = None, pid_dir: Path | None = None) -> None:
        self.python, self.root = Path(python), Path(root)
        self.log_path = log_path
        self.pid_dir = pid_dir
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.token = ""
        self.pid_file: Path | None = None
        self.started_seconds = 0.0
        self.stale_stopped: list[dict] = []  # pid files of stale servers stopped before this one started
        self._api_docs: dict | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Stop stale servers, start this one and wait until it answers with its token (AppWorldError with
        its log tail if it does not)."""
        if self.process is not None and self.process.poll() is None:
            return
        pid_dir = self._pid_dir()
        self.stale_stopped = stop_stale_servers(pid_dir)
        self.port, self.token = free_port(), secrets.token_urlsafe(24)
        command = [str(self.python), str(SERVE), "--port", str(self.port), "--log-level", "warning"]
        env = {**os.environ, "APPWORLD_ROOT": str(self.root), TOKEN_ENV: self.token, PARENT_ENV: str(os.getpid())}
        started = time.perf_counter()
        with open(self.log_path, "ab") if self.log_path else contextlib.nullcontext(subprocess.DEVNULL) as log:
            try:
                self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)
            except OSError as exc:  # not a program (a garbage APPWORLD_PYTHON), or not executable
                raise AppWorldError(f"cannot start the AppWorld server with {self.python} "
                                    f"({exc.strerror or exc}); is APPWORLD_PYTHON the python of an AppWorld venv?") \
                    from None
        self.pid_file = write_pid_file(pid_dir, self.process.pid, self.port, self.token, self.root)
        atexit.register(self.stop)
        while time.perf_counter() - started < START_TIMEOUT:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.stop()
                raise AppWorldError(f"the AppWorld server exited with code {code} ({self._log_tail()})")
            if answering_pid(self.port, self.token, timeout=2) == self.process.pid:
                self.started_seconds = time.perf_counter() - started
                return
            time.sleep(0.2)
        self.stop()
        raise AppWorldError(f"the AppWorld server did not answer within {START_TIMEOUT:.0f} s ({self._log_tail()})")

    def stop(self) -> None:
        """Stop the server and everything it started (SIGTERM, then SIGKILL after `STOP_GRACE` s) and
        remove its pid file."""
        process, self.process = self.process, None
        pid_file, self.pid_file = self.pid_file, None
        if process is not None and process.poll() is None:
            stop_process_group(process.pid, STOP_GRACE)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)

    def _pid_dir(self) -> Path:
        if self.pid_dir is None:
            from playground.envs.appworld import setup as appworld_setup

            return appworld_setup.home() / "servers"
        return Path(self.pid_dir)

    def request(self, path: str, timeout: float = 120.0, **body: Any) -> Any:
        """POST `body` as JSON to `path` and return the reply's `output` (AppWorldError on failure)."""
        return self._send(path, path, timeout, json.dumps(body).encode(), "output")

    def api_docs(self) -> dict[str, dict[str, dict]]:
        """AppWorld's API docs {app: {api: doc}}, fetched once per server."""
        if self._api_docs is None:
            self._api_docs = self.get("/api_docs")
        return self._api_docs

    def get(self, path: str, timeout: float = 120.0) -> Any:
        """GET `path` and return the decoded JSON reply."""
        return self._send(path, f"GET {path}", timeout)

    def _send(self, path: str, what: str, timeout: float, data: bytes | None = None, field: str | None = None) -> Any:
        """GET `path`, or POST `data` as JSON to it (starting the server first if needed); return the
        decoded reply, or its `field`."""
        self.start()  # before the URL is read: starting picks the port
        headers = {TOKEN_HEADER: self.token, **({"Content-Type": "application/json"} if data is not None else {})}
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                answer = json.load(reply)
                return answer[field] if field else answer
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise AppWorldError(f"AppWorld {what} failed with HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, json.JSONDecodeError, KeyError) as exc:
            raise AppWorldError(f"AppWorld {what} failed: {type(exc).__name__}: {exc}") from None

    def memory_mb(self) -> float | None:
        """Resident memory of the server process in MB (Linux /proc), or None."""
        if self.process is None:
            return None
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def _log_tail(self) -> str:
        if not self.log_path or not Path(self.log_path).exists():
            return "no log"
        tail = Path(self.log_path).read_text(errors="replace").strip().splitlines()[-5:]
        return "log: " + " | ".join(tail) if tail else "empty log"


def answering_pid(port: int, token: str, timeout: float = 2.0) -> int | None:
    """The pid of the server on 127.0.0.1:`port` that knows `token` (it answers `WHOAMI`), else None."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{WHOAMI}", headers={TOKEN_HEADER: token})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return int(json.load(reply)["pid"])
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return None


def write_pid_file(pid_dir: Path, pid: int, port: int, token: str, root: Path) -> Path:
    """Record a server just started by this process: `<pid_dir>/<pid>.json`, readable by its owner only
    (it holds the token), written whole or not at all."""
    pid_dir.mkdir(parents=True, exist_ok=True)
    record = {"pid": pid, "start_time": process_start_time(pid), "port": port, "token": token, "root": str(root),
              "parent_pid": os.getpid(), "parent_start_time": process_start_time(os.getpid()),
              "started": time.time()}
    path = pid_dir / f"{pid}.json"
    partial = pid_dir / f".{pid}.json.partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)
    os.replace(partial, path)
    return path


def stop_stale_servers(pid_dir: Path) -> list[dict]:
    """Stop every server recorded in `pid_dir` whose starting process is gone, and drop its pid file;
    return their records. A server is only stopped when it is still the recorded one: the same pid and
    start time (Linux), or, where start times cannot be read, the server on its port knows its token.
    Servers of live runs are left alone."""
    stopped = []
    for path in sorted(pid_dir.glob("*.json")) if pid_dir.is_dir() else []:
        try:
            record = json.loads(path.read_text())
            pid, parent = int(record["pid"]), int(record["parent_pid"])
        except (OSError, ValueError, KeyError, TypeError):
            if time.time() - _mtime(path) > 60:  # not one being written: junk
                path.unlink(missing_ok=True)
            continue
        if is_running(parent, record.get("parent_start_time")):
            continue
        start_time = record.get("start_time")
        port, token = int(record.get("port", 0)), str(record.get("token"))
        if is_running(pid, start_time) and (start_time is not None or answering_pid(port, token, 1) == pid):
            stop_process_group(pid, STOP_GRACE, start_time)
            stopped.append(record)
        path.unlink(missing_ok=True)
    return stopped


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()
