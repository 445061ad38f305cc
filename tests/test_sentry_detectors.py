"""Sentry's rule-based detectors, routing, hard repair and verifier, without a playbook."""

from __future__ import annotations

import dataclasses

from playground.core.actions import command_kinds
from playground.core.payloads import Detection, EpisodeIds, Proposal, StepContext, StepOutcome, Turn
from playground.plugins.sentry.blind import blind_outcome, blind_view
from playground.plugins.sentry.detectors import run_detectors
from playground.plugins.sentry.harness import SentryPlugin
from playground.plugins.sentry.repair import rank_actions
from playground.plugins.sentry.verifier import RecoveryVerifier
from playground.testing import ScriptedAgent, play, tiny_env

GOAL = "Bring the red key to the hall and drop it there."
ADMISSIBLE = ("examine old map", "go east", "inventory", "look", "take old map")


def ctx(history=(), admissible=ADMISSIBLE, score=0.0, max_score=1.0, step=None) -> StepContext:
    history = tuple(history)
    return StepContext(EpisodeIds("r", "e", "tiny", "tiny-1", "sentry"), len(history) if step is None else step, GOAL,
                       "You are in the hall. You see an old map.", admissible, history, score, max_score,
                       action_kinds=command_kinds(admissible or ()))


def turn(step, action, observation="ok", valid=True, score=0.0) -> Turn:
    """A finished turn; its kind as the loop records it (the env's kind for a valid action)."""
    return Turn(step, "", action, observation, valid, 0.0, score, command_kinds([action])[action] if valid else "")


def labels(detections):
    return {label for d in detections for label in d.labels}


def test_invalid_and_unparseable_actions_are_checked_first():
    assert labels(run_detectors(ctx(), Proposal("", "fly east"), 5)) == {"invalid_action"}
    assert labels(run_detectors(ctx(), Proposal("", "Action: go east >>"), 5)) == {"unparseable_action"}
    assert labels(run_detectors(ctx(), Proposal("", ""), 5)) == {"unparseable_action"}
    assert run_detectors(ctx(), Proposal("", "go east"), 5) == []


def test_repetition_and_cycles():
    hall = "You are in the hall. You see an old map."
    history = [turn(0, "look", hall)]
    assert "repetition_or_looping" in labels(run_detectors(ctx(history), Proposal("", "look"), 5, first_observation=hall))
    cycle = [turn(0, "go east", "kitchen"), turn(1, "go west", hall)]
    found = run_detectors(ctx(cycle, admissible=("go east", "go west")), Proposal("", "go east"), 5, first_observation=hall)
    assert "repetition_or_looping" in labels(found)
    corridor = [turn(0, "go east", "kitchen")]  # the same move from a new place is progress, not a loop
    ctx_kitchen = dataclasses.replace(ctx(corridor, admissible=("go east", "go west")), observation="kitchen")
    assert run_detectors(ctx_kitchen, Proposal("", "go east"), 5, first_observation=hall) == []


def test_stall_needs_a_streak_of_idle_actions():
    idle = [turn(0, "look", "a"), turn(1, "inventory", "b"), turn(2, "examine old map", "c")]
    assert "planning_stall" in labels(run_detectors(ctx(idle), Proposal("", "look"), 5))
    busy = idle[:2] + [turn(2, "take old map", "taken")]
    assert "planning_stall" not in labels(run_detectors(ctx(busy), Proposal("", "look"), 5))


def test_early_stop_is_read_from_observations_and_goal_never_the_score():
    stop = Proposal("done", "", finish=True)
    for score in (0.0, 1.0, None):  # the score is invisible: the same verdict whatever it says
        found = run_detectors(ctx([turn(0, "go east", "A kitchen.")], ADMISSIBLE + ("take red key",), score), stop, 5)
        assert labels(found) == {"termination_miscalibration"}
        assert found[0].confidence == 0.9 and "key" in found[0].evidence  # the goal's red key was never observed
    seen_key = [turn(0, "go east", "A kitchen. You see a red key.")]
    assert run_detectors(ctx(seen_key), stop, 5)[0].confidence == 0.8  # entities seen, still no completion message
    # A win banner is a grade, not a completion message: completion is judged from the agent's own stop, so a
    # stop after "Well done: ..." is checked like any other (Sentry never sees the banner: the env's
    # `remove_grade_text` takes it out of every observation first).
    for banner in ("You drop the red key. Well done: the red key is back in the hall.",
                   "You drop the red key.\n\n*** The End ***", "You win! Congratulations, task completed."):
        found = run_detectors(ctx([turn(0, "drop red key", banner)], score=1.0, max_score=1.0), stop, 5)
        assert labels(found) == {"termination_miscalibration"}
    # what the agent's own finishing action brought back still counts: a purchase confirmed (WebShop's page)
    bought = [turn(0, "click[buy now]", "Thank you for shopping with us! You bought B0 with options none.")]
    assert run_detectors(ctx(bought), stop, 5) == []
    assert labels(run_detectors(ctx([]), stop, 5)) == {"termination_miscalibration"}  # stops before acting


def test_hallucination_drift_and_mismatch():
    found = run_detectors(ctx(admissible=None), Proposal("", "take golden sword"), 5)
    assert "hallucination" in labels(found)
    drift_history = [turn(0, "take old map", "You take the old map.")]
    found = run_detectors(ctx(drift_history, admissible=("drop old map", "take blue mug", "take red key", "look")),
                          Proposal("I will take the red key", "take blue mug"), 5)
    assert {"objective_drift", "reasoning_action_mismatch"} <= labels(found)
    same_object = run_detectors(ctx(drift_history, admissible=("drop old map", "take blue mug", "look")),
                                Proposal("I will drop the old map", "drop old map"), 5)
    assert "objective_drift" not in labels(same_object)


def test_ranked_actions_prefer_goal_terms_and_penalise_recent_ones():
    admissible = ("go east", "look", "take red key", "examine old map")
    ranked = rank_actions(ctx([turn(0, "look"), turn(1, "look")], admissible=admissible))
    assert ranked[0] == "take red key" and ranked[-1] == "look"
    assert len(rank_actions(ctx(admissible=tuple(f"go {i}" for i in range(40))), top=12)) == 12


def test_closest_ranking_puts_the_actions_most_like_the_rejected_one_first():
    admissible = ("go east", "look", "take red key", "examine old map")
    assert rank_actions(ctx(admissible=admissible))[0] == "take red key"
    assert rank_actions(ctx(admissible=admissible), closest_to="examin old mpa")[0] == "examine old map"
    assert rank_actions(ctx(admissible=admissible), closest_to="lok")[0] == "look"


def test_hard_rank_closest_offers_the_intended_command_first():
    offered = {}
    for rank in ("goal", "closest"):
        agent = ScriptedAgent(["lok", "look"])
        play(tiny_env(), agent, plugins=[SentryPlugin({"hard_rank": rank})], task="tiny-4", max_steps=2)
        offered[rank] = agent.views[1].message.actions
    assert offered["closest"][0] == "look" and offered["goal"][0] != "look"
    assert sorted(offered["closest"]) == sorted(offered["goal"])


def test_hard_repair_shows_valid_actions_then_sends_the_rewrite():
    # the paper's configuration: the ranked actions are a view to rewrite from, and an action still invalid after
    # the re-asks goes to the env (fallback=reask)
    agent = ScriptedAgent(["fly", "swim", "crawl"])
    result = play(tiny_env(), agent, plugins=[SentryPlugin({})], task="tiny-4", max_steps=30)
    kinds = [d["kind"] for d in result.of("intervention")]
    assert kinds[:2] == ["hard_repair", "hard_repair"] and "hard_repair_fallback" not in kinds
    message = agent.views[1].message
    assert message.kind == "hard_repair" and message.actions and not message.restrict
    assert result.of("step")[0]["action"] == "crawl" and not result.of("step")[0]["valid_action"]


def test_the_best_fallback_plays_the_top_ranked_action():
    agent = ScriptedAgent(["fly", "swim", "crawl"])
    result = play(tiny_env(), agent, plugins=[SentryPlugin({"shortlist": True, "fallback": "best"})], task="tiny-4",
                  max_steps=30)
    kinds = [d["kind"] for d in result.of("intervention")]
    assert kinds[:3] == ["hard_repair", "hard_repair", "hard_repair_fallback"]
    assert agent.views[1].message.restrict
    assert result.of("step")[0]["valid_action"]


def test_give_up_fallback_stops_the_episode():
    result = play(tiny_env(), ScriptedAgent(["fly", "fly", "fly"]), plugins=[SentryPlugin({"fallback": "give_up"})],
                  task="tiny-4")
    assert result.result.status == "stopped"


def test_soft_repair_only_after_a_detection_and_respects_cooldown_and_cap():
    agent = ScriptedAgent(["look"] * 12)
    result = play(tiny_env(), agent, plugins=[SentryPlugin({"cooldown": 2, "max_repairs": 2})], task="tiny-4",
                  max_steps=14)
    soft = [d for d in result.of("intervention") if d["kind"] == "soft_repair"]
    assert len(soft) == 2
    assert soft[1]["step"] - soft[0]["step"] > 2
    assert result.of("detection")[0]["step"] >= 1  # nothing before there was anything to detect
    quiet = play(tiny_env(), ScriptedAgent(), plugins=[SentryPlugin({})], task="tiny-4")
    assert quiet.count("intervention") == 0 and quiet.result.won


def _outcome(step, action, observation, valid=True, score=0.0, won=False, reward=0.0, after=ADMISSIBLE):
    context = ctx(step=step)
    return StepOutcome(context, Proposal("", action), observation, reward, won, False, valid, won, score, after)


def _observe(verifier, outcome):
    return verifier.observe(blind_outcome(outcome))


LOOP = Detection("sentry", "progress", ("repetition_or_looping",), 0.9)


def test_the_verifier_only_ever_receives_blind_outcomes():
    outcome = blind_outcome(_outcome(1, "look", "x", score=5.0, won=True, reward=3.0))
    fields = {f.name for f in dataclasses.fields(outcome)} | {f.name for f in dataclasses.fields(outcome.view)}
    assert not fields & {"reward", "score", "max_score", "won", "terminated", "truncated", "status"}
    assert not {"reward", "score"} & {f.name for f in dataclasses.fields(blind_view(ctx([turn(0, "look")])).history[0])}


def test_early_admission_resolves_after_quiet_progress_and_ignores_reward_and_won():
    steps = [("look", "same"), ("take old map", "You take the old map."), ("go east", "A kitchen."), ("look", "A kitchen.")]

    def verdicts(perturb: bool):
        v = RecoveryVerifier(horizon=10, quiet_steps=3, admission="early")
        v.start_episode("start", GOAL)
        v.watch(1, LOOP, ())
        out = []
        for i, (action, obs) in enumerate(steps, start=1):
            o = _outcome(i, action, obs)
            if perturb:
                o = dataclasses.replace(o, won=True, reward=100.0, terminated=True, score=9.0)
            out += [(x.resolved, x.watch.repair_step) for x in _observe(v, o)]
        return out

    assert verdicts(False) == [(True, 1)]
    assert verdicts(True) == verdicts(False)


def test_window_admission_waits_for_the_horizon_and_needs_task_relevant_progress():
    relevant = [("look", "same"), ("go east", "A kitchen. You see a red key."), ("look", "A kitchen.")]
    v = RecoveryVerifier(horizon=5, admission="window")
    v.start_episode("start", GOAL)
    v.watch(1, LOOP, ())
    in_reach = ADMISSIBLE + ("take red key",)  # the actions on offer name the goal's entities
    results = [x for i, (a, o) in enumerate(relevant, start=1) for x in _observe(v, _outcome(i, a, o, after=in_reach))]
    assert results == []  # grounded, relevant progress at cycle 2, but the window is still open
    results = [x for i in range(4, 6) for x in _observe(v, _outcome(i, "look", "A kitchen."))]
    assert [(x.resolved, x.watch.relevant_action) for x in results] == [(True, "go east")]

    v = RecoveryVerifier(horizon=3, admission="window")  # new places, none tied to the goal's entities
    v.start_episode("start", GOAL)
    v.watch(1, LOOP, ())
    moves = [("go east", "A kitchen."), ("go east", "A study."), ("go east", "A garden.")]
    results = [x for i, (a, o) in enumerate(moves, start=1) for x in _observe(v, _outcome(i, a, o))]
    assert [x.resolved for x in results] == [False] and "none tied to the goal" in results[0].evidence

    v = RecoveryVerifier(horizon=10, admission="window")  # the episode ends inside the window
    v.start_episode("start", GOAL)
    v.watch(1, LOOP, ())
    assert _observe(v, _outcome(1, "take red key", "You take the red key.", after=("drop red key",))) == []
    assert [x.resolved for x in v.finish()] == [True] and v.finish() == []


def test_verifier_unresolved_when_the_pattern_recurs_or_nothing_progresses():
    for admission in ("window", "early"):
        v = RecoveryVerifier(horizon=4, quiet_steps=3, admission=admission)
        v.start_episode("start", GOAL)
        v.watch(1, LOOP, ())
        _observe(v, _outcome(1, "look", "x"))
        v.note_detections(2, [LOOP])
        assert [x.resolved for x in _observe(v, _outcome(2, "look", "x"))] == [False]
        v.watch(3, LOOP, ())
        results = [x.resolved for i in range(3, 7) for x in _observe(v, _outcome(i, "look", "x"))]
        assert results == [False]
    v = RecoveryVerifier(admission="early")  # early admission gives no verdict on repairs the end cuts short
    v.start_episode("start", GOAL)
    v.watch(1, LOOP, ())
    assert v.finish() == []


def test_no_verification_gives_every_repair_an_unverified_verdict_after_one_step():
    v = RecoveryVerifier(admission="none")
    v.start_episode("start", GOAL)
    v.watch(1, LOOP, ())
    [verdict] = _observe(v, _outcome(1, "look", "same"))
    assert verdict.resolved is None and verdict.name == "unverified" and verdict.watch.progress_action == "look"


def test_an_insisted_early_stop_is_offered_concrete_actions():
    stop = Proposal("done", "", finish=True)
    agent = ScriptedAgent([stop, stop])
    result = play(tiny_env(), agent, plugins=[SentryPlugin({})], task="tiny-4", max_steps=30)
    kinds = [d["kind"] for d in result.of("intervention")]
    assert kinds == ["soft_repair", "termination_guard"]
    assert agent.views[2].message.actions and result.result.won
    blocked_off = play(tiny_env(), ScriptedAgent([stop, stop]), plugins=[SentryPlugin({"block_early_stop": False})],
                       task="tiny-4")
    assert blocked_off.result.status == "stopped"
