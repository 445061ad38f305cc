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
    """Return `Type: message` plus the last traceback line, for error records."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"
