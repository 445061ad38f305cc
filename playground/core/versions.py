"""The format version a JSON file of a run names, read the one way every versioned format reads it (traces, episode
records, summaries)."""

from __future__ import annotations

from typing import Any, Mapping


def named_version(data: Mapping[str, Any], key: str, current: int, what: str, error: type[Exception]) -> int:
    """The version `data` names under `key` (1 without one: written before the format had versions); `error` for a
    value that is no version number, or a version newer than `current`, the one this playground writes (`what`
    names the format in the message)."""
    version = data.get(key, 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise error(f"{key} {version!r} is not a version number")
    if version > current:
        raise error(f"{what} format version {version} is newer than this playground reads (up to {current}); "
                    "upgrade playground to read it")
    return version
