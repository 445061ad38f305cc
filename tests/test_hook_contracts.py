"""The runtime-hook contracts: first-result hooks, harness call order, one effect per Decision, frozen payloads."""

from __future__ import annotations

import pytest

from playground.core.episode_hooks import PluginError
from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision, EpisodeIds, InterventionMessage, PayloadError, StepContext
from playground.testing import ScriptedAgent, play, tiny_env


class Checkpointer:
    """Answers `want_checkpoint` with a fixed value at every step."""

    def __init__(self, answer):
        self.answer = answer

    @hookimpl
    def want_checkpoint(self, context):
        return self.answer


def test_want_checkpoint_false_takes_no_checkpoint():
    result = play(tiny_env(), ScriptedAgent(), plugins=[Checkpointer(False)], task="tiny-3")
    assert result.count("step") > 0 and result.count("checkpoint") == 0


def test_want_checkpoint_first_listed_answer_decides():
    steps = play(tiny_env(), ScriptedAgent(), plugins=[Checkpointer(True), Checkpointer(False)], task="tiny-3")
    assert steps.count("checkpoint") == steps.count("step") > 0
    none = play(tiny_env(), ScriptedAgent(), plugins=[Checkpointer(False), Checkpointer(True)], task="tiny-3")
    assert none.count("checkpoint") == 0
    passed_on = play(tiny_env(), ScriptedAgent(), plugins=[Checkpointer(None), Checkpointer(True)], task="tiny-3")
    assert passed_on.count("checkpoint") == passed_on.count("step")


class Replacer:
    """Replaces every action with its own, and records that it was asked."""

    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    @hookimpl
    def detect_failures(self, context, proposal):
        self.calls.append(("detect", self.name))

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        self.calls.append(("decide", self.name))
        return Decision(self.name, self.name, action="look")


def test_interventions_are_called_in_harness_order_and_the_first_listed_decides():
    calls: list = []
    result = play(tiny_env(), ScriptedAgent(), plugins=[Replacer("first", calls), Replacer("second", calls)],
                  task="tiny-1", max_steps=2)
    assert [d["plugin"] for d in result.of("intervention")] == ["first", "first"]
    assert calls[:3] == [("detect", "first"), ("detect", "second"), ("decide", "first")]
    assert ("decide", "second") not in calls


def test_decision_needs_exactly_one_effect():
    message = InterventionMessage("hard_repair", "try again")
    with pytest.raises(PayloadError, match="exactly one effect.*got none"):
        Decision("p", "k")
    with pytest.raises(PayloadError, match="'p'.*reask, replace"):
        Decision("p", "k", message=message, action="look")
    with pytest.raises(PayloadError, match="replace, stop"):
        Decision("p", "k", action="look", stop=True)
    assert Decision("p", "k", message=message).effect == "reask"
    assert Decision("p", "k", action="look").effect == "replace"
    assert Decision("p", "k", rollback_to=0).effect == "rollback"
    assert Decision("p", "k", stop=True).effect == "stop"


class Mutator:
    """Tries to change what other plugins see."""

    def __init__(self):
        self.errors: list[str] = []

    @hookimpl
    def episode_started(self, start):
        params, nested, info = start.params, start.params["nested"], start.env_info
        for change in (lambda: params.update(k=99), lambda: nested.update(a=2), lambda: info.update(goal="x")):
            try:
                change()
            except AttributeError as exc:  # read-only mappings have no update()
                self.errors.append(type(exc).__name__)
        try:
            params["k"] = 99  # type: ignore[index]
        except TypeError as exc:
            self.errors.append(type(exc).__name__)


class Reader:
    def __init__(self):
        self.params = None

    @hookimpl
    def episode_started(self, start):
        self.params = start.params


def test_payloads_are_read_only_all_the_way_down():
    mutator, reader = Mutator(), Reader()
    params = {"k": 1, "nested": {"a": 1}, "items": [1, 2]}
    play(tiny_env(), ScriptedAgent(), plugins=[mutator, reader], task="tiny-1", params=params, max_steps=1)
    assert mutator.errors == ["AttributeError"] * 3 + ["TypeError"]
    assert reader.params["k"] == 1 and reader.params["nested"]["a"] == 1 and reader.params["items"] == (1, 2)
    assert params == {"k": 1, "nested": {"a": 1}, "items": [1, 2]}  # the caller's dict is untouched


def test_every_payload_of_an_episode_carries_one_id_record():
    ids = EpisodeIds("run", "ep", "tiny", "tiny-1", "h", "default")
    context = StepContext(ids, 0, "goal", "obs", None, ())
    assert context.ids.task_id == "tiny-1" and not hasattr(context, "task_id")
    with pytest.raises(TypeError):
        context.action_kinds["look"] = "look"  # type: ignore[index]


class RollbackToNowhere:
    @hookimpl
    def want_checkpoint(self, context):
        return context.step == 0

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        if context.step == 1:
            return Decision("nowhere", "rollback", rollback_to=5)


def test_rollback_to_a_step_without_checkpoint_is_the_plugins_error():
    with pytest.raises(PluginError, match="step 5, which has no checkpoint.*\\[0\\]"):
        play(tiny_env(), ScriptedAgent(), plugins=[RollbackToNowhere()], task="tiny-5", max_steps=5)
    result = play(tiny_env(), ScriptedAgent(), plugins=[RollbackToNowhere()], task="tiny-5", max_steps=5, strict=False)
    assert result.result.status == "error" and "no checkpoint" in result.result.error


class _WrongDecision:
    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        return "not a decision"


class _WrongNotes:
    @hookimpl
    def agent_notes(self, context):
        return 42


class _WrongDetections:
    @hookimpl
    def detect_failures(self, context, proposal):
        return ["nope"]


class _WrongActions:
    @hookimpl
    def agent_actions(self, context):
        return ("look", 3)


@pytest.mark.parametrize("plugin, hook, why", [
    (_WrongDecision(), "decide_intervention", "returned str, expected a Decision or None"),
    (_WrongNotes(), "agent_notes", "returned int among its results, expected strings or None"),
    (_WrongDetections(), "detect_failures", "returned str among its results, expected Detections or None"),
    (_WrongActions(), "agent_actions", "something other than action strings"),
])
def test_a_hook_returning_the_wrong_type_is_a_fault_of_that_plugin(plugin, hook, why):
    """Issue 38: a wrong return type used to escape as a bare TypeError, blamed on "episode setup"."""
    result = play(tiny_env(), ScriptedAgent(["look"] * 3), plugins=[plugin], strict=False)
    assert result.result.status == "error"
    assert result.result.error.startswith(f"plugin 'plugin0' raised in hook {hook!r}: TypeError: ")
    assert why in result.result.error
