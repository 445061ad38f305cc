"""A client for any OpenAI-compatible chat endpoint over HTTP (`HTTPChatModel`).

It retries with exponential backoff on 429, 5xx, connection errors and bodies cut off mid-way, honours
`Retry-After` (seconds or an HTTP date, at most 60 s; it pauses every request to the endpoint), keeps the requests in
flight to each endpoint under an adaptive limit (AIMD, cut on 429 and 503, never above `--max-connections`:
`playground.agents.endpoint_limits`), gives every request a total deadline of `timeout` seconds
(connect, headers and body together: a server trickling bytes is cut off), refuses bodies over `max_body_bytes`,
keeps at most `max_reply_chars` of a reply (what was cut is marked), raises LLMError for a reply of the wrong shape,
and can keep an on-disk cache of responses keyed by the full request (useful for reruns and tests of prompts).
With a JSON schema it sends `response_format` (`json_schema`, falling back once per client to `json_object` and
then to the prompt alone where the server refuses it).
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from typing import Any, ClassVar, cast

from playground.agents.chat import Completion, LLMError, cache_entry, from_cache_entry, grammar_schema, parse_completion
from playground.agents.endpoint_limits import (  # noqa: F401 - the CLI and tests read the first two from here
    MAX_CONNECTIONS_VARIABLE,
    MAX_RETRY_AFTER_S,
    EndpointLimiter,
    endpoint_limiter,
    retry_after_seconds,
)
from playground.agents.response_cache import cache_for, is_deterministic

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
BUSY_RETRIES = 50  # at most this many retries of one request for congestion (see `_post_with_retries`)
# Statuses with which a server refuses a `response_format` it does not support (an error body naming
# `response_format` counts too, whatever its status); the client then tries the next, plainer one.
REFUSAL_STATUS = {400, 404, 415, 422, 501}
REPLY_FORMATS = ("json_schema", "json_object", "prompt")  # an HTTP client's structured-reply modes, strictest first


class EndpointUnreachable(LLMError):
    """The endpoint could not be reached, and an earlier request could not reach it on any of its tries either: the
    request gave up after one try (`EndpointLimiter.unreachable`)."""


# An error that says no connection was made at all (not one cut off or timed out after it was made).
UNREACHABLE_ERRNOS = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL})


def _unreachable(exc: BaseException) -> bool:
    """Whether a request's error says the endpoint could not be reached: refused, no route, a name not resolved."""
    return (isinstance(exc, (ConnectionRefusedError, socket.gaierror))
            or getattr(exc, "errno", None) in UNREACHABLE_ERRNOS)


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

    @property
    def limiter(self) -> EndpointLimiter:
        """The limit on requests in flight (and the Retry-After pause) this client shares with every client of its
        endpoint in this process (`playground.agents.endpoint_limits`); `limiter.limit` is the limit now."""
        return endpoint_limiter(self.base_url)

    def _post_with_retries(self, body: dict, refusable: bool = False) -> dict:
        """POST `body` until a reply comes: at most `retries` more attempts after the first, each failure waiting the
        server's Retry-After (which pauses the whole endpoint) or `backoff` x 2^attempt seconds. A 429 or 503 that
        came while other requests of this process were in flight is congestion (the endpoint's limit was cut): it
        is retried after the same wait without spending an attempt, at most BUSY_RETRIES times.

        A request that could not reach the endpoint on any try marks it unreachable (`EndpointLimiter.unreachable`);
        while it is marked, a request that cannot reach it either gives up after its first try (EndpointUnreachable)."""
        limiter = self.limiter
        last_error = ""
        attempt = busy = 0
        never_reached = True
        while True:
            ticket = limiter.acquire()
            status: int | None = None
            unreachable = False
            try:
                outcome, wait, last_error, status, unreachable = self._attempt(body, refusable)
            finally:
                congested = limiter.release(ticket, status)
            if outcome is not None:
                return outcome
            never_reached = never_reached and unreachable
            if never_reached and limiter.unreachable is not None:
                raise EndpointUnreachable(f"{self.base_url.rstrip('/')}/chat/completions: unreachable ({last_error}); "
                                          "an earlier request could not reach it on any of its tries, so this one "
                                          "is not retried until the endpoint answers")
            if congested and busy < BUSY_RETRIES:
                busy += 1
                spent = False
            elif attempt < self.retries:
                spent = True
            else:
                break
            if wait is not None:  # the server asked every client to wait: the whole endpoint pauses
                limiter.pause(wait)
                limiter.wait_out_pause()
            else:
                limiter.sleep(self.backoff * (2 ** attempt))
            attempt += spent
        busy_note = f" (and {busy} retries for congestion)" if busy else ""
        if never_reached:
            limiter.mark_unreachable(last_error)
        raise LLMError(f"{self.base_url.rstrip('/')}/chat/completions: gave up after {self.retries + 1} attempts"
                       f"{busy_note}; last error: {last_error}")

    def _attempt(self, body: dict, refusable: bool) -> tuple[dict | None, float | None, str, int | None, bool]:
        """One POST: (the reply, None, "", status, False) or (None, seconds the server asked to wait or None, the
        error, the HTTP status or None when no reply came, whether the endpoint could not be reached at all)."""
        url = self.base_url.rstrip("/") + "/chat/completions"
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            status, reply_headers, raw = self._post_once(url, data, headers)
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, cut off mid-body
            return None, None, f"{type(exc).__name__}: {exc}", None, _unreachable(exc)
        if status >= 400:
            error = f"HTTP {status}: {raw[:300].decode('utf-8', 'replace')}"
            if refusable and refuses_response_format(status, raw):
                raise ResponseFormatRefused(f"{url}: {error}", status)
            if status not in RETRY_STATUS:
                raise LLMError(f"{url}: {error}")
            return None, retry_after_seconds(reply_headers.get("Retry-After")), error, status, False
        try:
            return json.loads(raw), None, "", status, False
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


def endpoint_answers(base_url: str, model: str, api_key: str | None = None, timeout: float = 30.0) -> None:
    """Ask the endpoint for one token (no response cache, one retry): whether it answers for `model` now, before a
    long job that would find out call by call. LLMError naming the endpoint when it cannot be reached or refuses."""
    HTTPChatModel(base_url, model, api_key, retries=1, timeout=timeout).complete(
        [{"role": "user", "content": "Reply with OK."}], max_tokens=1)
