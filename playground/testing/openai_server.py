"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests of model clients and LLM agents.

    with ScriptedChatServer(replies=["Thought: go\\nAction: go east"]) as server:
        model = HTTPChatModel(server.base_url, "test-model")

Each reply is either a string (sent as the assistant message, with token usage), or a
`Reply` giving a status code, a raw body, a delay or headers. When the script runs out,
`default` answers (a callable of the request body, or a string). Every request body is
kept in `requests`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable


@dataclass
class Reply:
    """One scripted answer: an assistant message, or an error status / raw body, after an optional delay."""

    content: str | None = None
    status: int = 200
    raw: str | None = None
    delay: float = 0.0
    headers: dict = field(default_factory=dict)


def chat_response(content: str, prompt_tokens: int = 10, completion_tokens: int = 5) -> dict:
    """Return an OpenAI-format chat completion carrying `content`."""
    return {"id": "test", "object": "chat.completion", "model": "test-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default listen backlog (5) resets connections when many clients connect at once


class ScriptedChatServer:
    """A real HTTP server answering POST /v1/chat/completions from a script (see module docstring)."""

    def __init__(self, replies: Iterable[str | Reply] = (),
                 default: str | Callable[[dict], str | Reply] | None = None) -> None:
        self.replies = list(replies)
        self.default = default
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The URL to give a client, ending in /v1."""
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server's address
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "ScriptedChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            self.requests.append(body)
            item = self.replies.pop(0) if self.replies else None
        if item is None:
            if self.default is None:
                return Reply(status=500, raw='{"error": "script exhausted"}')
            item = self.default(body) if callable(self.default) else self.default
        return item if isinstance(item, Reply) else Reply(content=item)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, '{"error": "not found"}', {})
                    return
                reply = server._next_reply(body)
                if reply.delay:
                    time.sleep(reply.delay)
                text = reply.raw if reply.raw is not None else json.dumps(chat_response(reply.content or ""))
                self._send(reply.status, text, reply.headers)

            def _send(self, status: int, text: str, headers: dict) -> None:
                data = text.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (e.g. a timeout test)

            def log_message(self, *args) -> None:
                pass

        return Handler


class FirstActionModel:
    """A scripted model for `ScriptedChatServer(default=...)`: it answers an agent's request with the first action of
    its prompt's "Valid actions:" line (else `look`), after `delay` seconds, so the reply depends only on the request
    as a temperature-0 model's would. It counts the requests (`total`), those being answered at once (`now`), their
    most at once (`peak`), and when the first arrived (`first`, `time.perf_counter()`)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay, self.now, self.peak, self.total = delay, 0, 0, 0
        self.first: float | None = None
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        with self._lock:
            self.first = self.first or time.perf_counter()
            self.now += 1
            self.total += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.delay)
        with self._lock:
            self.now -= 1
        text = body["messages"][-1]["content"]
        line = next((ln for ln in text.splitlines() if ln.startswith("Valid actions: ")), "")
        return f"Thought: go\nAction: {line.removeprefix('Valid actions: ').split(', ')[0] or 'look'}"


class HeldReplies:
    """A reply function for `ScriptedChatServer(default=...)` that answers with `inner` until `hold_when()` is true,
    then holds each request until `release()` (or `timeout` seconds). A test that stops a run mid-episode waits for
    `wait_holding()` and then sends its signal: the run is surely waiting on the model, however loaded the machine
    (no race with the clock). Always `release()` afterwards (in a `finally`), so no server thread stays held."""

    def __init__(self, inner: Callable[[dict], str | Reply], hold_when: Callable[[], bool],
                 timeout: float = 120.0) -> None:
        self.inner, self.hold_when, self.timeout = inner, hold_when, timeout
        self._holding, self._released = threading.Event(), threading.Event()

    def __call__(self, body: dict) -> str | Reply:
        if not self._released.is_set() and self.hold_when():
            self._holding.set()
            self._released.wait(self.timeout)
        return self.inner(body)

    def wait_holding(self, timeout: float = 120.0, gave_up: Callable[[], bool] = lambda: False) -> bool:
        """Wait until a request is held (True), `timeout` passes or `gave_up()` is true (e.g. the process ended)."""
        deadline = time.monotonic() + timeout
        while not self._holding.wait(0.05):
            if time.monotonic() > deadline or gave_up():
                return False
        return True

    def release(self) -> None:
        """Answer the held requests and every later one at once."""
        self._released.set()
