"""Typed trace events (playground.core.events): every type written and read back equal, version 1 traces (those
committed under docs/runs/) upgraded on reading, newer versions refused with the file named."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from pathlib import Path

import pytest

from playground.core.events import (
    EVENT_CLASSES,
    TRACE_VERSION,
    V1_DEFAULTS,
    AttemptVerdictEvent,
    CheckpointEvent,
    DetectionEvent,
    EndEvent,
    ErrorEvent,
    Event,
    EventError,
    HeaderEvent,
    InterventionEvent,
    JudgeCallEvent,
    LessonEvent,
    PromptEvent,
    ProposalEvent,
    ResetEvent,
    RollbackEvent,
    StepEvent,
    VerificationEvent,
    from_record,
    map_strings,
    shifted,
    to_record,
    upgrade_v1,
)
from playground.run.forks import load_episode
from playground.run.traces import TraceError, TraceWriter, read_events, read_jsonl, read_trace

RUNS = Path(__file__).resolve().parent.parent / "docs" / "runs"

EVERY_EVENT: list[Event] = [
    HeaderEvent(env="tiny", task_set="default", task_id="tiny-3", seed=7, harness="sentry", agent="llm", max_steps=9,
                run_id="r1", split="test", version="1.0", episode_id="r1:sentry:tiny-3", params={"horizon": 3},
                interventions=["sentry"], agent_options={"temperature": 0.0}, attempt=1, trial=2,
                extra={"seeds": "train 0-9", "generator": {"rooms": 2}}),
    ResetEvent(goal="find the key", observation="A hall.", admissible_actions=["look", "go east"], max_score=1.0),
    PromptEvent(hash="abc123", text="a standing note"),
    CheckpointEvent(step=0, id="c0", branch=0, parent=None, dropped=["c1"]),
    ProposalEvent(step=0, attempt=1, thought="east, then", action="go east", finish=False, prompt_tokens=12,
                  completion_tokens=3, intervention_chars=40, seconds=0.25, admissible_actions=["look", "go east"],
                  message={"kind": "hint", "text": "try east"}, notes=["abc123"],
                  prompt=[{"role": "system", "hash": "abc123"}], env_admissible_actions=["look", "go east", "wait"],
                  admissible_complete=False, schema_problems=[{"kind": "unknown_api", "text": "x", "message": "no"}],
                  injected={"label": "stall", "streak": 1, "planned": "look"}),
    DetectionEvent(step=0, attempt=0, detector="loop", failure_type="progress", labels=["planning_stall"],
                   confidence=0.5, evidence="same action twice", subtype="repeat"),
    InterventionEvent(step=0, attempt=0, plugin="sentry", kind="soft_repair", message={"text": "try east"},
                      detections=[{"detector": "loop", "labels": ["planning_stall"]}], details={"lessons": [3]}),
    RollbackEvent(to_step=0, restored=True, checkpoint="c0", branch=1, from_step=2),
    StepEvent(step=0, action="go east", observation="A kitchen.", reward=1.0, score=1.0, valid_action=True, won=True,
              terminated=True, truncated=False, kind="move", failure={"kind": "timeout"}, structure={"calls": []}),
    VerificationEvent(plugin="sentry", repair_step=0, failure_type="progress", verdict="resolved", evidence="moved",
                      lesson={"id": 3}),
    LessonEvent(id=3, failure_type="progress", labels=["planning_stall"], trigger="when stuck", principle="go on",
                extra={"playbook": "p.db", "provenance": {"run": "r1"}}),
    JudgeCallEvent(role="sentry.verifier", prompt_tokens=30, completion_tokens=4, usable=False, mode="grammar"),
    AttemptVerdictEvent(verifier="env:won", passed=True, why="the env says so"),
    ErrorEvent(message="boom", plugin="sentry", hook="step_completed", fatal=False),
    EndEvent(status="won", won=True, steps=1, error=None, score=1.0, max_score=1.0),
]


def _write(path: Path, events: list[Event]) -> Path:
    header, *rest = events
    writer = TraceWriter(path, header)
    for event in rest:
        writer.emit(event)
    writer.close()
    return path


def _raw(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_trace_of_every_event_type_reads_back_as_equal_objects(tmp_path):
    assert {type(e) for e in EVERY_EVENT} == set(EVENT_CLASSES.values())  # the list covers every type
    events = read_events(_write(tmp_path / "t.jsonl", EVERY_EVENT))
    assert events == EVERY_EVENT
    assert all(e.t is not None for e in events)  # stamped by the writer (not compared)
    assert read_trace(tmp_path / "t.jsonl")[0]["trace_version"] == TRACE_VERSION


def test_the_defaults_of_every_type_read_back_too(tmp_path):
    """Each type with only what it requires: optional fields stay out of the record and read back as None."""
    required = {name: {f.name: _sample(f) for f in dataclasses.fields(cls)
                       if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
                for name, cls in EVENT_CLASSES.items()}
    events = [cls(**required[name]) for name, cls in EVENT_CLASSES.items()]
    events.sort(key=lambda e: not isinstance(e, HeaderEvent))
    assert read_events(_write(tmp_path / "t.jsonl", events)) == events
    records = read_trace(tmp_path / "t.jsonl")
    assert "kind" not in next(r for r in records if r["type"] == "step")  # an optional field left out while None


def _sample(f: dataclasses.Field):
    return {"str": "x", "int": 1, "int | None": 1, "bool": True}[str(f.type)]


def test_the_json_keys_are_the_fields_names(tmp_path):
    records = read_trace(_write(tmp_path / "t.jsonl", EVERY_EVENT))
    step = next(r for r in records if r["type"] == "step")
    assert {k: step[k] for k in ("step", "action", "observation", "valid_action", "kind")} == {
        "step": 0, "action": "go east", "observation": "A kitchen.", "valid_action": True, "kind": "move"}
    header = records[0]
    assert header["seeds"] == "train 0-9" and "extra" not in header  # extra keys are written flat


@pytest.mark.parametrize("trace", sorted(p.relative_to(RUNS).as_posix() for p in RUNS.glob("*/traces/*/*.jsonl"))
                         or ["none"])
def test_the_version_1_traces_under_docs_runs_still_read(trace):
    path = RUNS / trace
    if not path.is_file():
        pytest.skip("no uncompressed traces under docs/runs")
    _check_version_1(path)


ARCHIVES = sorted(p.relative_to(RUNS).as_posix() for p in RUNS.rglob("traces.tar.gz"))


@pytest.mark.parametrize("archive", ARCHIVES)
def test_the_compressed_traces_under_docs_runs_still_read(tmp_path, archive):
    """Every compressed run a docs figure comes from reads: version 1 traces through the upgrade, later ones as
    written."""
    with tarfile.open(RUNS / archive) as opened:
        opened.extractall(tmp_path, filter="data")
    paths = sorted(tmp_path.rglob("*.jsonl"))
    assert paths
    for path in paths[:40]:
        _check_reads(path)


def test_docs_runs_keep_a_compressed_version_1_run():
    """The upgrade stays tested on real traces: some archive under docs/runs was written before versions."""
    def is_version_1(archive: str) -> bool:
        with tarfile.open(RUNS / archive) as opened:
            member = next(m for m in opened.getmembers() if m.name.endswith(".jsonl"))
            return "trace_version" not in json.loads(opened.extractfile(member).readline())

    assert any(is_version_1(archive) for archive in ARCHIVES)


def _check_version_1(path: Path) -> None:
    assert "trace_version" not in next(iter(read_jsonl(path)))  # written before versions
    _check_reads(path)


def _check_reads(path: Path) -> None:
    """A trace reads as the version its header says (none: 1, through the upgrade), with nothing lost or added."""
    records = list(read_jsonl(path))
    written = records[0].get("trace_version", 1)
    events = read_events(path)
    assert isinstance(events[0], HeaderEvent) and events[0].trace_version == written
    for record, event in zip(records, events, strict=True):
        again = to_record(event)
        if written == 1 and isinstance(event, HeaderEvent):
            again.pop("trace_version")  # the upgrade adds it
        assert again == record  # nothing lost, nothing added
    episode = load_episode(path)
    assert episode.end is not None and episode.status == episode.end.status


def test_a_version_1_record_with_only_its_type_reads_through_the_upgrade(tmp_path):
    records = [{"type": name} for name in EVENT_CLASSES]
    events = read_events(_raw(tmp_path / "t.jsonl", records))
    assert [e.TYPE for e in events] == list(EVENT_CLASSES)
    step = next(e for e in events if isinstance(e, StepEvent))
    assert (step.valid_action, step.reward, step.kind) == (True, 0.0, None)


def test_the_upgrade_names_every_field_version_2_requires():
    for name, cls in EVENT_CLASSES.items():
        required = {f.name for f in dataclasses.fields(cls)
                    if f.name not in ("t", "extra") and not f.metadata.get("optional")}
        assert required <= set(V1_DEFAULTS[name]), name


def test_a_version_1_rollback_naming_its_target_step_is_upgraded():
    assert upgrade_v1({"type": "rollback", "step": 4})["to_step"] == 4
    assert from_record({"type": "rollback", "step": 4}, 1) == RollbackEvent(to_step=4, from_step=None)


def test_a_version_2_record_lacking_a_field_is_refused_with_file_and_line(tmp_path):
    header = to_record(EVERY_EVENT[0])
    path = _raw(tmp_path / "t.jsonl", [header, {"type": "step", "step": 0, "action": "look"}])
    with pytest.raises(TraceError, match=r"t\.jsonl:2: a step event lacks 'observation'"):
        read_events(path)


def test_a_field_of_the_wrong_json_type_is_refused(tmp_path):
    header = to_record(EVERY_EVENT[0])
    path = _raw(tmp_path / "t.jsonl", [header, {**to_record(EVERY_EVENT[8]), "step": "zero"}])
    with pytest.raises(TraceError, match=r"t\.jsonl:2: a step event's 'step' is 'zero', expected int"):
        read_events(path)


def test_a_newer_trace_version_is_refused_naming_the_file(tmp_path):
    path = _raw(tmp_path / "new.jsonl", [{**to_record(EVERY_EVENT[0]), "trace_version": TRACE_VERSION + 1}])
    for reader in (read_events, read_trace, load_episode):
        with pytest.raises(TraceError, match=rf"new\.jsonl:1: trace format version {TRACE_VERSION + 1} is newer"):
            reader(path)


def test_an_unknown_event_type_is_refused(tmp_path):
    path = _raw(tmp_path / "t.jsonl", [to_record(EVERY_EVENT[0]), {"type": "telemetry"}])
    with pytest.raises(TraceError, match="unknown event type 'telemetry'"):
        read_events(path)


def test_the_writer_takes_events_only(tmp_path):
    writer = TraceWriter(tmp_path / "t.jsonl", EVERY_EVENT[0])
    with pytest.raises(ValueError, match="not a trace event"):
        writer.emit({"type": "step"})  # type: ignore[arg-type]
    writer.close()
    with pytest.raises(ValueError, match="header"):
        TraceWriter(tmp_path / "u.jsonl", EVERY_EVENT[1])  # type: ignore[arg-type]


def test_extra_keys_may_not_repeat_declared_ones():
    with pytest.raises(EventError, match="repeat declared ones: action"):
        StepEvent(step=0, action="a", observation="o", extra={"action": "b"})
    event = InterventionEvent.from_fields({"plugin": "p", "kind": "k", "stop": True, "novel": 1}, step=2)
    assert event.step == 2 and event.extra == {"novel": 1}


def test_values_are_json_values():
    event = ResetEvent(goal="g", observation="o", admissible_actions=("a", "b"))
    assert event.admissible_actions == ["a", "b"]


def test_shifted_moves_the_step_numbered_fields():
    assert shifted(StepEvent(step=1, action="a", observation="o"), 5).step == 6
    assert shifted(RollbackEvent(to_step=2), 5).to_step == 7
    assert shifted(RollbackEvent(to_step=2, from_step=4), 5).from_step == 9  # where the rollback left from, too
    assert shifted(RollbackEvent(to_step=2), 5).from_step is None
    assert shifted(VerificationEvent(repair_step=1), 5).repair_step == 6
    assert shifted(EVERY_EVENT[0], 5) == EVERY_EVENT[0]


def test_map_strings_reaches_nested_texts():
    event = map_strings(EVERY_EVENT[6], str.upper)
    assert event.message == {"TEXT": "TRY EAST"} and event.plugin == "SENTRY" and event.details == {"LESSONS": [3]}
