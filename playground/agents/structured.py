"""Structured replies: how a plugin's model roles ask a model for one small JSON object of a declared schema.

Every model role (a plugin's detectors, need checks, verifiers, summarisers, diagnosers,
reflectors, curators and judges) declares a JSON schema for its
reply and asks with `ask_structured`. The model is asked as strictly as it allows
(`StructuredReply.mode`):

- `grammar`: the embedded model (`LocalChatModel`) decodes under a grammar compiled from the
  schema, so it can only write an object of the schema's shape (or one cut short by `max_tokens`);
- `json_schema`: an HTTP endpoint is sent `response_format` `json_schema` (strict);
- `json_object`: an endpoint that refuses that is sent `json_object` (with the schema alongside,
  which llama.cpp's server constrains its decoding with), once per client;
- `prompt`: an endpoint that refuses both gets the prompt alone.

The schema is stated compactly in the system prompt in every mode. The reply is parsed (the
whole text, else the first JSON object in it, e.g. inside prose or a code fence) and validated
with `jsonschema`; a failed call, a reply with no JSON object and one that breaks the schema all
give an unusable reply (`value` None) saying why, never an exception. Each call is reported as a
judge call (`report_judge_call`) with its role, usability and mode, so a run counts usable replies
per role (`judge_replies` in the episode records and the summary).

While a runner plays an episode it shares the agent's model (`agent_model_shared`), so a role with
no judge model of its own can use it (`shared_agent_model()`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import jsonschema

from playground.agents.chat import ChatModel, Completion, LLMError
from playground.agents.judge_calls import report_judge_call

CALL_FAILED = "the call failed"
NO_JSON = "no JSON object in the reply"
BREAKS_SCHEMA = "the reply breaks the schema"
MODES = ("grammar", "json_schema", "json_object", "prompt")
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class StructuredReply:
    """What a role's model call gave: the validated object (None when unusable), the reply's text, why it is
    unusable (`error`: a failed call, no JSON object, or the schema violation), how the reply was constrained, and
    the call's tokens."""

    role: str
    value: dict | None
    text: str = ""
    error: str | None = None
    mode: str = "prompt"
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def usable(self) -> bool:
        """True when the reply is an object of the role's schema."""
        return self.value is not None

    @property
    def problem(self) -> str | None:
        """Why the reply is unusable, as a kind: "call_failed", "no_json" or "schema" (None when usable)."""
        if self.error is None:
            return None
        if self.error.startswith(CALL_FAILED):
            return "call_failed"
        return "schema" if self.error.startswith(BREAKS_SCHEMA) else "no_json"


def ask_structured(model: ChatModel, role: str, system: str, user: str, schema: dict, *,
                   max_tokens: int = 200, described: dict | None = None) -> StructuredReply:
    """Ask `model` (a system and a user message) for one JSON object of `schema` for `role`; never raises for a
    model failure. The call is reported as a judge call with its role, usability and mode. `described`: the schema
    the prompt states, where it differs from the one the reply is decoded and checked under (a reply form that
    lets a decision end early, stated to the model as before, so its decisions are the ones it made before)."""
    if "title" not in schema:
        schema = {"title": role, **schema}  # names the schema in a json_schema request
    messages = [{"role": "system", "content": f"{system}\n{schema_prompt(described or schema)}"},
                {"role": "user", "content": user}]
    try:
        completion = model.complete(messages, json_schema=schema, max_tokens=max_tokens)
    except LLMError as exc:
        mode = str(getattr(model, "reply_format", "") or "prompt")
        report_judge_call(Completion(""), role=role, usable=False, mode=mode)
        return StructuredReply(role, None, "", f"{CALL_FAILED}: {exc}"[:2000], mode)
    mode = completion.mode or "prompt"
    value, error = parse_structured(completion.text, schema)
    report_judge_call(completion, role=role, usable=value is not None, mode=mode, reply=value)
    return StructuredReply(role, value, completion.text, error, mode, completion.prompt_tokens,
                           completion.completion_tokens)


def parse_structured(text: str, schema: dict) -> tuple[dict | None, str | None]:
    """(the reply's object, None) when it holds one valid under `schema`; else (None, why not)."""
    value = json_object_in(text)
    if value is None:
        return None, NO_JSON
    violation = schema_violation(value, schema)
    if violation is not None:
        return None, f"{BREAKS_SCHEMA}: {violation}"
    return value, None


def json_object_in(text: str) -> dict | None:
    """The JSON object a reply holds: the whole text, else the first object that parses from one of its first 50
    `{` (in prose or a code fence); None when there is none (or it nests too deeply to parse). Control
    characters inside strings are accepted."""
    decoder = json.JSONDecoder(strict=False)
    stripped = text.strip()
    try:
        value = decoder.decode(stripped)
    except (ValueError, RecursionError):
        value = None
    start, tries = stripped.find("{"), 0
    while not isinstance(value, dict) and start != -1 and tries < 50:
        try:
            value, _ = decoder.raw_decode(stripped, start)
        except (ValueError, RecursionError):
            value = None
        start, tries = stripped.find("{", start + 1), tries + 1
    return value if isinstance(value, dict) else None


_validators: dict[str, Any] = {}


def schema_violation(value: Any, schema: dict) -> str | None:
    """The first line of jsonschema's message for the most relevant error of `value` under `schema` (with where
    it is), or None when it is valid."""
    key = json.dumps(schema, sort_keys=True)
    validator = _validators.get(key)
    if validator is None:
        validator = _validators[key] = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    message = (error.message.splitlines() or [""])[0]
    return (f"at {where}: {message}" if where else message)[:MAX_ERROR_CHARS]


def schema_prompt(schema: dict) -> str:
    """The schema stated compactly for a prompt: 'Answer with one JSON object only, of this form: {...}'."""
    return f"Answer with one JSON object only, of this form: {describe_schema(schema)}"


def describe_schema(schema: Any) -> str:
    """A compact, readable form of a (small) JSON schema: keys with their types, enums, bounds and lengths."""
    if not isinstance(schema, dict):
        return "any value"
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " or ".join(describe_schema(s) for s in schema[union])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(describe_schema({**schema, "type": k}) for k in kind)
    if kind == "object" or "properties" in schema:
        required = set(schema.get("required") or ())
        parts = [f"{json.dumps(name)}: {describe_schema(sub)}" + ("" if name in required else " (optional)")
                 for name, sub in (schema.get("properties") or {}).items()]
        return "{" + ", ".join(parts) + "}"
    if kind == "array":
        low, high = schema.get("minItems"), schema.get("maxItems")
        bound = (f" ({low} to {high} items)" if low and high is not None else
                 f" (at most {high} items)" if high is not None else f" (at least {low} items)" if low else "")
        return f"[{describe_schema(schema.get('items', {}))}, ...]{bound}"
    if kind == "boolean":
        return "true|false"
    if kind == "null":
        return "null"
    if kind in ("number", "integer"):
        low, high = schema.get("minimum"), schema.get("maximum")
        noun = "a number" if kind == "number" else "an integer"
        return noun + (f" {low}..{high}" if low is not None and high is not None else
                       f" >= {low}" if low is not None else f" <= {high}" if high is not None else "")
    if kind == "string":
        high = schema.get("maxLength")
        return "a string" + (f" of at most {high} characters" if high is not None else "")
    return "any value"


# -- the agent's model, shared with the roles ------------------------------------------------------------------

_shared_agent_model: ContextVar[ChatModel | None] = ContextVar("shared_agent_model", default=None)


@contextmanager
def agent_model_shared(model: Any) -> Iterator[None]:
    """While the block runs, `shared_agent_model()` is `model` (only an object with a `complete` method counts:
    anything else shares no model)."""
    shared = model if callable(getattr(model, "complete", None)) else None
    token = _shared_agent_model.set(shared)
    try:
        yield
    finally:
        _shared_agent_model.reset(token)


def shared_agent_model() -> ChatModel | None:
    """The model of the agent playing the current episode (see `agent_model_shared`), or None."""
    return _shared_agent_model.get()
