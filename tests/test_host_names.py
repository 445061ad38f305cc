"""`playground/` is the host only: no method and no env is named in its code."""

from __future__ import annotations

import re
from pathlib import Path

PLAYGROUND = Path(__file__).resolve().parents[1] / "playground"
NAMES = re.compile(r"sentry|darc|dart|\baed\b|\bace\b|reflexion|\bawm\b|reasoningbank|textworld|alfworld|webshop|appworld|"
                   r"finance|scienceworld", re.IGNORECASE)


def test_no_method_or_env_is_named_in_the_host():
    found = [f"{path.relative_to(PLAYGROUND.parent)}:{number}: {line.strip()}"
             for path in sorted(PLAYGROUND.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if NAMES.search(line)]
    assert not found, "method or env names in playground/:\n" + "\n".join(found)
