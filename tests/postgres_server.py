"""A real PostgreSQL server for the tests, started in a temporary folder and stopped at the end.

The binaries come from the `pgserver` wheel (the `test` extra installs it: README's test command is the only set-up a
fresh machine needs), else from a PostgreSQL on PATH (`initdb`, `postgres`). The server listens on 127.0.0.1 at a free
port (and a Unix socket in its folder), with password authentication (scram-sha-256) over TCP, so the tests connect
as a client would, the password coming from PGPASSWORD. PostgreSQL refuses to run as root: as root, the server runs
as `nobody` (its folder handed to that user, the binaries copied there when `nobody` cannot reach them).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

PASSWORD = "pg-test-secret"
USER = "postgres"
START_TIMEOUT_S = 60.0


def binaries() -> Path | None:
    """The folder holding `initdb` and `postgres`: the pgserver wheel's, else PATH's; None when neither exists."""
    spec = importlib.util.find_spec("pgserver")
    if spec is not None and spec.submodule_search_locations:
        folder = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
        if (folder / "postgres").is_file():
            return folder
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found and shutil.which("postgres") else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _reachable_by_others(path: Path) -> bool:
    """Whether every folder up to `path` lets other users in (so `nobody` can run what it holds)."""
    return all(folder.stat().st_mode & 0o005 == 0o005 for folder in [path, *path.parents])


def _copied_install(folder: Path, target: Path) -> Path:
    """A copy under `target` of the installation whose `bin` is `folder` (headers left out), with the shared
    libraries a wheel keeps beside its package in the same place relative to it: the pgserver wheel's binaries find
    theirs by RPATH `$ORIGIN/../../../pgserver.libs`. Returns the copy's `bin`."""
    install, package = folder.parent, folder.parent.parent
    copy = target / package.name / install.name
    shutil.copytree(install, copy, ignore=shutil.ignore_patterns("include"))
    libraries = package.parent / f"{package.name}.libs"
    if libraries.is_dir():
        shutil.copytree(libraries, target / libraries.name)
    return copy / folder.name


class PostgresServer:
    """One PostgreSQL server in its own temporary folder: `start()`, `url(schema)`, `stop()` (removes the folder)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="playground-pg-"))
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.log = self.root / "server.log"
        self.user = pwd.getpwnam("nobody") if os.geteuid() == 0 else None

    def url(self, schema: str | None = None, *, password: bool = False, database: str = "postgres") -> str:
        """A URL of this server for `schema` (its password in it only when `password`: else PGPASSWORD gives it)."""
        user = f"{USER}:{PASSWORD}" if password else USER
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}" + (f"?schema={schema}" if schema else "")

    def _run_as(self) -> dict:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def start(self) -> PostgresServer:
        """initdb, then the server; raises RuntimeError with the server's log when it does not come up."""
        folder = binaries()
        if folder is None:
            raise RuntimeError("no PostgreSQL binaries: install the test extra (pgserver) or PostgreSQL")
        if self.user is not None:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
            if not _reachable_by_others(folder):
                folder = _copied_install(folder, self.root / "install")
        password_file = self.root / "password"
        password_file.write_text(PASSWORD + "\n")
        if self.user is not None:
            os.chown(password_file, self.user.pw_uid, self.user.pw_gid)
        subprocess.run([str(folder / "initdb"), "-D", str(self.root / "data"), "-U", USER,
                        "--pwfile", str(password_file), "--auth-local=trust", "--auth-host=scram-sha-256",
                        "--encoding=UTF8", "--locale=C",
                        "--no-sync"], check=True, capture_output=True, text=True, **self._run_as())
        for _ in range(5):  # a port taken between the probe and the bind: another port
            self.port = _free_port()
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    [str(folder / "postgres"), "-D", str(self.root / "data"), "-p", str(self.port),
                     "-k", str(self.root), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                     "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200"],
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **self._run_as())
            if self._wait_until_ready():
                return self
        raise RuntimeError(f"the PostgreSQL server did not start:\n{self.log.read_text()[-3000:]}")

    def _wait_until_ready(self) -> bool:
        import psycopg

        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                psycopg.connect(self.url(password=True), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.1)
        self.process.kill()
        return False

    def stop(self) -> None:
        """Stop the server (a fast shutdown, then a kill) and remove its folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the whole session (skipped, and failed where the `test` extra is required, when
    psycopg or the binaries are missing)."""
    from tests.conftest import missing_reason

    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        pytest.skip(missing_reason("test", f"cannot import psycopg ({exc})"))
    if binaries() is None:
        pytest.skip(missing_reason("test", "no PostgreSQL binaries (the pgserver wheel)"))
    server = PostgresServer()
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server, monkeypatch):
    """A URL of a new schema on the session's server; its password comes from PGPASSWORD, as a user's would."""
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    return postgres_server.url(f"t_{uuid.uuid4().hex[:16]}")
