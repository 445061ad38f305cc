"""Built-in agents: random, expert, and the noisy failure-injection instrument."""

from __future__ import annotations

import pytest

from playground.agents.base import ExpertAgent, RandomAgent
from playground.agents.noisy import FAILURE_LABELS, NoisyAgent
from playground.core.payloads import AgentView, InterventionMessage
from playground.testing import play, tiny_env

TASKS = [f"tiny-{i}" for i in range(20_000, 20_030)]


def _actions(result):
    return [(p["action"], p["finish"]) for p in result.of("proposal")]


def test_noisy_is_deterministic_by_seed_and_task():
    a = play(tiny_env(), NoisyAgent(), task="tiny-7", seed=3, max_steps=40)
    b = play(tiny_env(), NoisyAgent(), task="tiny-7", seed=3, max_steps=40)
    c = play(tiny_env(), NoisyAgent(invalid=0.5), task="tiny-7", seed=4, max_steps=40)
    assert _actions(a) == _actions(b)
    assert _actions(a) != _actions(c)


def test_noisy_with_zero_rates_is_the_expert():
    zero = {mode: 0.0 for mode in FAILURE_LABELS}
    for task in TASKS[:5]:
        noisy = play(tiny_env(), NoisyAgent(**zero), task=task)
        expert = play(tiny_env(), ExpertAgent(), task=task)
        assert _actions(noisy) == _actions(expert) and noisy.result.won


@pytest.mark.parametrize("mode", ["invalid", "malformed", "repeat", "stall", "drift", "stop"])
def test_each_failure_mode_shows_up(mode):
    rates = {m: 0.0 for m in FAILURE_LABELS} | {mode: 0.5}
    invalid = stops = repeats = stalls = drifts = 0
    for task in TASKS[:10]:
        result = play(tiny_env(), NoisyAgent(**rates), task=task, max_steps=30)
        steps = result.of("step")
        invalid += sum(not s["valid_action"] for s in steps)
        stops += result.result.status == "stopped"
        actions = [s["action"] for s in steps]
        repeats += sum(1 for x, y in zip(actions, actions[1:]) if x == y)
        stalls += sum(a.startswith(("look", "inventory", "examine")) for a in actions)
        drifts += sum(a.startswith(("take", "drop")) and not result.of("reset")[0]["goal"].split()[2] in a
                      for a in actions)
    observed = {"invalid": invalid, "malformed": invalid, "stop": stops, "repeat": repeats,
                "stall": stalls, "drift": drifts}
    assert observed[mode] > 0


def _view(message=None, plan=("go east",)):
    return AgentView("Bring the red key", "You are in the hall.", (), ("go east", "look", "take old map"),
                     0, message, extras={"expert_plan": list(plan)})


def test_hard_repair_makes_it_choose_an_offered_action():
    agent = NoisyAgent(invalid=1.0)
    agent.reset("tiny-1", 0)
    assert agent.propose(_view()).action not in ("go east", "look", "take old map")
    repair = InterventionMessage("hard_repair", "invalid", "action_validity", ("look", "go east"))
    assert agent.propose(_view(repair)).action == "go east"
    repair = InterventionMessage("hard_repair", "invalid", "action_validity", ("look",))
    agent.propose(_view())
    assert agent.propose(_view(repair)).action == "look"


def _recoveries(labels: tuple[str, ...], trials: int = 200) -> int:
    recovered = 0
    for trial in range(trials):
        agent = NoisyAgent(repeat=1.0, min_streak=5, max_streak=5)
        agent.reset(f"tiny-{trial}", trial)
        agent.propose(_view())
        agent.propose(_view())  # now in a repetition streak
        advice = InterventionMessage("soft_repair", "you are looping", "progress", labels=labels)
        recovered += agent.propose(_view(advice)).action == "go east" and agent.mode is None
    return recovered


def test_soft_repair_with_matching_labels_helps_more_than_unrelated_lessons():
    matching = _recoveries(("repetition_or_looping",))
    unrelated = _recoveries(("hallucination",))
    assert matching > unrelated
    assert 0.8 < matching / 200 <= 1.0 and 0.15 < unrelated / 200 < 0.5


def test_bad_rate_is_refused():
    with pytest.raises(ValueError, match="must be a rate"):
        NoisyAgent(invalid=1.5)


def test_random_agent_picks_admissible_actions_only():
    result = play(tiny_env(), RandomAgent(), task="tiny-3", max_steps=25)
    assert all(s["valid_action"] for s in result.of("step"))


def test_expert_needs_an_expert_plan():
    result = play(tiny_env(expert=False), ExpertAgent(), task="tiny-3", strict=False)
    assert result.result.status == "error" and "expert plan" in result.result.error
