"""A client for any OpenAI-compatible chat endpoint over HTTP (`HTTPChatModel`).

It retries with exponential backoff on 429, 5xx, connection errors and bodies cut off mid-way, honours
`Retry-After` (seconds or an HTTP date, at most 60 s), gives every request a total deadline of `timeout` seconds
(connect, headers and body together: a server trickling bytes is cut off), refuses bodies over `max_body_bytes`,
keeps at most `max_reply_chars` of a reply (what was cut is marked), raises LLMError for a reply of the wrong shape,
and can keep an on-disk cache of responses keyed by the full request (useful for reruns and tests of prompts).
With a JSON schema it sends `response_format` (`json_schema`, falling back once per client to `json_object` and
then to the prompt alone where the server refuses it).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import os
import re
import socket
import threading
import time
import urllib.parse
import urllib.request
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any, ClassVar, cast

from playground.agents.chat import Completion, LLMError, cache_entry, from_cache_entry, grammar_schema, parse_completion
from playground.agents.response_cache import cache_for, is_deterministic

MAX_CONNECTIONS_VARIABLE = "PLAYGROUND_MAX_CONNECTIONS"  # at most this many requests at once per endpoint
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_RETRY_AFTER_S = 60.0
# Statuses with which a server refuses a `response_format` it does not support (an error body naming
# `response_format` counts too, whatever its status); the client then tries the next, plainer one.
REFUSAL_STATUS = {400, 404, 415, 422, 501}
REPLY_FORMATS = ("json_schema", "json_object", "prompt")  # an HTTP client's structured-reply modes, strictest first


class ResponseFormatRefused(LLMError):
    """The server refused a request carrying `response_format` (see `REFUSAL_STATUS`)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class HTTPChatModel:
    """A client for an OpenAI-compatible `/chat/completions` endpoint (vLLM, Ollama, llama.cpp, hosted APIs)."""

    # `complete(choices=...)` cannot constrain the reply (the protocol has no field for it): a constrained agent asks
    # for a JSON schema whose action is an enum of the choices instead (`playground.agents.llm.action_schema`)
    constrains_choices: ClassVar[bool] = False
    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.0
    seed: int | None = 0
    max_tokens: int = 256
    timeout: float = 60.0  # seconds for a whole request: connect, headers and body
    retries: int = 4
    backoff: float = 0.5
    cache_dir: str | os.PathLike | None = None  # the response cache's folder (None: no cache; see response_cache)
    max_body_bytes: int = 16 * 1024 * 1024
    max_reply_chars: int = 100_000
    # How a reply with a JSON schema is asked for (one of REPLY_FORMATS): `json_schema` first; lowered for good, once
    # per client, when the server refuses it and a plainer format worked. `json_object` requests carry the schema as
    # `schema` too (llama.cpp's server constrains its decoding with it) until the server refuses that.
    reply_format: str = "json_schema"
    json_object_schema: bool = True

    def complete(self, messages: list[dict], *, choices: list[str] | None = None,
                 max_tokens: int | None = None, json_schema: dict | None = None,
                 stop: list[str] | None = None) -> Completion:
        """Send one chat request (retrying transient failures) and return the reply.

        `choices` is not sent: the OpenAI protocol has no field for it, so the reply is the model's own (a
        constrained agent sends a `json_schema` with an enum instead: `constrains_choices`). `stop` is sent as the
        request's `stop`.

        With `json_schema`, the request asks for a JSON object of that schema by `response_format`, starting at
        `reply_format`: a server that refuses it (HTTP 400, 404, 415, 422 or 501, or an error naming
        `response_format`) is asked again with the next plainer format (json_schema, json_object with the schema,
        json_object, none); the format that worked is kept for the later calls. A request refused in every format
        raises its last error and changes nothing."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": max_tokens or self.max_tokens}
        if self.seed is not None:
            body["seed"] = self.seed
        if stop:
            body["stop"] = list(stop)
        if json_schema is None:
            return self._send(body, "")
        ladder = _FORMAT_LADDER[self._format_step():]
        for number, (mode, with_schema) in enumerate(ladder):
            response_format = _response_format(mode, with_schema, json_schema)
            request = {**body, "response_format": response_format} if response_format is not None else body
            try:
                completion = self._send(request, mode, refusable=response_format is not None)
            except ResponseFormatRefused:
                if number == len(ladder) - 1:
                    raise
                continue
            self.reply_format = mode
            if mode == "json_object":
                self.json_object_schema = with_schema
            return completion
        raise AssertionError("unreachable: the last format carries no response_format")  # pragma: no cover

    def _format_step(self) -> int:
        """Where on `_FORMAT_LADDER` this client's remembered reply format starts."""
        if self.reply_format == "json_object":
            return 1 if self.json_object_schema else 2
        return {"json_schema": 0, "prompt": 3}.get(self.reply_format, 0)

    def _send(self, body: dict, mode: str, refusable: bool = False) -> Completion:
        """One request (from the response cache when it holds it), its completion marked with `mode`."""
        cache = cache_for(self.cache_dir) if is_deterministic(self.temperature, self.seed) else None
        key = {"url": self.base_url, **body}
        stored = from_cache_entry(cache.get(key), mode) if cache is not None else None
        if stored is not None:
            return stored
        payload = self._post_with_retries(body, refusable)
        completion = replace(parse_completion(payload, self.base_url, self.max_reply_chars), mode=mode)
        if cache is not None:
            cache.put(key, cache_entry(completion))
        return completion

    def _post_with_retries(self, body: dict, refusable: bool = False) -> dict:
        endpoint = _endpoint(self.base_url)
        last_error = ""
        for attempt in range(self.retries + 1):
            endpoint.wait_out_pause()
            with endpoint.slot:
                outcome, wait, last_error = self._attempt(body, refusable)
            if outcome is not None:
                return outcome
            if attempt < self.retries:
                if wait is not None:  # the server asked every client to wait: the whole endpoint pauses
                    endpoint.pause(wait)
                    endpoint.wait_out_pause()
                else:
                    time.sleep(self.backoff * (2 ** attempt))
        raise LLMError(f"{self.base_url.rstrip('/')}/chat/completions: gave up after {self.retries + 1} attempts; "
                       f"last error: {last_error}")

    def _attempt(self, body: dict, refusable: bool) -> tuple[dict | None, float | None, str]:
        """One POST: (the reply, None, "") or (None, seconds the server asked to wait or None, the error)."""
        url = self.base_url.rstrip("/") + "/chat/completions"
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            status, reply_headers, raw = self._post_once(url, data, headers)
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, cut off mid-body
            return None, None, f"{type(exc).__name__}: {exc}"
        if status >= 400:
            error = f"HTTP {status}: {raw[:300].decode('utf-8', 'replace')}"
            if refusable and refuses_response_format(status, raw):
                raise ResponseFormatRefused(f"{url}: {error}", status)
            if status not in RETRY_STATUS:
                raise LLMError(f"{url}: {error}")
            return None, retry_after_seconds(reply_headers.get("Retry-After")), error
        try:
            return json.loads(raw), None, ""
        except (ValueError, RecursionError):  # not JSON, not UTF-8
            raise LLMError(f"{url}: reply is not JSON: {raw[:200]!r}") from None

    def _post_once(self, url: str, data: bytes, headers: dict) -> tuple[int, Any, bytes]:
        """POST once within the total deadline; return (status, headers, body).

        A watchdog shuts the socket down when the deadline passes, so neither a slow connect,
        trickled headers nor a trickled body can hold a request longer than `timeout`.
        """
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LLMError(f"{url}: not an http(s) URL")
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        proxy = urllib.request.getproxies().get(parts.scheme)
        if proxy and not urllib.request.proxy_bypass(parts.hostname):
            proxy_parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            # a proxy setting without a host fails in the connection, as it always has
            connection = connection_class(cast(str, proxy_parts.hostname), proxy_parts.port, timeout=self.timeout)
            if parts.scheme == "https":
                connection.set_tunnel(parts.hostname, parts.port)
            else:
                target = url
        else:
            connection = connection_class(parts.hostname, parts.port, timeout=self.timeout)
        deadline = time.monotonic() + self.timeout
        expired = threading.Event()

        def cut_off() -> None:
            expired.set()
            sock = connection.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        watchdog = threading.Timer(self.timeout, cut_off)
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request("POST", target, body=data, headers=headers)
            response = connection.getresponse()
            expected = response.length  # Content-Length, or None (chunked, or until the connection closes)
            chunks, size = [], 0
            while True:
                chunk = response.read(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise LLMError(f"{url}: reply is larger than {self.max_body_bytes:,} bytes")
                chunks.append(chunk)
            if expired.is_set() or time.monotonic() > deadline:
                raise TimeoutError(f"no complete reply within {self.timeout:g} s")
            if expected is not None and size < expected:  # read(amt) does not raise this itself
                raise http.client.IncompleteRead(b"".join(chunks), expected - size)
            return response.status, response.headers, b"".join(chunks)
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise TimeoutError(f"no complete reply within {self.timeout:g} s") from exc
            raise
        finally:
            watchdog.cancel()
            connection.close()


class _Endpoint:
    """What every client of one endpoint in this process shares: a cap on requests at once (`slot`, from
    `$PLAYGROUND_MAX_CONNECTIONS`; no cap without it) and a pause the server asked for with Retry-After."""

    def __init__(self, max_connections: int | None) -> None:
        self.slot: Any = threading.BoundedSemaphore(max_connections) if max_connections else nullcontext()
        self._resume_at = 0.0
        self._lock = threading.Lock()

    def pause(self, seconds: float) -> None:
        """Hold every request to this endpoint for `seconds` from now (a later pause wins)."""
        with self._lock:
            self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    def wait_out_pause(self) -> None:
        """Sleep until the endpoint's pause, if any, is over."""
        while (left := self._resume_at - time.monotonic()) > 0:
            time.sleep(left)


_endpoints: dict[tuple[str, int | None], _Endpoint] = {}
_endpoints_lock = threading.Lock()


def _endpoint(base_url: str) -> _Endpoint:
    """The shared state of the endpoint at `base_url` under this process's connection cap."""
    value = os.environ.get(MAX_CONNECTIONS_VARIABLE, "").strip()
    cap = int(value) if value.isdigit() and int(value) > 0 else None
    key = (base_url.rstrip("/"), cap)
    with _endpoints_lock:
        if key not in _endpoints:
            _endpoints[key] = _Endpoint(cap)
        return _endpoints[key]


_FORMAT_LADDER = (("json_schema", True), ("json_object", True), ("json_object", False), ("prompt", False))


def _response_format(mode: str, with_schema: bool, schema: dict) -> dict | None:
    """The `response_format` of a request in `mode` (None: the prompt alone asks for the object)."""
    if mode == "json_schema":
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "reply"))[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode == "json_object":  # the schema alongside is for servers that decode under its grammar (llama.cpp's)
        return {"type": "json_object", **({"schema": grammar_schema(schema)} if with_schema else {})}
    return None


def refuses_response_format(status: int, raw: bytes) -> bool:
    """Whether an error reply refuses a request's `response_format`: a refusal status, or a body naming it."""
    return status in REFUSAL_STATUS or b"response_format" in raw[:20_000]


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or an HTTP date), at most 60;
    None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
