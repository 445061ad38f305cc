"""The run's files as typed, versioned models: episode records, summary.json and lock.json.

Every file of a run written before the models existed (docs/runs) reads through its upgrade step; a value of the
wrong type, or a version newer than this playground's, is refused with an error that names the field; what the
runner writes names its version and reads back equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.core.records import (
    RECORD_VERSION,
    EpisodeRecord,
    RecordError,
    episode_key,
    new_record,
    read_record,
    record_problem,
)
from playground.core.run_summary import SUMMARY_VERSION, SummaryError, read_summary
from playground.run.lock import LockError, read_lock

RUNS = Path(__file__).resolve().parents[1] / "docs" / "runs"


def _run_dirs() -> list[Path]:
    """The committed run directories (a bench's own log folder has no env in its config)."""
    return [config.parent for config in sorted(RUNS.rglob("config.json"))
            if "env" in json.loads(config.read_text())]


def test_every_committed_summary_and_lock_reads_through_the_upgrade():
    dirs = _run_dirs()
    assert len(dirs) > 50
    summaries = locks = 0
    for run in dirs:
        if (run / "summary.json").exists():
            summary = read_summary(json.loads((run / "summary.json").read_text()))
            assert summary.summary_version == SUMMARY_VERSION and summary.harnesses
            summaries += 1
        if (run / "lock.json").exists():
            read_lock(run / "lock.json")
            locks += 1
    assert summaries > 50 and locks > 50


def test_an_old_record_reads_with_the_defaults_its_readers_assumed():
    old = {"harness": "base", "task_id": "t", "status": "won", "won": True, "steps": 3, "key": "base/t",
           "interventions": None}  # version 1 could write null for "none"
    record = read_record(old)
    assert record.record_version == RECORD_VERSION and record.interventions == {} and record.trial == 1
    assert record.lacks("failures") and not record.lacks("steps")  # counted from the trace by the report


@pytest.mark.parametrize(("change", "named"), [
    ({"won": "yes"}, "'won'"),
    ({"steps": True}, "'steps'"),
    ({"seconds": float("nan")}, "'seconds'"),
    ({"trial": 0}, "'trial'"),
    ({"interventions": {"reask": 1.5}}, "'interventions.reask'"),
    ({"attempts": [{"won": 1}]}, "'attempts.0.won'"),
    ({"record_version": RECORD_VERSION + 1}, "newer than this playground reads"),
])
def test_a_bad_record_is_refused_naming_the_field(change, named):
    data = {"harness": "base", "task_id": "t", "status": "won", "key": "base/t", **change}
    with pytest.raises(RecordError, match=named.replace(".", r"\.")):
        read_record(data)
    assert named.strip("'").split(".")[0] in record_problem(data) or "newer" in record_problem(data)


def test_a_record_round_trips_and_keeps_keys_it_does_not_declare():
    record = new_record(harness="h", task_id="t", trial=2, status="lost", steps=4, cost=1.5, plugin_count=7)
    assert record.key == episode_key("h", "t", 2) == "h/t#2"
    data = json.loads(json.dumps(record.as_json()))
    assert data["record_version"] == RECORD_VERSION and data["plugin_count"] == 7 and "verified" not in data
    again = read_record(data)
    assert again == record and again.extra == {"plugin_count": 7} and again.value("plugin_count") == 7
    with pytest.raises(Exception):
        record.won = True  # frozen: derive a changed record with model_copy
    assert isinstance(record.model_copy(update={"won": True}), EpisodeRecord)


@pytest.mark.parametrize(("change", "named"), [
    ({"harnesses": {"base": {"episodes": "two", "success_rate": 0.5, "success_ci95": [0.1, 0.9]}}},
     "'harnesses.base.episodes'"),
    ({"interrupted": "yes"}, "'interrupted'"),
    ({"summary_version": SUMMARY_VERSION + 1}, "newer than this playground reads"),
])
def test_a_bad_summary_is_refused_naming_the_field(change, named):
    data = {"env": "tiny:default", "agent": "noisy", "tasks": 2,
            "harnesses": {"base": {"episodes": 2, "success_rate": 0.5, "success_ci95": [0.1, 0.9]}}, **change}
    with pytest.raises(SummaryError, match=named.replace(".", r"\.")):
        read_summary(data)


def test_a_lock_of_a_newer_version_or_a_wrong_shape_is_refused(tmp_path):
    lock = json.loads((_run_dirs()[0] / "lock.json").read_text())
    for change, named in (({"lock_version": 99}, "lock_version 99"), ({"distributions": {"x": 1}}, "distributions")):
        path = tmp_path / "lock.json"
        path.write_text(json.dumps({**lock, **change}))
        with pytest.raises(LockError, match=named):
            read_lock(path)


def test_a_run_writes_versioned_files_that_read_back(tmp_path):
    from playground.host.manager import Host
    from playground.run.config import RunConfig
    from playground.run.rundir import load_records
    from playground.run.runner import run

    out = tmp_path / "run"
    summary = run(Host().load(), RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001"],
                                           harnesses=["base"], agent="noisy", out=str(out), max_steps=5))
    written = json.loads((out / "summary.json").read_text())
    assert written == summary and written["summary_version"] == SUMMARY_VERSION
    assert read_summary(written).harnesses["base"].episodes == 2
    records = load_records(out)
    assert [r.record_version for r in records] == [RECORD_VERSION] * 2
    assert sum(r.won for r in records) == round(summary["harnesses"]["base"]["success_rate"] * 2)
    read_lock(out / "lock.json")
