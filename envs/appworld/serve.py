"""AppWorld's environment server, guarded: run by AppWorld's own venv python, never imported by playground.

    PLAYGROUND_APPWORLD_TOKEN=... PLAYGROUND_PARENT_PID=... python serve.py --port PORT

- Serves `appworld.serve.environment:app` under uvicorn on 127.0.0.1:PORT, behind a check
  that every HTTP request carries the run's token (`X-Playground-Token`); any other
  request gets 403, and `/_playground` answers `{"pid": ...}` to one with it. The token
  comes in the environment (not the command line, which other users can read) and is
  removed from it before AppWorld runs any code.
- Dies with its parent: `prctl(PR_SET_PDEATHSIG, SIGKILL)` (Linux; elsewhere the parent's
  pid file lets the next run find and stop it), and exits at once when the parent is
  already gone.
- SIGTERM or SIGINT: uvicorn shuts down, and the kernel ends the process `EXIT_GRACE`
  seconds later (SIGALRM) whatever AppWorld is still doing (its clean-up at exit alone
  takes seconds).

Standard library and uvicorn only: it runs with AppWorld's pinned dependencies.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import hmac
import json
import os
import signal
import sys
from typing import Any

TOKEN_ENV = "PLAYGROUND_APPWORLD_TOKEN"
PARENT_ENV = "PLAYGROUND_PARENT_PID"
HEADER = b"x-playground-token"
WHOAMI = "/_playground"
EXIT_GRACE = 1.0


def die_with_parent(parent_pid: int | None) -> None:
    """SIGKILL this process when its parent dies (Linux); exit now when it already has."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


class TokenGuard:
    """ASGI middleware: HTTP requests without the run's token get 403 and never reach AppWorld."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(HEADER, b"")
            if not hmac.compare_digest(given, self.token):
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body",
                            "body": b'{"detail": "not this run\'s AppWorld server (wrong or missing token)"}'})
                return
            if scope.get("path") == WHOAMI:  # lets the client tell its own server from another's
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": json.dumps({"pid": os.getpid()}).encode()})
                return
        await self.app(scope, receive, send)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    parent = os.environ.pop(PARENT_ENV, None)
    die_with_parent(int(parent) if parent else None)
    token = os.environ.pop(TOKEN_ENV, "")
    if not token:
        sys.exit(f"serve.py: no token in {TOKEN_ENV}")

    import uvicorn  # AppWorld's venv has it (installed by `playground envs setup appworld`)
    from appworld.serve.environment import app

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # The kernel ends the process EXIT_GRACE s from now, whatever it is doing: a timer thread
            # would not do (AppWorld freezes Python's clocks, and its clean-up at exit holds on for seconds).
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, EXIT_GRACE)

    config = uvicorn.Config(TokenGuard(app, token), host="127.0.0.1", port=args.port, log_level=args.log_level)
    Server(config).run()


if __name__ == "__main__":
    main()
