"""The response cache: replies to deterministic model requests, kept on disk by the request's full content.

A request is deterministic when it asks for temperature 0 or gives a seed; its reply is then the model's reply
to that exact content, so every harness, run and process on the machine can share it. In a sweep, harnesses that
send the same requests until their first intervention pay for those calls once, and a rerun of a finished sweep
makes no model call at all. Both model clients use it: the HTTP client keys a request by endpoint URL and body,
the embedded model by its weights' SHA-256 and llama.cpp's version with the request.

The folder is `$PLAYGROUND_CACHE/responses` unless `$PLAYGROUND_RESPONSE_CACHE` names another one; set that
variable to `off` (or pass `playground run --no-response-cache`) to turn the cache off. Entries are one small
JSON file each, written atomically; a damaged entry is a miss, never an error. While a runner plays an episode
inside `cache_use_counted()`, each lookup counts as a hit or a miss for the episode's record.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError

RESPONSE_CACHE_VARIABLE = "PLAYGROUND_RESPONSE_CACHE"
OFF_WORDS = {"off", "0", "false", "no", "none"}
# The file a response cache writes at its top: `clear_cache` deletes entries only in a folder that holds it (or, for
# a cache written before the marker, whose every file is named as an entry is: `XX/XX<62 hex>.json`).
CACHE_MARKER = ".playground-response-cache"
_ENTRY_NAME = re.compile(r"([0-9a-f]{2})[0-9a-f]{62}\.json(\.\d+\.\d+\.tmp)?")


class NotACacheError(PlaygroundError):
    """A folder given as a response cache that is not one: clearing it would delete files the cache never wrote."""


def default_cache_dir() -> Path | None:
    """The folder of the shared response cache, or None when `$PLAYGROUND_RESPONSE_CACHE` turns it off."""
    from playground.core.task_sets import cache_root

    value = os.environ.get(RESPONSE_CACHE_VARIABLE, "").strip()
    if value.lower() in OFF_WORDS:
        return None
    return Path(value).expanduser() if value else cache_root() / "responses"


def is_deterministic(temperature: float | None, seed: int | None) -> bool:
    """Whether a request's reply is fixed by its content: temperature 0, or a seed given."""
    return seed is not None or not temperature


class ResponseCache:
    """Replies kept in `folder`, one JSON file per request key (see module docstring)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        """The key of a request: the SHA-256 of its canonical JSON."""
        return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()

    def _path(self, request: dict[str, Any]) -> Path:
        key = self.key(request)
        return self.folder / key[:2] / f"{key}.json"

    def get(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The reply stored for `request` (counted as a hit or a miss), or None."""
        try:
            reply = json.loads(_read_regular(self._path(request)))
        except (OSError, ValueError):
            reply = None  # absent, unreadable, damaged or no regular file (a FIFO would block): a miss
        if not isinstance(reply, dict) or not isinstance(reply.get("text"), str):
            reply = None  # not of an entry's shape (`chat.cache_entry`): the request is sent, so a miss
        count_cache_use(reply is not None)
        return reply

    def put(self, request: dict[str, Any], reply: dict[str, Any]) -> None:
        """Store `reply` for `request`; a cache that cannot be written is skipped, never an error."""
        path = self._path(request)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not (self.folder / CACHE_MARKER).exists():
                (self.folder / CACHE_MARKER).write_text("a playground response cache (`playground cache`)\n")
            tmp.write_text(json.dumps(reply))
            os.replace(tmp, path)
        except OSError:
            with suppress(OSError):
                tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class CacheContents:
    """What a response cache folder holds: its entries, their total bytes, and the oldest and newest entry's
    modification time (seconds since the epoch; None when empty)."""

    folder: Path
    entries: int
    bytes: int
    oldest: float | None
    newest: float | None


def cache_entries(folder: str | os.PathLike) -> list[Path]:
    """The entry files of a response cache folder (`XX/KEY.json`), none when it does not exist."""
    return sorted(Path(folder).glob("[0-9a-f][0-9a-f]/*.json"))


def cache_contents(folder: str | os.PathLike) -> CacheContents:
    """Count what the response cache in `folder` holds."""
    stats = [path.stat() for path in cache_entries(folder)]
    times = [stat.st_mtime for stat in stats]
    return CacheContents(Path(folder), len(stats), sum(stat.st_size for stat in stats),
                         min(times, default=None), max(times, default=None))


def clear_cache(folder: str | os.PathLike, older_than: float | None = None, now: float | None = None) -> int:
    """Delete the response cache's entries in `folder` (only those not written for `older_than` seconds, when
    given), and the subfolders left empty; return how many entries went. Nothing but entry files is touched, and
    only in a response cache (`check_cache_folder`)."""
    check_cache_folder(folder)
    cutoff = None if older_than is None else (time.time() if now is None else now) - older_than
    removed = 0
    for path in cache_entries(folder):
        with suppress(OSError):
            if cutoff is None or path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
    for sub in Path(folder).glob("[0-9a-f][0-9a-f]"):
        with suppress(OSError):
            sub.rmdir()  # only when empty
    return removed


def check_cache_folder(folder: str | os.PathLike) -> None:
    """NotACacheError unless `folder` is a response cache: it holds CACHE_MARKER, or (a cache from before the marker)
    every file in its `XX/` subfolders is named as an entry; a folder that does not exist holds nothing to clear."""
    folder = Path(folder)
    if not folder.is_dir() or (folder / CACHE_MARKER).is_file():
        return
    foreign = [path for sub in folder.glob("[0-9a-f][0-9a-f]") for path in (sub.iterdir() if sub.is_dir() else [sub])
               if not ((match := _ENTRY_NAME.fullmatch(path.name)) and match.group(1) == sub.name)]
    if foreign:
        raise NotACacheError(f"{str(folder)!r} is not a response cache: it has no {CACHE_MARKER} file and holds files "
                             f"the cache never writes ({str(foreign[0].relative_to(folder))!r}); nothing was deleted. "
                             f"If it is a cache, mark it: touch {str(folder / CACHE_MARKER)!r}")


def _read_regular(path: Path) -> str:
    """The text of `path` when it is a regular file; OSError otherwise. Opened without blocking, so a FIFO or a
    device planted as an entry is refused at once instead of waiting for a writer no deadline can interrupt."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a regular file")
        return handle.read().decode("utf-8")


def cache_for(cache_dir: str | os.PathLike | None) -> ResponseCache | None:
    """A `ResponseCache` in `cache_dir`, or None for no folder."""
    return ResponseCache(cache_dir) if cache_dir else None


_use: ContextVar[Counter[str] | None] = ContextVar("response_cache_use", default=None)


def count_cache_use(hit: bool) -> None:
    """Count one cache lookup in the episode being played, if any."""
    counts = _use.get()
    if counts is not None:
        counts["hits" if hit else "misses"] += 1


@contextmanager
def cache_use_counted() -> Iterator[Counter[str]]:
    """While the block runs, count the response-cache lookups made in it (`hits`, `misses`) in the yielded Counter."""
    counts: Counter[str] = Counter()
    token = _use.set(counts)
    try:
        yield counts
    finally:
        _use.reset(token)


_file_hashes: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> SHA-256, once per process


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes (a model's weights, a data file), read once per process per file version."""
    path = Path(path)
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _file_hashes:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _file_hashes[key] = digest.hexdigest()
    return _file_hashes[key]
