"""Sentry's recovery verifier, driven directly with hand-built blind outcomes (no env, no loop, no grade).

Each test pins one rule of `plugins/sentry/verifier.py`: what counts as a cycle, as grounded progress, as
task-relevant progress, as a recurrence, and when each admission mode (`window`, `early`, `none`) gives its verdict.
"""

from __future__ import annotations

from types import MappingProxyType

import pytest

from playground.core.actions import command_kinds
from playground.core.payloads import Detection
from playground.plugins.sentry.blind import BlindOutcome, BlindView
from playground.plugins.sentry.verifier import ADMISSIONS, RecoveryVerifier, Verdict, Watch

GOAL = "Bring the red key to the hall."
ALL_ACTIONS = ("look", "examine old map", "go east", "go west", "take red key", "take old map", "drop red key")
KINDS = MappingProxyType(command_kinds(ALL_ACTIONS))  # look/examine: "look"; go: "move"; take: "take"; drop: "use"
MOVES = ("go east", "go west")  # on offer by default: objects "east" and "west", none of them the goal's
LOOP = Detection("sentry", "progress", ("repetition_or_looping",), 0.9)
INVALID = Detection("sentry", "validity", ("invalid_action",), 0.9)


def outcome(step, action, observation, *, valid=True, finish=False, before=MOVES, after=MOVES) -> BlindOutcome:
    """A step's blind outcome: the view before it (`before` on offer), the action and what came back."""
    view = BlindView(step, GOAL, "", before, (), action_kinds=KINDS)
    return BlindOutcome(view, "", action, finish, observation, valid, after)


def verifier(admission="window", horizon=10, quiet_steps=3, repair_step=1) -> RecoveryVerifier:
    """A verifier at the start of an episode, watching one soft repair for LOOP made at `repair_step`."""
    v = RecoveryVerifier(horizon=horizon, quiet_steps=quiet_steps, admission=admission)
    v.start_episode("  You are in the hall.  ", GOAL)
    v.watch(repair_step, LOOP, (7,), "look")
    return v


def run(v, steps, start=1):
    """Observe (action, observation[, keyword overrides]) steps from `start`; the verdicts, with the step of each."""
    out = []
    for step, (action, observation, *extra) in enumerate(steps, start=start):
        out += [(step, x) for x in v.observe(outcome(step, action, observation, **(extra[0] if extra else {})))]
    return out


def only(v, steps, start=1) -> Verdict:
    [(_, verdict)] = run(v, steps, start)
    return verdict


# -- configuration and verdict names ---------------------------------------------------------------------------

def test_admission_modes_are_checked():
    for admission in ADMISSIONS:
        assert RecoveryVerifier(admission=admission).admission == admission
    with pytest.raises(ValueError, match="admission must be one of window, early, none, got 'late'"):
        RecoveryVerifier(admission="late")


def test_verdict_names():
    w = Watch(1, LOOP, ())
    assert [Verdict(w, r, "").name for r in (True, False, None)] == ["resolved", "unresolved", "unverified"]


def test_watch_records_the_repair():
    v = verifier(repair_step=4)
    [w] = v.watches
    assert (w.repair_step, w.detection, w.lesson_ids, w.failing_action) == (4, LOOP, (7,), "look")
    assert (w.cycles, w.quiet, w.progress_action, w.relevant_action, w.recurred_at, w.progress_cycle) == (
        0, 0, None, None, None, 0)


# -- cycles -----------------------------------------------------------------------------------------------------

def test_a_cycle_counts_from_the_repair_step_on_and_earlier_steps_do_not_count():
    v = verifier(horizon=3, repair_step=3)
    assert run(v, [("look", "a"), ("look", "b")]) == []  # steps 1, 2: before the repair
    assert v.watches[0].cycles == 0
    assert run(v, [("look", "c")], start=3) == [] and v.watches[0].cycles == 1  # the repair step is cycle 1
    assert run(v, [("look", "d")], start=4) == [] and v.watches[0].cycles == 2


def test_a_later_repair_does_not_hold_up_the_earlier_ones():
    v = RecoveryVerifier(horizon=2)
    v.start_episode("start", GOAL)
    v.watch(5, LOOP, ())  # watched first, starts later
    v.watch(1, LOOP, ())
    v.watch(2, INVALID, ())
    assert run(v, [("look", "a")], start=2) == []
    assert [(w.repair_step, w.cycles) for w in v.watches] == [(5, 0), (1, 1), (2, 1)]
    verdicts = run(v, [("look", "b")], start=3)
    assert [(x.watch.repair_step, x.resolved) for _, x in verdicts] == [(1, False), (2, False)]
    assert [w.repair_step for w in v.watches] == [5]


# -- grounded and task-relevant progress ------------------------------------------------------------------------

def _progress(step_kwargs, action="go east", observation="A kitchen.") -> str | None:
    v = verifier(horizon=1)
    return only(v, [(action, observation, step_kwargs)]).watch.progress_action


def test_grounded_progress_is_a_valid_world_changing_action_with_a_new_observation():
    assert _progress({}) == "go east"
    assert _progress({}, action="take old map") == "take old map"
    assert _progress({"valid": False}) is None  # not a valid action
    assert _progress({"finish": True}) is None  # a stop
    assert _progress({}, action="examine old map") is None  # a "look" kind, however new the text
    assert _progress({}, action="look", observation="A kitchen.") is None
    assert _progress({}, observation="You are in the hall.") is None  # the first observation, already seen
    assert _progress({"valid": False, "finish": True}, action="look") is None


def test_an_observation_seen_before_in_the_episode_is_no_progress():
    v = verifier(horizon=3)
    [(_, verdict)] = run(v, [("look", "A kitchen."), ("go east", "A kitchen."), ("go west", "A study.")])
    assert (verdict.watch.progress_action, verdict.watch.progress_cycle) == ("go west", 3)


def test_the_first_grounded_progress_is_kept():
    v = verifier(horizon=4)
    verdict = only(v, [("look", "Dark."), ("go east", "A kitchen."), ("go west", "A study."), ("look", "Dark.")])
    assert (verdict.watch.progress_action, verdict.watch.progress_cycle) == ("go east", 2)
    assert verdict.watch.relevant_action is None and verdict.resolved is False
    assert verdict.evidence == "grounded progress ('go east') in 4 cycles, none tied to the goal"


def test_task_relevant_progress_names_the_goals_entities_and_the_first_one_is_kept():
    reach = {"after": ("take red key", "go west")}
    v = verifier(horizon=4)
    steps = [("go east", "A kitchen.", reach), ("look", "A kitchen. You see a red key.", reach),
             ("take red key", "You take the red key.", reach), ("drop red key", "You drop the red key.", reach)]
    verdict = only(v, steps)
    w = verdict.watch
    assert (w.progress_action, w.relevant_action, w.progress_cycle) == ("go east", "take red key", 3)
    assert verdict.resolved is True
    assert verdict.evidence == ("no repetition_or_looping in 4 cycles; grounded, task-relevant progress with "
                                "'take red key'")


def test_relevance_needs_grounding():
    reach = {"before": ("take red key",)}
    v = verifier(horizon=1)  # a look whose new text mentions the key: relevant words, but no grounded progress
    verdict = only(v, [("look", "You see a red key.", reach)])
    assert (verdict.watch.progress_action, verdict.watch.relevant_action) == (None, None)
    assert verdict.resolved is False and verdict.evidence == "no grounded progress in 1 cycle"


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_goals_entities_come_from_the_actions_on_offer_before_or_after_the_step(where):
    v = verifier(horizon=1)  # "red" and "key" are named as objects only by the actions on offer
    verdict = only(v, [("go east", "A kitchen. A red key lies here.", {where: ("take red key", "go west")})])
    assert verdict.watch.relevant_action == "go east" and verdict.resolved is True


def test_the_goals_entities_come_from_the_action_taken():
    v = verifier(horizon=1)  # nothing on offer names the key, the action taken does
    verdict = only(v, [("take red key", "Taken.", {"before": ("look",), "after": None})])
    assert verdict.watch.relevant_action == "take red key"


def test_goal_words_that_no_action_names_are_not_entities():
    v = verifier(horizon=1)  # "hall" is a goal word, but no action names it as an object
    verdict = only(v, [("go east", "Another hall.", {"before": ("go east",), "after": ("go west",)})])
    assert verdict.watch.progress_action == "go east" and verdict.watch.relevant_action is None


def test_every_goal_word_is_an_entity_where_no_action_is_ever_listed():
    v = verifier(horizon=1)
    verdict = only(v, [("look", "", {"before": None, "after": None, "finish": True})])  # "look" names no object
    assert v.entities() == {"bring", "red", "key", "hall"} and verdict.resolved is False
    v = verifier(horizon=1)
    v.observe(outcome(1, "look", "A hall.", before=None, after=None))
    assert v.entities() == {"bring", "red", "key", "hall"}
    v.observe(outcome(2, "take red key", "Taken.", before=None, after=None))
    assert v.entities() == {"red", "key"}


# -- recurrence -------------------------------------------------------------------------------------------------

def test_a_recurrence_counts_only_after_the_repair_step_and_only_for_the_same_labels():
    v = verifier(repair_step=2)
    v.note_detections(1, [LOOP])
    v.note_detections(2, [LOOP])  # the repair's own step
    v.note_detections(3, [INVALID])  # other labels
    v.note_detections(4, [])
    assert v.watches[0].recurred_at is None
    v.note_detections(5, [INVALID, LOOP])
    v.note_detections(6, [LOOP])
    assert v.watches[0].recurred_at == 5  # the first recurrence is kept


@pytest.mark.parametrize("admission", ["window", "early"])
def test_a_recurrence_is_unresolved_at_once(admission):
    v = verifier(admission, horizon=10)
    assert run(v, [("go east", "A kitchen.")]) == []
    v.note_detections(2, [LOOP])
    [(step, verdict)] = run(v, [("take red key", "You take the red key.", {"after": ("drop red key",)})], start=2)
    assert step == 2 and verdict.resolved is False and v.watches == []
    assert verdict.evidence == "repetition_or_looping detected again at step 2"
    assert (verdict.watch.cycles, verdict.watch.quiet) == (2, 0)  # quiet counts from the last recurrence


# -- window admission -------------------------------------------------------------------------------------------

def test_window_admission_judges_exactly_at_the_horizon():
    reach = {"after": ("take red key",)}
    v = verifier("window", horizon=3)
    assert run(v, [("take red key", "You take the red key.", reach), ("look", "x")]) == []
    [(step, verdict)] = run(v, [("look", "x")], start=3)
    assert step == 3 and verdict.resolved is True and verdict.watch.cycles == 3 and v.watches == []
    assert v.finish() == []


def test_window_admission_without_progress_is_unresolved():
    v = verifier("window", horizon=2)
    [(step, verdict)] = run(v, [("look", "x"), ("look", "x"), ("look", "x")])
    assert step == 2 and verdict.resolved is False and verdict.evidence == "no grounded progress in 2 cycles"


def test_window_admission_judges_what_was_seen_when_the_episode_ends():
    v = verifier("window", horizon=10)
    assert run(v, [("go east", "A kitchen.")]) == []
    [verdict] = v.finish()
    assert verdict.resolved is False and v.watches == [] and v.finish() == []
    assert verdict.evidence == "grounded progress ('go east') in 1 cycle (the episode ended), none tied to the goal"

    v = verifier("window", horizon=10)
    run(v, [("take red key", "Taken.", {"after": ("drop red key",)}), ("look", "x")])
    [verdict] = v.finish()
    assert verdict.resolved is True
    assert verdict.evidence == ("no repetition_or_looping in 2 cycles (the episode ended); grounded, task-relevant "
                                "progress with 'take red key'")

    v = verifier("window", horizon=10)  # an episode that ends before any cycle
    [verdict] = v.finish()
    assert verdict.resolved is False and verdict.evidence == "no grounded progress in 0 cycles (the episode ended)"


# -- early admission --------------------------------------------------------------------------------------------

def test_early_admission_resolves_after_quiet_steps_of_grounded_progress():
    v = verifier("early", horizon=10, quiet_steps=3)
    assert run(v, [("go east", "A kitchen."), ("look", "x")]) == []
    assert v.watches[0].quiet == 2
    [(step, verdict)] = run(v, [("look", "x")], start=3)
    assert step == 3 and verdict.resolved is True
    assert verdict.evidence == "no repetition_or_looping for 3 steps; progress resumed with 'go east'"


def test_early_admission_needs_no_relevance_but_needs_progress():
    v = verifier("early", horizon=5, quiet_steps=2)
    assert run(v, [("look", "x"), ("look", "x"), ("look", "x")]) == []  # quiet, but no progress
    [(step, verdict)] = run(v, [("go east", "A kitchen.")], start=4)
    assert step == 4 and verdict.resolved is True and verdict.watch.relevant_action is None


def test_early_admission_is_unresolved_exactly_at_the_horizon_without_progress():
    v = verifier("early", horizon=4, quiet_steps=1)
    assert run(v, [("look", "x")] * 3) == []
    [(step, verdict)] = run(v, [("look", "x")], start=4)
    assert step == 4 and verdict.resolved is False and verdict.evidence == "no grounded progress within 4 cycles"


def test_early_admission_gives_no_verdict_at_the_end():
    v = verifier("early")
    run(v, [("go east", "A kitchen.")])
    assert v.finish() == [] and v.watches == []


# -- no verification --------------------------------------------------------------------------------------------

def test_no_verification_records_the_next_action_whatever_it_was():
    v = verifier("none", repair_step=2)
    assert run(v, [("go east", "A kitchen.")]) == []  # before the repair
    [(step, verdict)] = run(v, [("look", "A kitchen.", {"valid": False})], start=2)
    assert step == 2 and verdict.resolved is None and verdict.name == "unverified"
    assert (verdict.watch.progress_action, verdict.watch.progress_cycle) == ("look", 1)
    assert verdict.evidence == "not verified (every repair becomes a lesson)"
    v = verifier("none")
    v.note_detections(2, [LOOP])  # no verification: a recurrence does not matter either
    assert [x.resolved for _, x in run(v, [("look", "x")])] == [None]


def test_no_verification_gives_no_verdict_at_the_end():
    v = verifier("none")
    assert v.finish() == [] and v.watches == []
