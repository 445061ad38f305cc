"""Text from runs made safe for a terminal: control characters shown, never obeyed.

Observations, task ids, model replies and lessons come from envs, models and files a user did not write; an ESC
sequence among them could retitle the window, clear the screen or plant a hyperlink to an outside address when
printed raw. `visible` writes every control character except newline and tab as a visible escape (`\\x1b`), and
`visible_data` does so for every string in a JSON-like value; the CLI applies them to what it prints from runs.
"""

from __future__ import annotations

import re
from typing import Any

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")  # a lone surrogate no stream could encode


def visible(text: str) -> str:
    """`text` with each control character (but newline and tab) written as a visible `\\xNN` escape, and each lone
    surrogate (an undecodable byte of a path, say) as `\\udcNN`."""
    return CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}" if ord(match.group()) < 0x100
                       else f"\\u{ord(match.group()):04x}", text)


def visible_data(value: Any) -> Any:
    """`value` (dicts, lists, tuples, strings, numbers) with `visible` applied to every string in it, keys too."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible_data(key): visible_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(visible_data(item) for item in value)
    return value
