"""AppWorld's own environment server, run from its own virtual environment, and a stdlib client.

AppWorld pins pydantic 1 and old SQLAlchemy/FastAPI, so it never shares this process's
environment: `playground envs setup appworld` creates a dedicated venv (see `setup.py`),
and `AppWorldServer` starts `appworld.serve.environment:app` from it under uvicorn on
127.0.0.1 and a free port, waits for it to answer, and stops it (process group, at exit
too) so no process is left behind. Requests are plain JSON over HTTP (urllib).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError

START_TIMEOUT = 120.0


class AppWorldError(PlaygroundError, RuntimeError):
    """The AppWorld server could not be started, or a request to it failed (the message says which)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppWorldServer:
    """One AppWorld environment server process (one task world at a time)."""

    def __init__(self, python: Path, root: Path, log_path: Path | None = None) -> None:
        self.python, self.root = Path(python), Path(root)
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.started_seconds = 0.0
        self._api_docs: dict | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server and wait until it answers (AppWorldError with its log tail if it does not)."""
        if self.process is not None and self.process.poll() is None:
            return
        self.port = free_port()
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        command = [str(self.python), "-m", "uvicorn", "appworld.serve.environment:app",
                   "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        started = time.perf_counter()
        self.process = subprocess.Popen(command, env={**os.environ, "APPWORLD_ROOT": str(self.root)},
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        atexit.register(self.stop)
        while time.perf_counter() - started < START_TIMEOUT:
            if self.process.poll() is not None:
                raise AppWorldError(f"the AppWorld server exited with code {self.process.returncode} "
                                    f"({self._log_tail()})")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=2):
                    self.started_seconds = time.perf_counter() - started
                    return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        self.stop()
        raise AppWorldError(f"the AppWorld server did not answer within {START_TIMEOUT:.0f} s ({self._log_tail()})")

    def stop(self) -> None:
        """Stop the server and everything it started."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)

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
        request = urllib.request.Request(self.url + path, data=data,
                                         headers={"Content-Type": "application/json"} if data is not None else {})
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
