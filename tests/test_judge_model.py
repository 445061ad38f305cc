"""The one judge-model builder (`playground.agents.judge_model`): what the settings name, the errors naming who
asked, the agent's shared model as the fallback, and no plugin or env building a model client itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from playground.agents.http_model import HTTPChatModel
from playground.agents.judge_model import JudgeSettings, build_judge_model, judge_named, judge_or_shared
from playground.agents.structured import agent_model_shared
from playground.testing.openai_server import ScriptedChatServer

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = {"HTTPChatModel", "LocalChatModel"}


def test_an_endpoint_judge_answers_over_http():
    with ScriptedChatServer(["fine"]) as server:
        model = build_judge_model({"judge_base_url": server.base_url, "judge_model": "m"}, "tester",
                                  max_tokens=33, retries=1, api_key="k")
        assert isinstance(model, HTTPChatModel)
        assert (model.temperature, model.max_tokens, model.retries, model.api_key) == (0.0, 33, 1, "k")
        assert model.complete([{"role": "user", "content": "hi"}]).text == "fine"
        assert server.requests[0]["model"] == "m"


@pytest.mark.parametrize("settings, words", [
    ({}, "tester: no judge model: --param judge_base_url=URL"),
    ({"judge_base_url": "http://127.0.0.1:9/v1"}, "tester: judge_base_url needs judge_model too"),
])
def test_settings_that_name_no_usable_judge_are_refused_naming_who_asked(settings, words):
    with pytest.raises(ValueError, match=words):
        build_judge_model(settings, "tester")


def test_without_a_named_judge_the_agent_s_shared_model_answers():
    assert judge_or_shared({}, "tester") is None
    shared = HTTPChatModel("http://127.0.0.1:9/v1", "agent-model")
    with agent_model_shared(shared):
        assert judge_or_shared({}, "tester") is shared
        assert judge_or_shared({"judge_base_url": "http://127.0.0.1:9/v1", "judge_model": "j"}, "t").model == "j"
    assert not judge_named(JudgeSettings().model_dump()) and judge_named({"judge_local": True})


def client_constructions(path: Path) -> list[str]:
    """The lines of `path` that construct a model client (`HTTPChatModel(...)`, `LocalChatModel(...)`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in CLIENTS:
                found.append(f"{path.relative_to(path.parents[1])}:{node.lineno} {name}")
    return found


def test_no_plugin_or_env_builds_a_judge_client_itself(tmp_path):
    found = [hit for folder in ("plugins", "envs") for path in sorted((ROOT / folder).rglob("*.py"))
             for hit in client_constructions(path)]
    assert found == [], f"build judge models with playground.host_api.build_judge_model: {found}"
    planted = tmp_path / "plugin" / "judge.py"
    planted.parent.mkdir()
    planted.write_text("from playground.api import HTTPChatModel\nmodel = HTTPChatModel('u', 'm')\n")
    assert client_constructions(planted) == ["plugin/judge.py:2 HTTPChatModel"]
