"""Sentry's paired forks: the points are the steps where Sentry intervened, both arms start from the recorded
state, the arm without the repair plays the agent's original proposal, local recovery is judged blind by
Sentry's verifier on the continuation, and the table computes on a tiny noisy run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from playground.plugins.sentry.paired import ARMS, intervention_points, paired_forks
from playground.plugins.sentry.recovery_judge import LocalRecoveryJudge

from playground.cli.main import main
from playground.core.hookspecs import hookimpl
from playground.core.payloads import Detection
from playground.host.manager import get_host
from playground.run.forks import load_episode
from playground.run.traces import read_trace
from playground.testing import ScriptedAgent, play, tiny_env
from tests.conftest import cli
from tests.test_sentry_blind import fuzz

NOISE = ["invalid=0.3", "stop=0.1"]


@pytest.fixture(scope="module")
def sentry_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("paired") / "run"
    options = [arg for pair in NOISE for arg in ("--agent-option", pair)]
    assert main(["run", "--env", "tiny", "--agent", "noisy", *options, "--harness", "base", "--harness", "sentry",
                 "--episodes", "12", "--max-steps", "12", "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def report(sentry_run) -> dict:
    return paired_forks(get_host(), sentry_run, "sentry", trials=2)


def first_step(run: Path, transcript: dict) -> tuple[dict, dict | None, dict]:
    """(first proposal, first step or None, reset) of an arm's fork trace."""
    events = read_trace(run / transcript["trace"])
    proposal = next(e for e in events if e["type"] == "proposal")
    step = next((e for e in events if e["type"] == "step"), None)
    return proposal, step, next(e for e in events if e["type"] == "reset")


def test_points_are_the_steps_where_sentry_intervened(sentry_run):
    points, counts = intervention_points(sentry_run, "sentry")
    assert points and counts["episodes"] == 12
    for point in points:
        episode = load_episode(sentry_run / point.trace)
        step = episode.at(point.position)
        assert any(i.plugin == "sentry" for i in step.interventions)
        assert point.original == ("" if step.proposals[0].finish else step.proposals[0].action)
        assert point.repaired == step.action
    assert not intervention_points(sentry_run, "base")[0]  # base never intervenes


def test_both_arms_start_from_identical_observations(sentry_run, report):
    for point in report["points"]:
        episode = load_episode(sentry_run / point["trace"])
        for trial in range(report["trials"]):
            starts = {first_step(sentry_run, point["arms"][arm][trial])[2]["observation"] for arm in ARMS}
            assert starts == {episode.observation_before(point["step"])}
        assert point["same_start"]


def test_the_arm_without_repair_plays_the_original_action(sentry_run, report):
    changed = 0
    for point in report["points"]:
        for arm in ARMS:
            played = point["repaired"] if arm == "repair" else point["original"]
            finish = point["repaired_finish"] if arm == "repair" else point["original_finish"]
            for transcript in point["arms"][arm]:
                proposal, step, _ = first_step(sentry_run, transcript)
                assert proposal["finish"] == finish and (finish or proposal["action"] == played)
                assert (step is not None and step["step"] == point["step"] and step["action"] == played) or finish
        changed += point["changed"]
    assert changed and report["figures"]["changed"] == changed


def test_removing_the_repair_shows_where_it_mattered(report):
    """Fails if the arms are swapped or the repair is not removed: at an invalid original action the arm
    without the repair is rejected by the env and the repaired one is not; at an early finish the arm without
    the repair ends at once, unrecovered, while the repaired one plays on."""
    invalid = finish = 0
    for point in report["points"]:
        repair, original = point["arms"]["repair"], point["arms"]["original"]
        if point["kind"] == "hard_repair" and point["changed"] and not point["repaired_finish"]:
            invalid += 1
            assert all(t["steps"] >= 1 for t in repair + original)
        if point["original_finish"] and not point["repaired_finish"]:
            finish += 1
            assert all(t["status"] == "stopped" and t["steps"] == 0 and not t["recovered"] and not t["won"]
                       for t in original)
            assert all(t["steps"] >= 1 for t in repair)
    assert invalid and finish, (invalid, finish)


def test_original_invalid_actions_are_rejected_only_without_the_repair(sentry_run, report):
    checked = 0
    for point in report["points"]:
        if point["kind"] != "hard_repair" or not point["changed"] or point["repaired_finish"]:
            continue
        repaired = first_step(sentry_run, point["arms"]["repair"][0])[1]
        original = first_step(sentry_run, point["arms"]["original"][0])[1]
        assert repaired["valid_action"] and not original["valid_action"]
        checked += 1
    assert checked


def test_the_table_computes(sentry_run, capsys):
    code, out, err = cli(capsys, "sentry", "paired-forks", str(sentry_run), "--points", "8", "--horizon", "5")
    assert code == 0, err
    assert "with repair" in out and "without (original)" in out and "difference" in out
    saved = json.loads((sentry_run / "sentry" / "paired-forks-sentry.json").read_text())
    figures = saved["figures"]
    assert saved["chosen"] == figures["points"] == 8 and saved["horizon"] == 5
    for metric in ("local_recovery", "final_success"):
        for arm in ARMS:
            low, high = figures[metric][arm]["ci95"]
            assert 0.0 <= low <= figures[metric][arm]["rate"] <= high <= 1.0
        diff = figures[metric]["difference"]
        assert diff["ci95"][0] <= diff["difference"] <= diff["ci95"][1] and 0.0 <= diff["p_value"] <= 1.0


def test_bad_input_exits_2(sentry_run, capsys, tmp_path):
    code, _, err = cli(capsys, "sentry", "paired-forks", str(sentry_run), "--harness", "nope")
    assert code == 2 and "no episodes of harness 'nope'" in err
    code, _, err = cli(capsys, "sentry", "paired-forks", str(sentry_run), "--harness", "base")
    assert code == 2 and "made no intervention" in err
    code, _, err = cli(capsys, "sentry", "paired-forks", str(tmp_path))
    assert code == 2 and "not a run directory" in err
    code, _, err = cli(capsys, "sentry", "paired-forks", str(sentry_run), "--agent-option", "invalid=0.1")
    assert code == 2 and "--agent-option needs --agent" in err


# --- the judge ---------------------------------------------------------------------------------------------------

INVALID = Detection("sentry-rules", "action_validity", ("invalid_action",))


class Calls:
    """Keeps the observer hook calls of an episode, to replay them into judges."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    @hookimpl
    def episode_started(self, start):
        self.calls.append(("episode_started", {"start": start}))

    @hookimpl
    def step_completed(self, outcome):
        self.calls.append(("step_completed", {"outcome": outcome}))

    @hookimpl
    def episode_finished(self, end):
        self.calls.append(("episode_finished", {"end": end}))


def judged(script: list[str], rng: random.Random | None = None) -> LocalRecoveryJudge:
    """A judge watching an invalid action at step 0 of tiny-3, fed the calls of `script` (grades fuzzed with rng)."""
    observation, info = tiny_env().reset(seed=0, options={"task": "tiny-3"})
    calls = Calls()
    play(tiny_env(), ScriptedAgent(script), [calls], task="tiny-3", max_steps=6)
    judge = LocalRecoveryJudge(0, INVALID, (), info["goal"], observation, horizon=4)
    for hook, kwargs in calls.calls:
        getattr(judge, hook)(**(fuzz(hook, kwargs, rng) if rng else kwargs))
    return judge


def test_the_judge_sees_a_recurrence_and_a_recovery():
    relapsed = judged(["look", "not a verb"])
    assert not relapsed.recovered and "invalid_action detected again at step 1" in relapsed.evidence
    recovered = judged([])  # the expert plan: grounded, task-relevant progress and no invalid action
    assert recovered.recovered and "task-relevant progress" in recovered.evidence
    idle = judged(["look", "look", "look", "look"])
    assert not idle.recovered and "no grounded progress" in idle.evidence


@pytest.mark.parametrize("script", [[], ["look", "not a verb"], ["look", "look", "look", "look"]])
def test_the_judge_never_reads_the_grade(script):
    plain = judged(script)
    for seed in range(5):
        fuzzed = judged(script, random.Random(seed))
        assert (fuzzed.recovered, fuzzed.evidence) == (plain.recovered, plain.evidence)
