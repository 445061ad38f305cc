"""Issue 56, item 9: a resume notices an episode whose record is in episodes.jsonl but whose trace is gone. It is
refused, naming the episodes (a few and a count), until `--repair` moves those records to
episodes.quarantine.jsonl, as it moves bad lines, and plays the episodes again."""

from __future__ import annotations

import json
import shutil

from playground.core.records import read_record
from tests.conftest import cli

RUN = ["run", "--env", "tiny", "--agent", "noisy", "--harness", "base", "--quiet"]


def _records(out):
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_a_deleted_trace_is_refused_then_replayed_by_repair(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli(capsys, *RUN, "--episodes", "4", "--out", str(out))
    assert code == 0, err
    (out / "traces" / "base" / "tiny-20001.jsonl").unlink()
    before = (out / "episodes.jsonl").read_bytes()

    code, _, err = cli(capsys, *RUN, "--episodes", "4", "--out", str(out))
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ") and "'base/tiny-20001'" in last and "--repair" in last, err
    assert (out / "episodes.jsonl").read_bytes() == before  # refused: nothing touched
    assert not (out / "traces" / "base" / "tiny-20001.jsonl").exists()

    code, _, err = cli(capsys, *RUN, "--episodes", "4", "--out", str(out), "--repair")
    assert code == 0, err
    assert (out / "traces" / "base" / "tiny-20001.jsonl").is_file()  # played again
    records = _records(out)
    assert sorted(r["key"] for r in records) == [f"base/tiny-2000{i}" for i in range(4)]
    assert records[-1]["key"] == "base/tiny-20001"
    quarantined = [json.loads(line) for line in (out / "episodes.quarantine.jsonl").read_text().splitlines()]
    assert [q["line"] for q in quarantined] == [2] and "trace" in quarantined[0]["problem"]
    assert json.loads(quarantined[0]["raw"])["key"] == "base/tiny-20001"
    assert json.loads((out / "summary.json").read_text())["harnesses"]["base"]["episodes"] == 4

    code, _, err = cli(capsys, *RUN, "--episodes", "4", "--out", str(out))  # now a plain resume: nothing to do
    assert code == 0, err
    assert len(_records(out)) == 4


def test_many_missing_traces_are_named_by_a_few_and_a_count(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli(capsys, *RUN, "--episodes", "12", "--out", str(out))
    assert code == 0, err
    shutil.rmtree(out / "traces")
    code, _, err = cli(capsys, *RUN, "--episodes", "12", "--out", str(out))
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert "12" in last and "--repair" in last and len(last) < 600, last
    assert sum(f"tiny-2000{i}'" in last or f"tiny-2001{i}'" in last for i in range(10)) <= 3, last

    code, _, err = cli(capsys, *RUN, "--episodes", "12", "--out", str(out), "--repair")
    assert code == 0, err
    assert len(_records(out)) == 12 and len(list((out / "traces" / "base").glob("*.jsonl"))) == 12


def test_a_record_with_a_deleted_attempt_trace_is_replayed_too(tmp_path):
    from playground.run.rundir import RunDir, RunDirError

    config = {"env": "tiny", "harnesses": ["c"]}
    rundir = RunDir(tmp_path, config)
    (tmp_path / "traces" / "c").mkdir(parents=True)
    (tmp_path / "traces" / "c" / "t.jsonl").write_text("{}\n")
    rundir.record(read_record({"key": "c/t", "harness": "c", "task_id": "t", "status": "won", "won": True,
                   "trace": "traces/c/t.jsonl", "attempts": [{"trace": "traces/c/t.jsonl"},
                                                             {"trace": "traces/c/t.attempt2.jsonl"}]}))
    rundir.close()
    try:
        RunDir(tmp_path, config).close()
    except RunDirError as exc:
        assert "'c/t'" in str(exc) and "t.attempt2.jsonl" in str(exc)
    else:
        raise AssertionError("a record whose attempt trace is gone was counted as finished")
    rundir = RunDir(tmp_path, config, repair=True)
    assert not rundir.is_finished("c/t") and rundir.missing_traces == ["c/t"]
    rundir.close()


def test_a_run_kept_without_its_traces_on_purpose_resumes(capsys, tmp_path):
    """A run directory packed for a repository (traces left out, `traces-left-out.txt` says so) keeps its finished
    episodes on resume, as the committed run files under docs/runs do."""
    from playground.run.rundir import TRACES_LEFT_OUT

    out = tmp_path / "run"
    code, _, err = cli(capsys, *RUN, "--episodes", "3", "--out", str(out))
    assert code == 0, err
    shutil.rmtree(out / "traces")
    (out / TRACES_LEFT_OUT).write_text("left out on purpose\n")
    code, _, err = cli(capsys, *RUN, "--episodes", "3", "--out", str(out))
    assert code == 0, err
    assert len(_records(out)) == 3 and not (out / "traces").exists()  # nothing played again


def test_every_committed_run_directory_resumes_without_its_traces():
    """docs/runs keeps run files without (all) their traces; each such directory says so."""
    from pathlib import Path

    from playground.run.rundir import TRACES_LEFT_OUT, missing_trace, read_episodes

    runs = Path(__file__).resolve().parents[1] / "docs" / "runs"
    unmarked = []
    for episodes in runs.rglob("episodes.jsonl"):
        config = episodes.parent / "config.json"
        if not config.exists() or "env" not in json.loads(config.read_text()):  # a bench's log, not a run's
            continue
        records, problems = read_episodes(episodes)  # every committed record reads, older versions upgraded
        assert not problems, f"{episodes}: {problems[:1]}"
        if any(missing_trace(episodes.parent, r) for r in records) and not (episodes.parent / TRACES_LEFT_OUT).exists():
            unmarked.append(str(episodes.parent.relative_to(runs)))
    assert unmarked == [], f"run directories without their traces and without {TRACES_LEFT_OUT}: {unmarked}"
