"""Counting the model calls made for a plugin's roles apart from the agent's.

A plugin's model roles (judges, reflectors, curators, summarisers) ask through
`playground.agents.structured.ask_structured`; their calls are not the agent's: while a runner plays an episode
inside `judge_calls_reported(emit)`, each such call is reported as a `judge_call` event with its role, token counts,
whether its reply was usable and its mode, so the episode's record counts them apart from the agent's tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from playground.agents.chat import Completion
from playground.core.events import Event, JudgeCallEvent

_judge_listener: ContextVar[Callable[[JudgeCallEvent], None] | None] = ContextVar("judge_listener", default=None)


def report_judge_call(completion: Completion, *, role: str = "unknown", usable: bool = True,
                      mode: str = "", reply: Any = None) -> None:
    """Count a model call made for a plugin's role (not the agent's) in the episode being played, if any:
    its role, tokens, whether its reply was usable and how it was constrained (`mode`, else the completion's),
    a failure-injection instrument's grade of the reply (`Completion.graded`) where there is one, and the parsed
    reply (`reply`, kept in the event's `extra` so a run can tell constant or echoing judges apart)."""
    listener = _judge_listener.get()
    if listener is not None:
        listener(JudgeCallEvent(role=role, prompt_tokens=completion.prompt_tokens,
                                completion_tokens=completion.completion_tokens, usable=bool(usable),
                                mode=mode or completion.mode or "prompt",
                                graded=dict(completion.graded) if completion.graded is not None else None,
                                extra={"reply": reply} if reply is not None else {}))


@contextmanager
def judge_calls_reported(emit: Callable[[Event], Any]) -> Iterator[None]:
    """While the block runs, report each judge call made in it (`ask_structured`, `report_judge_call`) to `emit`
    as a `JudgeCallEvent` with its `role`, `prompt_tokens`, `completion_tokens`, `usable` and `mode`."""
    token = _judge_listener.set(emit)
    try:
        yield
    finally:
        _judge_listener.reset(token)
