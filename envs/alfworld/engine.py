"""Lazy access to the `alfworld` package, without its import-time side effects leaking out.

Importing `alfworld` sets `os.environ["ALFWORLD_DATA"]` to its download folder when the
variable is unset. Playground reads that variable to decide whether the user pointed it
at the official data, so every import of alfworld goes through `alfworld_module()`,
which puts the variable back the way it was. The global `random` that alfworld and
textworld use is isolated per env with `IsolatedRandom`.
"""

from __future__ import annotations

import importlib
import os
import random
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from playground.core.errors import MissingExtra

INSTALL_HINT = "the alfworld env needs the `alfworld` package: pip install 'playground[alfworld]'"


def alfworld_module(name: str) -> ModuleType:
    """Import and return `alfworld.<name>` (or `alfworld` for ""), leaving ALFWORLD_DATA untouched."""
    before = os.environ.get("ALFWORLD_DATA")
    try:
        return importlib.import_module(f"alfworld.{name}" if name else "alfworld")
    except ImportError as exc:
        raise MissingExtra(f"{INSTALL_HINT} ({exc})") from None
    finally:
        if before is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = before


def domain_and_grammar() -> tuple[str, str]:
    """Return the text of the PDDL domain (`alfred.pddl`) and grammar (`alfred.twl2`) alfworld ships."""
    info = alfworld_module("info")
    return Path(info.ALFRED_PDDL_PATH).read_text(), Path(info.ALFRED_TWL2_PATH).read_text()


class IsolatedRandom:
    """A private state for the global `random` module, swapped in around engine calls.

    alfworld and textworld draw from the global `random` (goal templates, grammar
    alternatives). Seeding a private state and swapping it in for each engine call keeps
    an env reproducible no matter what else in the process uses `random`.
    """

    def __init__(self, seed: Any = 0) -> None:
        self._state = random.Random(seed).getstate()

    def seed(self, seed: Any) -> None:
        """Reset the private state from `seed`."""
        self._state = random.Random(seed).getstate()

    @contextmanager
    def active(self) -> Iterator[None]:
        """Run the block with the private state in the global `random`; restore the outer state after."""
        outer = random.getstate()
        random.setstate(self._state)
        try:
            yield
        finally:
            self._state = random.getstate()
            random.setstate(outer)
