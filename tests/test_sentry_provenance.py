"""Sentry end to end on TextWorld (the real engine): every lesson it stores names where it came from (run, env,
task, episode, step), and that provenance agrees with the trace of that episode: the soft repair at that step,
the verification of that repair which produced the lesson, and the lesson event itself; the playbook holds
exactly the lessons the traces report."""

from __future__ import annotations

import json
import sqlite3

import pytest

from playground.cli.main import main
from playground.run.rundir import load_records
from playground.run.traces import read_trace

pytestmark = pytest.mark.slow

FAILURES = ["repeat=0.2", "stall=0.2", "drift=0.1", "recover_matching=1.0"]


@pytest.fixture(scope="module")
def sentry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sentry-textworld") / "run"
    options = [arg for pair in FAILURES for arg in ("--agent-option", pair)]
    code = main(["run", "--env", "textworld:custom", "--agent", "noisy", *options, "--harness", "sentry",
                 "--episodes", "5", "--out", str(out), "--quiet"])
    assert code == 0
    records = load_records(out)
    traces = {r.task_id: list(read_trace(out / str(r.trace))) for r in records}
    return out, records, traces


def lesson_events(traces):
    return [(task, i, e) for task, events in traces.items() for i, e in enumerate(events) if e["type"] == "lesson"]


def test_the_run_learned_lessons(sentry_run):
    out, records, traces = sentry_run
    assert len(records) == 5 and all(r.status != "error" for r in records)
    summary = json.loads((out / "summary.json").read_text())
    lessons = lesson_events(traces)
    assert lessons, "the noisy agent's failures should have produced at least one verified lesson"
    assert summary["harnesses"]["sentry"]["lessons_added"] == len(lessons)


def test_each_lessons_provenance_matches_its_trace(sentry_run):
    out, records, traces = sentry_run
    config = json.loads((out / "config.json").read_text())
    for task, index, lesson in lesson_events(traces):
        events = traces[task]
        header = events[0]
        provenance = lesson["provenance"]
        # run, env, task and episode are the ones of the trace the lesson event is in
        assert provenance["run"] == header["run_id"] == config["run_id"]
        assert provenance["env"] == header["env"] == "textworld"
        assert provenance["task"] == task == header["task_id"]
        assert provenance["episode"] == header["episode_id"]
        step = provenance["step"]
        # the soft repair Sentry made at that step, for this failure
        repairs = [e for e in events[:index] if e["type"] == "intervention" and e["step"] == step
                   and e["kind"] == "soft_repair"]
        assert repairs, (task, step)
        detected = {(d["failure_type"], label) for r in repairs for d in r["detections"] for label in d["labels"]}
        assert {(lesson["failure_type"], label) for label in lesson["labels"]} <= detected, (task, step)
        # the verification of that repair which produced the lesson, just before the lesson event
        verification = events[index - 1]
        assert verification["type"] == "verification" and verification["repair_step"] == step
        assert verification["failure_type"] == lesson["failure_type"]
        assert verification["lesson"] is not None and verification["lesson"]["id"] == lesson["id"]
        # ... judged after the repair: after the env ran the repaired step (at a later step, or when the
        # episode ended inside the watch window)
        later_steps = [e["step"] for e in events[:index] if e["type"] == "step"]
        assert later_steps and later_steps[-1] >= step
        repair_at = events.index(repairs[-1])
        assert repair_at < index - 1
        assert any(e["type"] == "step" and e["step"] == step for e in events[repair_at:index])  # the repaired step ran


def test_the_playbook_holds_exactly_the_lessons_the_traces_report(sentry_run):
    out, records, traces = sentry_run
    with sqlite3.connect(out / "playbooks" / "sentry.sqlite") as db:
        rows = db.execute("SELECT id, failure_type, label_key, principle, provenance FROM lessons ORDER BY id").fetchall()
    stored = {row[0]: (row[1], row[2], row[3], json.loads(row[4])) for row in rows}
    reported = {e["id"]: (e["failure_type"], ",".join(sorted(e["labels"])), e["principle"], e["provenance"])
                for _, _, e in lesson_events(traces)}
    assert stored == reported
