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


PAIRED = """
name = "paired"
title = "paired forks over a tiny noisy run"

[[grids]]
name = "run"
env = "tiny"
episodes = 12
max_steps = 12
agent = "noisy"
agent_options = { invalid = 0.3, stop = 0.1 }
harnesses = ["base", "sentry"]

[[pipelines]]
name = "forks"
grid = "run"
steps = [{ step = "sentry.paired_forks", params = { points = 8, horizon = 5 } }]
"""


def test_a_study_pipeline_forks_and_its_columns_give_the_report(tmp_path):
    from playground.core.study_file import load_study
    from playground.run.study import run_study, study_table

    host = get_host()
    (tmp_path / "paired.toml").write_text(PAIRED)
    study = load_study(tmp_path / "paired.toml")
    run_study(host, study, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "forks" / "sentry" / "paired-forks-sentry.json").read_text())
    figures = saved["figures"]
    assert saved["chosen"] == figures["points"] == 8 and saved["horizon"] == 5
    for metric in ("local_recovery", "final_success"):
        for arm in ARMS:
            low, high = figures[metric][arm]["ci95"]
            assert 0.0 <= low <= figures[metric][arm]["rate"] <= high <= 1.0
        diff = figures[metric]["difference"]
        assert diff["ci95"][0] <= diff["difference"] <= diff["ci95"][1] and 0.0 <= diff["p_value"] <= 1.0
    cells = {(c.grid, c.harness): c.figures for c in study_table(study, tmp_path / "out",
                                                                 {f.name: f for f in host.figures})}
    columns = cells[("forks", "sentry")]
    assert columns["paired_points"] == 8
    assert columns["paired_local_recovery[repair]"] == figures["local_recovery"]["repair"]["rate"]
    assert columns["paired_local_recovery[difference high]"] == figures["local_recovery"]["difference"]["ci95"][1]
    assert columns.get("paired_final_success[original]", 0.0) == figures["final_success"]["original"]["rate"]
    assert cells[("forks", "base")].get("paired_points") is None  # base's row: no forks of base
    assert cells[("run", "sentry")].get("paired_points") is None  # the grid's own run was not forked


@pytest.mark.parametrize("params, words", [
    ('harness = "nope"', "no episodes of harness 'nope'"),
    ('harness = "base"', "made no intervention"),
    ("agent_options = { invalid = 0.1 }", "agent_options need an agent"),
])
def test_a_bad_paired_forks_step_is_named_by_the_study(tmp_path, params, words):
    from playground.core.study_file import StudyError, load_study
    from playground.run.study import run_study

    (tmp_path / "paired.toml").write_text(PAIRED.replace("points = 8, horizon = 5", params))
    with pytest.raises(StudyError, match=f"pipeline 'forks': PairedForkError: .*{words}"):
        run_study(get_host(), load_study(tmp_path / "paired.toml"), tmp_path / "out")


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


def test_the_committed_study_re_derives_the_published_tiny_row():
    """docs/methods/sentry.md's tiny row (78.0% against 60.5%, +17.5 pp [+12.3, +22.8]; final success 90.0% against
    76.5%) through the study table, from the committed run files."""
    from playground.core.study_file import load_study
    from playground.run.study import study_table

    host = get_host()
    study = load_study(host.studies.get("sentry-paired-forks").path)
    root = Path(__file__).resolve().parents[1] / "docs" / "runs" / "sentry-paired-forks"
    forks = next(c for c in study_table(study, root, {f.name: f for f in host.figures}) if c.grid == "forks")
    got = {key: round(100 * value, 1) for key, value in forks.figures.items() if key.startswith("paired_") and
           "[" in key}
    assert forks.figures["paired_points"] == 200 and forks.figures["paired_changed"] == 187 / 200
    assert [got[f"paired_local_recovery[{k}]"] for k in ("repair", "original", "difference", "difference low",
                                                          "difference high")] == [78.0, 60.5, 17.5, 12.3, 22.8]
    assert [got[f"paired_final_success[{k}]"] for k in ("repair", "original", "difference")] == [90.0, 76.5, 13.5]
