"""One description per trace event (`playground.run.event_text`) serves the three renderers of traces: the
terminal viewer (`playground view`), the HTML transcript and the report's episode pages.

Every event class has a describer; a trace holding one event of each class (a tiny-env episode played with
`playground.testing.play`, the events it did not emit added by hand) comes out of all three renderers with each shown
event's headline; and a planted change to the step describer shows in all three, so none words events itself.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from playground.core.events import (
    EVENT_CLASSES,
    AttemptVerdictEvent,
    CheckpointEvent,
    DetectionEvent,
    ErrorEvent,
    Event,
    HeaderEvent,
    InterventionEvent,
    JudgeCallEvent,
    LessonEvent,
    PromptEvent,
    ProposalEvent,
    RollbackEvent,
    StepEvent,
    VerificationEvent,
)
from playground.core.records import read_record
from playground.run import event_text
from playground.run.event_text import DESCRIBERS, SHORT, Description, describe_event

LONG = "a very long observation " * 40  # over SHORT characters: the terminal cuts it, the HTML pages keep it whole

# The events a tiny episode does not emit, one of each class, with texts to find in the renderers' output.
ADDED: list[Event] = [
    CheckpointEvent(step=0, id="ck-0"),
    PromptEvent(hash="h-note", text="a note the agent saw"),
    ProposalEvent(step=1, attempt=1, action="look around", thought="again", prompt_tokens=12, completion_tokens=3,
                  schema_problems=[{"message": "bad argument x"}]),
    DetectionEvent(step=1, detector="loop-detector", failure_type="repetition", labels=["repetition_or_looping"],
                   confidence=0.8, evidence="the same action twice"),
    InterventionEvent(step=1, plugin="fixer", kind="reask", message={"text": "try something else"},
                      details={"lessons": [3]}),
    InterventionEvent(step=1, plugin="fixer", kind="replace", action="go east"),
    RollbackEvent(to_step=0, from_step=1, checkpoint="ck-0", branch=1),
    StepEvent(step=1, action="dance", observation=LONG, valid_action=False),
    VerificationEvent(plugin="fixer", repair_step=1, failure_type="repetition", verdict="resolved",
                      evidence="it moved on"),
    VerificationEvent(plugin="fixer", repair_step=1, failure_type="repetition", verdict="unresolved"),
    LessonEvent(id=3, failure_type="repetition", labels=["repetition_or_looping"], trigger="you repeat yourself",
                principle="try a new action"),
    ErrorEvent(message="a plugin failed <badly>", plugin="fixer", hook="after_step", fatal=False),
    JudgeCallEvent(role="verifier", prompt_tokens=10, completion_tokens=2),
    AttemptVerdictEvent(verifier="checker", passed=True, why="the goal is met"),
]


def test_every_event_class_has_a_describer():
    missing = [name for name, cls in EVENT_CLASSES.items() if cls not in DESCRIBERS]
    assert not missing, f"event classes without a describer in playground.run.event_text: {missing}"
    header = HeaderEvent(env="tiny", task_id="t", seed=0)
    assert isinstance(describe_event(header), Description) and not describe_event(header).shown


def test_a_class_without_a_describer_is_caught_and_not_shown(monkeypatch):
    monkeypatch.delitem(DESCRIBERS, LessonEvent)
    assert LessonEvent in EVENT_CLASSES.values() and LessonEvent not in DESCRIBERS  # the test above would fail
    assert describe_event(LessonEvent(id=1)) == Description("event", "lesson", shown=False)


def test_long_texts_are_cut_unless_full():
    step = StepEvent(step=0, action="look", observation=LONG)
    (_, cut), = describe_event(step).body
    (_, whole), = describe_event(step, full=True).body
    assert whole == LONG and cut.startswith(LONG[:SHORT]) and f"{len(LONG) - SHORT} more characters" in cut


@pytest.fixture
def episode(tmp_path) -> tuple[Path, dict, list[Event]]:
    """A run directory holding one episode whose trace has an event of every class: a tiny episode played, the
    events it lacks added after its first step."""
    from playground.run.traces import TraceWriter
    from playground.testing.play import ScriptedAgent, play, tiny_env

    played = play(tiny_env(), ScriptedAgent(["look", "go east"]), max_steps=3).trace
    first_step = next(i for i, e in enumerate(played) if isinstance(e, StepEvent))
    header = HeaderEvent(env="tiny", task_set="default", task_id="tiny-0", seed=0, harness="test",
                         agent="scripted", interventions=["fixer"])
    events = [header, *played[:first_step + 1], *ADDED, *played[first_step + 1:]]
    assert {type(e) for e in events} == set(EVENT_CLASSES.values()), "a new event class needs an example here"
    run = tmp_path / "run"
    writer = TraceWriter(run / "traces" / "episode.jsonl", header)
    for event in events[1:]:
        writer.emit(event)
    writer.close()
    record = {"key": "test/tiny-0", "episode_id": "e0", "harness": "test", "task_id": "tiny-0", "seed": 0,
              "trial": 1, "status": "lost", "won": False, "steps": 3, "trace": "traces/episode.jsonl"}
    (run / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    return run, read_record(record), events


def _flat(text: str) -> str:
    return " ".join(text.split())


def _page_text(page: str) -> str:
    """What an HTML page reads as: its tags dropped, its entities decoded, runs of white space made one space."""
    return _flat(html.unescape(re.sub(r"<[^>]+>", " ", page)))


def rendered(run: Path, record: dict, events: list[Event], tmp_path: Path) -> dict[str, str]:
    """The episode as the terminal viewer, the HTML transcript and the report's episode page show it (plain text)."""
    from playground.cli.view import render_episode
    from playground.run.html_report import Run, TranscriptPage
    from playground.run.transcript import render_transcript

    screen = Console(record=True, width=2000, color_system=None)
    render_episode(screen, run, record)
    page = tmp_path / "report-transcripts" / "episode.html"
    TranscriptPage(page, Run(run, "run", {}, None, [record]), record, [run / record.trace], "../report.html").write()
    return {"view": _flat(screen.export_text()),
            "transcript": _page_text(render_transcript("t", [], [("", events)], "../report.html")),
            "report": _page_text(page.read_text())}


def test_the_three_renderers_show_every_event_as_described(episode, tmp_path):
    run, record, events = episode
    outputs = rendered(run, record, events, tmp_path)
    for event in events:
        shown = describe_event(event)
        if not shown.shown:
            for name, text in outputs.items():
                assert not shown.subject or shown.headline() not in text, (name, shown)
            continue
        for name, text in outputs.items():
            assert _flat(shown.headline()) in text, (name, shown.headline())
            assert not shown.alert or shown.alert in text, (name, shown.alert)
            for problem in shown.problems:
                assert problem in text, (name, problem)
            whole = describe_event(event, full=True).body
            for label, body in (shown.body if name == "view" else whole):
                assert _flat(body) in text, (name, body[:80])
    assert f"{len(LONG) - SHORT} more characters" in outputs["view"]
    assert _flat(LONG) in outputs["transcript"] and _flat(LONG) in outputs["report"]
    assert "step 1 propose look around re-ask 1 (12+3 tokens)" in outputs["view"]
    assert "→ dance (rejected by the env)" in outputs["view"]
    assert "✓ verdict resolved on the repair of repetition at step 1 by fixer" in outputs["transcript"]
    assert "a plugin failed <badly>" in outputs["report"]  # escaped on the page, read back here


def test_a_planted_description_shows_in_all_three(episode, tmp_path, monkeypatch):
    run, record, events = episode

    def planted(event: StepEvent, full: bool) -> Description:
        return Description("step", "PLANTED did", event.action, "as planted", body=(("seen", "PLANTED BODY"),))

    monkeypatch.setitem(event_text.DESCRIBERS, StepEvent, planted)
    outputs = rendered(run, record, events, tmp_path)
    steps = sum(isinstance(e, StepEvent) for e in events)
    for name, text in outputs.items():
        assert text.count("PLANTED did") == steps, name
        assert "PLANTED did dance as planted" in text and "seen: PLANTED BODY" in text, name
        assert "a very long observation" not in text, name  # what the step describer no longer says is gone
    page = (tmp_path / "report-transcripts" / "episode.html").read_text()
    assert page.count('<div class="ev step">') == steps
