"""The one builder of judge models: the model a plugin's model roles (detectors, verifiers, reflectors,
diagnosers) ask, named by one declared setting (`JudgeSettings`): an OpenAI-compatible endpoint
(`judge_base_url` + `judge_model`), the embedded GGUF model (`judge_local`), or, when neither is named, the
agent's own model where the runner shares it (`judge_or_shared`).

A plugin's parameter model inherits `JudgeSettings`, so every plugin names its judge the same way and a run
checks the setting before anything is played; the plugin calls `build_judge_model` or `judge_or_shared` with
its parameters instead of building a client itself.
"""

from __future__ import annotations

from typing import Any, Mapping

from playground.agents.chat import ChatModel, LLMError
from playground.agents.response_cache import default_cache_dir
from playground.agents.structured import shared_agent_model
from playground.core.services import JudgeSettings as JudgeSettings  # re-exported: the setting this builder reads


def judge_named(settings: Mapping[str, Any]) -> bool:
    """Whether the settings name a judge model (an endpoint or the embedded one)."""
    return bool(settings.get("judge_base_url")) or bool(settings.get("judge_local"))


def build_judge_model(settings: Mapping[str, Any], owner: str, *, max_tokens: int = 200, retries: int = 3,
                      threads: int | None = None, api_key: str | None = None) -> ChatModel:
    """The judge model the settings name: the endpoint (temperature 0, `retries` retries, `api_key` if given) or
    the embedded model (`threads` CPU threads, else those `threads_by_contention` picks), both with the shared
    response cache.

    ValueError, naming `owner` (the plugin or role asking), when the settings name none, name an endpoint
    without a model, or the embedded model cannot be loaded (e.g. its extra is missing).
    """
    if settings.get("judge_base_url"):
        if not settings.get("judge_model"):
            raise ValueError(f"{owner}: judge_base_url needs judge_model too (--param judge_model=NAME)")
        from playground.agents.http_model import HTTPChatModel

        return HTTPChatModel(str(settings["judge_base_url"]), str(settings["judge_model"]), api_key, temperature=0.0,
                             max_tokens=max_tokens, retries=retries, cache_dir=default_cache_dir())
    if settings.get("judge_local"):
        from playground.agents.local_model import LocalChatModel
        from playground.processes import threads_by_contention

        try:
            threads = threads_by_contention()[0] if threads is None else threads
            return LocalChatModel(max_tokens=max_tokens, threads=threads, cache_dir=default_cache_dir())
        except LLMError as exc:
            raise ValueError(f"{owner}: {exc}") from None
    raise ValueError(f"{owner}: no judge model: --param judge_base_url=URL --param judge_model=NAME, "
                     "or --param judge_local=true")


def judge_or_shared(settings: Mapping[str, Any], owner: str, *, max_tokens: int = 200,
                    retries: int = 3) -> ChatModel | None:
    """The judge model the settings name (`build_judge_model`), else the agent's own model where the runner
    shares it (`shared_agent_model`), else None."""
    if judge_named(settings):
        return build_judge_model(settings, owner, max_tokens=max_tokens, retries=retries)
    return shared_agent_model()
