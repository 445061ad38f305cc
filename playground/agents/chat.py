"""The model-call vocabulary every client shares: the `ChatModel` protocol, its `Completion`, `LLMError`,
reading a reply in the OpenAI format, the response cache's entries, and a JSON schema as a grammar should see it.

Both clients (`http_model.HTTPChatModel` over HTTP, `local_model.LocalChatModel` in-process) return a `Completion`
(text plus token counts) from a list of chat messages, so the LLM agent and the LLM-backed plugins work with either.
`complete(..., json_schema=SCHEMA)` asks for a reply that is one JSON object of that schema: the local model
constrains its decoding with a grammar compiled from the schema; the HTTP client sends `response_format`.
`Completion.mode` says which constraint was used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from playground.core.errors import PlaygroundError


class LLMError(PlaygroundError):
    """A model call failed for good (after retries) or returned something unusable."""


@dataclass(frozen=True)
class Completion:
    """A model's reply and what it cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    mode: str = ""  # how a reply with a JSON schema was constrained: grammar, json_schema, json_object, prompt
    # a failure-injection instrument's grade of this reply against its truth (`playground.agents.instrument_judge`):
    # reported with the judge call into the trace, never handed to the role that asked
    graded: Any = field(default=None, compare=False)


class ChatModel(Protocol):
    """What agents and plugins need from a model."""

    def complete(self, messages: list[dict], *, choices: list[str] | None = None,
                 max_tokens: int | None = None, json_schema: dict | None = None,
                 stop: list[str] | None = None) -> Completion:
        """Return the reply to `messages`; `choices`, if the model supports it, constrains the reply to one of them;
        `json_schema` asks for one JSON object of that schema, as strictly as the model supports (`Completion.mode`);
        `stop` ends the reply before the first of these strings."""


def parse_completion(payload: Any, where: str, max_chars: int | None = None) -> Completion:
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


def cache_entry(completion: Completion) -> dict[str, Any]:
    """What the response cache keeps of a completion."""
    return {"text": completion.text, "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens}


def from_cache_entry(entry: dict[str, Any] | None, mode: str) -> Completion | None:
    """The completion a response-cache entry holds, marked cached and with `mode`; None for no entry or one of
    another shape (a miss)."""
    if entry is None or not isinstance(entry.get("text"), str):
        return None
    return Completion(entry["text"], _count(entry.get("prompt_tokens")), _count(entry.get("completion_tokens")),
                      cached=True, mode=mode)


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
