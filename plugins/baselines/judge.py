"""The model a baseline's model roles use (ACE's reflector and curator, Reflexion's self-reflection, AWM's
induction, ReasoningBank's judge and extractor), named by the same options as Sentry's LLM judges.

`judge_base_url` + `judge_model` name any OpenAI-compatible endpoint; `judge_local=true` the
embedded GGUF model (extra `local`). Without them a baseline uses its rule-based fallback.
The model is made on first use, so checking a run's parameters never loads it. Every role
declares the JSON schema of its reply and asks with `ask_structured` under its own role name
(`ace.reflector`, `ace.curator`, ...); an unusable reply (a failed call, no JSON object, or one
that breaks the schema) is None, and the caller falls back to its rules, never crashes.
"""

from __future__ import annotations

from typing import Any, Mapping

from playground.host_api import ChatModel, ask_structured, build_judge_model


class Judge:
    """The judge model of a baseline's parameters (or none: `configured` is False)."""

    def __init__(self, params: Mapping[str, Any], baseline: str, max_tokens: int = 400) -> None:
        self.base_url = str(params.get("judge_base_url") or "")
        self.model_name = str(params.get("judge_model") or "")
        self.local = bool(params.get("judge_local"))
        self.baseline = baseline
        self.max_tokens = max_tokens
        self._model: ChatModel | None = None

    @property
    def configured(self) -> bool:
        """True when the parameters name a model (an endpoint or the embedded one)."""
        return bool(self.base_url) or self.local

    def model(self) -> ChatModel:
        """The model, made on first use; ValueError when it cannot be made (e.g. the extra is missing)."""
        if self._model is None:
            settings = {"judge_base_url": self.base_url, "judge_model": self.model_name, "judge_local": self.local}
            self._model = build_judge_model(settings, self.baseline, max_tokens=self.max_tokens)
        return self._model

    def ask(self, role: str, system: str, user: str, schema: dict) -> dict | None:
        """Ask the model for `role`'s reply, one object of `schema`; None when there is no model or the reply is
        unusable (a failed call, no JSON object, one that breaks the schema)."""
        if not self.configured:
            return None
        return ask_structured(self.model(), role, system, user, schema, max_tokens=self.max_tokens).value


def string_schema(max_length: int, min_length: int = 0) -> dict:
    """The schema of a bounded string (bounded, so a small model's reply under a grammar ends in time)."""
    return {"type": "string", "maxLength": max_length, **({"minLength": min_length} if min_length else {})}


def object_schema(properties: dict[str, dict], optional: tuple[str, ...] = ()) -> dict:
    """The schema of an object with these properties, all required but the `optional` ones, and no others."""
    return {"type": "object", "properties": properties,
            "required": [name for name in properties if name not in optional], "additionalProperties": False}


def array_schema(items: dict, max_items: int, min_items: int = 0) -> dict:
    """The schema of an array of at most `max_items` `items`."""
    return {"type": "array", "items": items, "maxItems": max_items, **({"minItems": min_items} if min_items else {})}
