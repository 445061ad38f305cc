"""The errors a user can cause, and how an unexpected exception is written into a record."""

from __future__ import annotations

import traceback


class PlaygroundError(Exception):
    """Base of every error a user can cause (bad input, config, data or plugin).

    The CLI prints it as one line and exits with code 2; anything else is a bug and is
    not swallowed.
    """


class MissingExtra(PlaygroundError, ImportError):
    """An optional extra or external engine that a chosen env, agent or plugin needs is not installed; the message
    says what to install. (An ImportError too, so code that tolerates a missing module still catches it.)"""


def format_exception(exc: BaseException) -> str:
    """Return `Type: message` plus the last traceback line (` (at FILE:LINE)`, where it was raised), for error
    records."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def traceback_text(exc: BaseException | None) -> str | None:
    """The whole traceback of `exc` as Python prints it (`Traceback (most recent call last):`, each frame's file and
    line, then `Type: message`), or None for an error made but never raised (it has no traceback)."""
    if exc is None or exc.__traceback__ is None:
        return None
    return "".join(traceback.format_exception(exc))
