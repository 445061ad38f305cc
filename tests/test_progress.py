"""Progress within episodes: every step played reaches the run's step callback, whoever plays it, and the ETA comes
from the step rate and the steps expected of the episodes left."""

from __future__ import annotations

from pathlib import Path

import pytest

from playground.agents.response_cache import RESPONSE_CACHE_VARIABLE
from playground.core.records import new_record
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.progress import EpisodeDone, RunProgress, StepNote, format_seconds
from playground.run.runner import run
from playground.testing.openai_server import FirstActionModel, ScriptedChatServer

TASKS = [f"tiny-{i}" for i in range(20_000, 20_004)]


def _config(out: Path, agent: str = "noisy", **agent_options) -> RunConfig:
    return RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent=agent,
                     harnesses=["base", "guard-only"], out=str(out), max_steps=12,
                     agent_options=agent_options or {"invalid": 0.3})


def _records(out: Path):
    from playground.run.rundir import load_records

    return load_records(out)


@pytest.mark.parametrize("how", [{}, {"in_flight": 3}, {"workers": 2}], ids=["here", "threads", "processes"])
def test_each_step_played_reaches_the_step_callback(tmp_path, how):
    notes: list[StepNote] = []
    finished: list[str] = []

    def progress(event) -> None:  # the one channel: steps, episodes recorded and messages, in order
        if isinstance(event, StepNote):
            notes.append(event)
        elif isinstance(event, EpisodeDone):
            finished.append(event.record.key)

    run(Host().load(), _config(tmp_path / "run"), progress, **how)
    records = _records(tmp_path / "run")
    steps = {r.key: r.steps for r in records}
    assert sum(steps.values()) > len(records)  # episodes of several steps: notes come within episodes
    played: dict[str, int] = {}
    for note in notes:
        played[note.key] = played.get(note.key, 0) + note.steps
    assert played == steps
    assert sum(note.model_calls for note in notes) == 0  # a scripted agent asks no model
    assert sorted(finished) == sorted(steps)


def test_model_calls_are_counted_as_they_are_made(tmp_path, monkeypatch):
    monkeypatch.setenv(RESPONSE_CACHE_VARIABLE, "off")  # every call reaches the server, which counts them
    model = FirstActionModel()
    notes: list[StepNote] = []
    with ScriptedChatServer(default=model) as server:
        config = _config(tmp_path / "run", agent="llm", base_url=server.base_url, model="m", retries=0)
        run(Host().load(), config, lambda event: notes.append(event) if isinstance(event, StepNote) else None)
    assert model.total > 0
    assert sum(note.model_calls for note in notes) == model.total
    assert sum(note.steps for note in notes) == sum(r.steps for r in _records(tmp_path / "run"))


def test_a_resumed_run_reports_only_the_steps_it_plays(tmp_path):
    out = tmp_path / "run"
    first = _config(out)
    run(Host().load(), RunConfig(**{**first.__dict__, "harnesses": ["base"]}))
    notes: list[StepNote] = []
    run(Host().load(), first, lambda event: notes.append(event) if isinstance(event, StepNote) else None)
    new = {r.key: r.steps for r in _records(out) if r.harness == "guard-only"}
    assert len(new) == len(TASKS)
    assert {note.key for note in notes} == set(new)
    assert sum(note.steps for note in notes) == sum(new.values())


def test_without_model_calls_the_eta_is_the_steps_left_over_the_step_rate():
    tally = RunProgress(episodes=4, max_steps=10)
    assert tally.eta(0.0) is None and tally.work_left() == 40  # nothing finished: the step budget
    # played before a resume: no rate from it
    tally.finished(new_record(harness="h", task_id="a", key="a", status="won", steps=6))
    assert tally.expected_per_episode() == 6 and tally.work_left() == 18
    assert tally.rate(100.0) is None
    for second in range(5):  # episode b plays 5 steps, one a second: 4 steps in the 4 seconds after the first
        tally.step(StepNote("b", 1, 0), float(second))
    assert tally.rate(4.0) == 1.0
    assert tally.work_left() == 1 + 6 + 6  # b has 1 of a's 6 left; c and d have not started
    assert tally.eta(4.0) == 13.0
    tally.finished(new_record(harness="h", task_id="b", key="b", status="won", steps=5))
    assert tally.expected_per_episode() == 5.5 and tally.work_left() == 11
    assert tally.describe(4.0) == "steps 5 · model calls 0 · 1.00 steps/s · ETA 0:11"


def test_the_eta_counts_model_calls_left_judges_included():
    tally = RunProgress(episodes=3, max_steps=10)
    # a, before a resume: 4 steps, 12 calls (8 of them judge calls, 4 after its last step)
    tally.finished(new_record(harness="h", task_id="a", key="a", status="won", steps=4,
                              agent_calls=4, judge_replies={"verifier": {"calls": 8}}))
    assert tally.by_model_calls() and tally.expected_per_episode() == 12
    for second in range(4):  # b: a step and two calls a second
        tally.step(StepNote("b", 1, 2), float(second))
    assert tally.rate(3.0) == 2.0  # 6 calls in the 3 seconds after the first step
    assert tally.work_left() == (12 - 8) + 12  # b: a's calls beyond 8; c: a's total
    assert tally.eta(3.0) == 8.0
    tally.step(StepNote("b", 0, 4), 4.0)  # b's end: the judges' four calls, no step
    # b has made a's 12: nothing finished went further, so one more step's calls (24 calls / 8 steps), and c
    assert tally.work_left() == 3 + 12
    assert tally.describe(4.0).startswith("steps 4 · model calls 12 · ")


def test_an_episode_past_what_was_expected_still_has_work_left():
    tally = RunProgress(episodes=2, max_steps=3)
    for second in range(8):
        tally.step(StepNote("a", 1, 0), float(second))  # a cascade may play more than the budget
    assert tally.work_left() == 3 + 1  # b: the budget; a: one more step, never none while in play
    tally.finished(new_record(harness="h", task_id="b", key="b", status="won", steps=3))
    assert tally.work_left() == 1  # a is past every finished total: one more step
    assert tally.eta(7.0) == 1.0 and format_seconds(tally.eta(7.0)) != "0:00"


def test_seconds_read_as_hours_minutes_and_seconds():
    assert format_seconds(59.6) == "1:00"
    assert format_seconds(3725) == "1:02:05"


def test_the_run_commands_display_counts_the_steps_and_episodes_played(tmp_path):
    from playground.cli.progress import ProgressDisplay

    with ProgressDisplay(episodes=2 * len(TASKS), max_steps=12, hidden=True) as display:
        run(Host().load(), _config(tmp_path / "run"), display.progress)
    steps = sum(r.steps for r in _records(tmp_path / "run"))
    assert display.tally.done == 2 * len(TASKS) and display.tally.steps == steps
    assert display.text().startswith(f"steps {steps} · model calls 0 · ")
    assert display.last.endswith(("won", "lost"))


def test_without_a_terminal_each_finished_episode_is_one_line_and_no_bar_is_drawn(tmp_path, capsys):
    from playground.cli.progress import ProgressDisplay

    with ProgressDisplay(episodes=2 * len(TASKS), max_steps=12, hidden=False, terminal=False) as display:
        run(Host().load(), _config(tmp_path / "run"), display.progress)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 * len(TASKS)  # no bare "episodes" label above them, no redrawn bar
    assert lines[0].startswith(f"episode 1/{2 * len(TASKS)} · steps ") and lines[-1].endswith(("won", "lost"))
