"""The episode loop with the tiny env: hooks are called in order and their decisions applied."""

from __future__ import annotations

import dataclasses

import pytest

from playground.core.episode_hooks import EpisodeHooks, PluginError
from playground.core.events import EndEvent, ErrorEvent
from playground.core.hookspecs import hookimpl
from playground.core.loop import EpisodeConfig, run_episode
from playground.core.payloads import Decision, Detection, InterventionMessage, Proposal, StepContext
from playground.testing import ScriptedAgent, play, tiny_env


def test_expert_wins_tiny_task():
    result = play(tiny_env(), ScriptedAgent(), task="tiny-3")
    assert result.result.status == "won" and result.result.won
    steps = result.of("step")
    assert steps and steps[-1]["won"] and all(s["valid_action"] for s in steps)
    kinds = [k for k, _ in result.events]
    assert kinds[0] == "reset" and kinds[-1] == "end"


def test_invalid_action_is_recorded_and_changes_nothing():
    env = tiny_env()
    obs, info = env.reset(options={"task": "tiny-1"})
    result = play(env, ScriptedAgent(["dance wildly"]), task="tiny-1", max_steps=1)
    step = result.of("step")[0]
    assert step["valid_action"] is False
    assert result.result.status == "truncated"
    env2 = tiny_env()
    env2.reset(options={"task": "tiny-1"})
    env2.step("dance wildly")
    assert env2.state["where"] == 0 and env2.state["carrying"] is None


class RewriteGuard:
    """Replaces any inadmissible action with the first admissible one."""

    @hookimpl
    def detect_failures(self, context: StepContext, proposal: Proposal):
        if context.admissible_actions and proposal.action not in context.admissible_actions:
            return Detection("guard", "action_validity", ("invalid_action",), 1.0, proposal.action)

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        if detections:
            return Decision("guard", "hard_repair", action=context.admissible_actions[0], detections=tuple(detections))


def test_decision_can_replace_the_action():
    result = play(tiny_env(), ScriptedAgent(["fly"]), plugins=[RewriteGuard()], task="tiny-2", max_steps=30)
    assert result.count("detection") == 1 and result.count("intervention") == 1
    first_step = result.of("step")[0]
    assert first_step["valid_action"] and first_step["action"] != "fly"
    assert result.result.won


class AskAgain:
    """Re-asks the agent with a message whenever the action is inadmissible."""

    def __init__(self):
        self.contexts = []

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        self.contexts.append(context)
        if context.admissible_actions and proposal.action not in context.admissible_actions:
            msg = InterventionMessage("hard_repair", "invalid; choose one", "action_validity", context.admissible_actions)
            return Decision("ask", "hard_repair", message=msg)


def test_message_reasks_the_agent_and_the_reask_is_checked_again():
    agent = ScriptedAgent(["fly", "swim", "look"])
    plugin = AskAgain()
    result = play(tiny_env(), agent, plugins=[plugin], task="tiny-2", max_steps=1)
    assert [v.message.kind if v.message else None for v in agent.views] == [None, "hard_repair", "hard_repair"]
    assert [c.attempt for c in plugin.contexts] == [0, 1, 2]
    assert result.of("step")[0]["action"] == "look"


def test_reask_budget_lets_the_last_proposal_through():
    agent = ScriptedAgent(["fly", "swim", "crawl", "look"])
    result = play(tiny_env(), agent, plugins=[AskAgain()], task="tiny-2", max_steps=1,
                  params={"max_reasks_per_step": 1})
    assert result.of("step")[0]["action"] == "swim"
    assert result.of("step")[0]["valid_action"] is False


class StopAtOnce:
    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        return Decision("stopper", "give_up", stop=True)


def test_stop_decision_ends_the_episode():
    result = play(tiny_env(), ScriptedAgent(), plugins=[StopAtOnce()], task="tiny-2")
    assert result.result.status == "stopped" and result.count("step") == 0


def test_agent_finish_ends_the_episode():
    result = play(tiny_env(), ScriptedAgent([Proposal("done?", "", finish=True)]), task="tiny-2")
    assert result.result.status == "stopped" and not result.result.won


class RollbackOnce:
    """Checkpoints at step 0 and rolls back once, when the agent first moves east."""

    def __init__(self):
        self.rolled = False

    @hookimpl
    def want_checkpoint(self, context):
        return context.step == 0

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        if not self.rolled and context.step == 2:
            self.rolled = True
            return Decision("rollback", "rollback", rollback_to=0)


def test_rollback_restores_env_and_history():
    agent = ScriptedAgent(["go east", "look"])
    result = play(tiny_env(), agent, plugins=[RollbackOnce()], task="tiny-5", max_steps=30)
    # the rollback forks branch 1 from checkpoint c0 and rewinds the step counter from 2 to 0
    assert result.of("rollback") == [{"to_step": 0, "restored": True, "checkpoint": "c0", "branch": 1, "from_step": 2}]
    assert [c["step"] for c in result.of("checkpoint")] == [0]  # want_checkpoint said False after step 0
    after = agent.views[3]  # the first view after the rollback
    assert after.history == () and "hall" in after.observation
    assert result.result.won


class Exploding:
    @hookimpl
    def step_completed(self, outcome):
        raise RuntimeError("boom")


def test_plugin_error_names_plugin_and_hook_and_is_recorded():
    events = []
    hooks = EpisodeHooks([("exploder", Exploding())])
    config = EpisodeConfig("r", "e", "tiny", "tiny-1", "h", "scripted", 0, 10)
    result = run_episode(tiny_env(), ScriptedAgent(), hooks, config, events.append)
    assert result.status == "error"
    assert "exploder" in result.error and "step_completed" in result.error and "boom" in result.error
    error = [e for e in events if isinstance(e, ErrorEvent)][0]
    assert error.plugin == "exploder" and error.hook == "step_completed"
    assert isinstance(events[-1], EndEvent)


def test_plugin_error_is_raised_in_strict_mode():
    with pytest.raises(PluginError, match="exploder"):
        run_episode(tiny_env(), ScriptedAgent(), EpisodeHooks([("exploder", Exploding())]),
                    EpisodeConfig("r", "e", "tiny", "tiny-1", "h", "scripted", 0, 10, strict=True), lambda event: None)


class BrokenEnv:
    can_snapshot = False

    def reset(self, seed=None, options=None):
        return "start", {"goal": "g", "admissible_actions": ["a"]}

    def step(self, action):
        raise OSError("engine crashed")


def test_env_crash_is_an_episode_error_not_a_crash():
    result = play(BrokenEnv(), ScriptedAgent(["a"]), strict=False)
    assert result.result.status == "error" and "env step failed" in result.result.error


class DecidingObserver:
    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        return None


def test_observers_may_not_implement_decision_hooks():
    with pytest.raises(ValueError, match="observers may only watch"):
        EpisodeHooks([], [("sneaky", DecidingObserver())])


def test_payloads_are_frozen():
    detection = Detection("d", "progress")
    with pytest.raises(dataclasses.FrozenInstanceError):
        detection.failure_type = "other"
