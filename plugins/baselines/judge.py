"""The model a baseline's model roles use (ACE's reflector and curator, Reflexion's self-reflection, AWM's
induction, ReasoningBank's judge and extractor), named by the same options as Sentry's LLM judges.

`judge_base_url` + `judge_model` name any OpenAI-compatible endpoint; `judge_local=true` the
embedded GGUF model (extra `local`). Without them a baseline uses its rule-based fallback.
The model is made on first use, so checking a run's parameters never loads it. Every role
asks for one small JSON object; a reply that does not parse is None, and the caller falls
back to its rules, never crashes.
"""

from __future__ import annotations

from typing import Any, Mapping

from playground.agents.client import ChatModel, HTTPChatModel, LLMError, LocalChatModel, ask_json


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
            if self.base_url:
                self._model = HTTPChatModel(self.base_url, self.model_name, temperature=0.0,
                                            max_tokens=self.max_tokens, retries=3)
            elif self.local:
                try:
                    self._model = LocalChatModel(max_tokens=self.max_tokens)
                except LLMError as exc:
                    raise ValueError(f"{self.baseline}: {exc}") from None
            else:
                raise ValueError(f"{self.baseline}: no judge model: --param judge_base_url=URL "
                                 "--param judge_model=NAME, or --param judge_local=true")
        return self._model

    def ask_json(self, system: str, user: str) -> dict | None:
        """Ask the model; return the first JSON object of its reply, or None (no model, a failed call, no JSON)."""
        return ask_json(self.model(), system, user) if self.configured else None
