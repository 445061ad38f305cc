"""Built-in agents: random, expert, and the noisy failure-injection instrument."""

from __future__ import annotations

import pytest

from playground.agents.base import ExpertAgent, RandomAgent
from playground.agents.noisy import FAILURE_LABELS, NoisyAgent
from playground.core.actions import command_kinds
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


IDLE_VERBS = ("look", "inventory", "examine")  # the tiny env's actions of kind "look"


def _signatures(rates: dict) -> dict[str, int]:
    """Counts, over ten tiny episodes, of what each failure mode (and nothing else) leaves in the trace."""
    counts = dict.fromkeys(FAILURE_LABELS, 0)
    for task in TASKS[:10]:
        result = play(tiny_env(), NoisyAgent(**rates), task=task, max_steps=30)
        steps = result.of("step")
        actions = [s["action"] for s in steps]
        goal_object = result.of("reset")[0]["goal"].split()[2]
        counts["invalid"] += sum(not s["valid_action"] and ">>" not in s["action"] for s in steps)
        counts["malformed"] += sum(">>" in a for a in actions)
        counts["stop"] += result.result.status == "stopped"
        # a repetition: the same idle action three times in a row (the expert never idles)
        counts["repeat"] += sum(1 for x, y, z in zip(actions, actions[1:], actions[2:])
                                if x == y == z and x.startswith(IDLE_VERBS))
        counts["stall"] += sum(a.startswith(IDLE_VERBS) for a in actions)
        counts["drift"] += sum(a.startswith(("take", "drop")) and goal_object not in a for a in actions)
    return counts


ZERO = {m: 0.0 for m in FAILURE_LABELS}


def test_without_failures_no_signature_shows_up():
    assert _signatures(ZERO) == dict.fromkeys(FAILURE_LABELS, 0)


@pytest.mark.parametrize("mode", ["invalid", "malformed", "repeat", "stall", "drift", "stop"])
def test_each_failure_mode_shows_up(mode):
    assert _signatures(ZERO | {mode: 0.5})[mode] > 0


@pytest.mark.parametrize("seed", range(5))
def test_a_repeat_streak_repeats_one_idle_action_off_the_plan(seed):
    agent = NoisyAgent(**ZERO | {"repeat": 1.0}, min_streak=5, max_streak=5)
    agent.reset("tiny-1", seed)
    admissible = ("examine door", "examine old map", "go east", "inventory", "look", "take old map")
    view = AgentView("Bring the red key", "You are in the hall.", (), admissible, 0, None,
                     extras={"expert_plan": ["go east"], "action_kinds": command_kinds(admissible)})
    actions = [agent.propose(view).action for _ in range(5)]
    assert len(set(actions)) == 1 and actions[0].startswith(IDLE_VERBS) and actions[0] != "go east"
    assert agent.failure == FAILURE_LABELS["repeat"]


def test_a_stall_streak_wanders_between_idle_actions():
    """The control for the test above: stalling is not repeating (the idle actions vary)."""
    varied = 0
    for seed in range(5):
        agent = NoisyAgent(**ZERO | {"stall": 1.0}, min_streak=5, max_streak=5)
        agent.reset("tiny-1", seed)
        admissible = ("examine door", "examine old map", "go east", "inventory", "look")
        view = AgentView("Bring the red key", "You are in the hall.", (), admissible, 0, None,
                         extras={"expert_plan": ["go east"], "action_kinds": command_kinds(admissible)})
        varied += len({agent.propose(view).action for _ in range(5)}) > 1
    assert varied >= 4


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


def test_noisy_records_each_injected_failure_in_its_proposal():
    """Ground truth for measurements (`Proposal.injected`, written into the trace): on failure actions only."""
    labels = {label for _, label in FAILURE_LABELS.values()}
    injected = 0
    for task in TASKS[:10]:
        result = play(tiny_env(), NoisyAgent(**ZERO | {"invalid": 0.1, "repeat": 0.1, "stall": 0.1, "stop": 0.05}),
                      task=task, max_steps=30)
        streaks = []
        for proposal in result.of("proposal"):
            mark = proposal.get("injected")
            if proposal["thought"].startswith("Next step of the plan"):
                assert mark is None
            if mark is None:
                continue
            injected += 1
            assert mark["label"] in labels and FAILURE_LABELS[mark["mode"]] == (mark["failure_type"], mark["label"])
            if mark["mode"] == "invalid":
                assert proposal["action"] not in proposal["admissible_actions"]
                assert mark["planned"] in proposal["admissible_actions"]  # the expert's action it replaced
            streaks.append(mark["streak"])
        assert streaks == sorted(streaks) and all(s >= 1 for s in streaks)
    assert injected > 10


def test_a_boolean_option_given_as_a_word_reads_as_that_word():
    """`parse_options` took bool("false") for True; a word is read as what it says, anything else refused."""
    from playground.agents.base import AgentConfigError, parse_options

    assert parse_options({"flag": True}, {"flag": "false"}, "a") == {"flag": False}
    assert parse_options({"flag": False}, {"flag": "True"}, "a") == {"flag": True}
    assert parse_options({"flag": False}, {"flag": 0}, "a") == {"flag": False}
    with pytest.raises(AgentConfigError, match="option 'flag' expects true or false, got 'maybe'"):
        parse_options({"flag": False}, {"flag": "maybe"}, "a")
