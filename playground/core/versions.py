"""The format version a JSON file of a run names, read the one way every versioned format reads it (traces, episode
records, summaries), and a versioned model read from JSON: upgraded step by step, then validated."""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from pydantic import BaseModel, ValidationError

_Model = TypeVar("_Model", bound=BaseModel)


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


def described(error: ValidationError) -> str:
    """The first problem pydantic found, as one line naming the field and the value: "no 'key'", or
    "'won': input should be a valid boolean, got 'yes'"."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "value"
    if first["type"] == "missing":
        return f"no {where!r}"
    message = first["msg"]
    return f"{where!r}: {message[0].lower() + message[1:]}, got {first.get('input')!r:.60}"


def read_versioned(data: Any, model: type[_Model], key: str, current: int,
                   upgrades: Mapping[int, Callable[[Mapping[str, Any]], dict[str, Any]]], what: str,
                   error: type[Exception], label: str = "") -> _Model:
    """`data` (a JSON value) as `model`: the version it names under `key` upgraded step by step (`upgrades`: version ->
    the next) to `current`, then validated; `error` says what is wrong (after `label`, where one is given). An
    instance of `model` is taken as it is."""
    if isinstance(data, model):
        return data
    prefix = f"{label}: " if label else ""
    if not isinstance(data, dict):
        raise error(f"{prefix}expected a JSON object, got {type(data).__name__}")
    for old in range(named_version(data, key, current, what, error), current):
        data = upgrades[old](data)
    try:
        return model.model_validate(data)
    except ValidationError as problem:
        raise error(prefix + described(problem)) from None
