"""Issue 56, item 9: the playbook commands that change a playbook in place preview by default and back it up before
they change it (`merge`, `prune`); an import reports progress and is complete or not at all; a playbook written on
another env warns the run that retrieves from it."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import playground.plugins.playbook.maintenance as maintenance
from playground.plugins.playbook.schema import content_digest
from playground.plugins.playbook.store import Playbook
from tests.conftest import cli

ROOT = Path(__file__).resolve().parents[1]


def _templated(path: Path, count: int = 38, env: str = "textworld") -> Path:
    """A playbook of `count` lessons written from one template (they all look alike), on env `env`."""
    with Playbook(path) as pb:
        for number in range(count):
            pb.add("progress", ["repetition_or_looping"], f"the agent repeats 'look {number}' and nothing changes",
                   f"Do something that changes the situation (case {number}).", subtype="repeat:look",
                   provenance={"run": "r1", "env": env, "task": f"easy-{number}", "episode": f"e{number}",
                               "step": 3})
    return path


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.bak-*"))


def _lessons(path: Path) -> list[dict]:
    with Playbook(path, read_only=True) as pb:
        return [lesson.to_dict() for lesson in pb.all()]


# ---- merge and prune: a preview by default, a backup before a change ------------------------------------------

def test_merge_without_apply_shows_the_groups_and_changes_nothing(capsys, tmp_path):
    """Issue 56: `playbook merge` at its default setting collapsed 38 templated lessons into 2, in place."""
    path = _templated(tmp_path / "pb.sqlite")
    before = content_digest(path)
    code, out, err = cli(capsys, "playbook", "merge", str(path))
    assert code == 0, err
    assert "progress/repetition_or_looping:" in out and "of 38 lessons would be merged away" in out
    assert "-> #1 (similarity" in out and "more (--dry-run lists every merge)" in out  # a few examples, not all
    assert "note: progress/repetition_or_looping would keep" in out  # the collapse is called out
    assert "(nothing changed); run again with --apply" in out
    assert content_digest(path) == before and len(_lessons(path)) == 38 and not _backups(path)


def test_merge_apply_writes_a_backup_first_and_the_backup_restores_the_playbook(capsys, tmp_path):
    path = _templated(tmp_path / "pb.sqlite")
    before = _lessons(path)
    code, out, err = cli(capsys, "playbook", "merge", str(path), "--apply")
    assert code == 0, err
    assert len(_lessons(path)) < 38 and "merged away" in out
    [backup] = _backups(path)
    assert f"backup: {backup} (the playbook as it was)" in out
    assert _lessons(backup) == before  # the whole playbook as it was, a playbook itself
    hint = next(line for line in out.splitlines() if line.startswith("to undo the merge"))
    subprocess.run(hint.split(": ", 1)[1], shell=True, check=True)  # the command it prints restores it
    assert _lessons(path) == before and not backup.exists()


def test_prune_without_apply_previews_and_with_apply_backs_up_first(capsys, tmp_path):
    path = _templated(tmp_path / "pb.sqlite", count=12)
    before = content_digest(path)
    code, out, err = cli(capsys, "playbook", "prune", str(path), "--max-count", "4")
    assert code == 0, err
    assert "would go: beyond --max-count 4" in out and "would prune 8 of 12 lessons (nothing changed)" in out
    assert content_digest(path) == before and not _backups(path)
    code, out, err = cli(capsys, "playbook", "prune", str(path), "--max-count", "4", "--apply")
    assert code == 0, err
    assert "pruned 8 lessons" in out and len(_lessons(path)) == 4
    [backup] = _backups(path)
    assert len(_lessons(backup)) == 12 and f"backup: {backup}" in out and "to undo the prune" in out


# ---- import: progress, and complete or not at all ------------------------------------------------------------

def _export(path: Path, out: Path) -> Path:
    with Playbook(path, read_only=True) as pb:
        pb.export_jsonl(out)
    return out


def _stop_after(monkeypatch, lessons: int) -> None:
    """Make the import stop as Ctrl-C stops it, while it adds its lesson number `lessons`."""
    real, added = maintenance.insert, []

    def insert(*args, **kwargs):
        if len(added) + 1 == lessons:
            raise KeyboardInterrupt
        added.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(maintenance, "insert", insert)


def test_an_import_stopped_midway_leaves_no_new_playbook_and_an_old_one_as_it_was(capsys, monkeypatch, tmp_path):
    """Issue 56: killing a long import left an empty playbook file where there was none."""
    source = _export(_templated(tmp_path / "source.sqlite", count=20), tmp_path / "lessons.jsonl")
    new = tmp_path / "new.sqlite"
    _stop_after(monkeypatch, 10)
    code, _, err = cli(capsys, "playbook", "import", str(new), str(source))
    assert code == 130
    assert not [p.name for p in tmp_path.iterdir() if not p.name.startswith(("lessons", "source"))]  # no leftovers
    assert f"nothing imported; no playbook was made at {new}" in err
    old = _templated(tmp_path / "old.sqlite", count=3, env="alfworld")
    before = content_digest(old)
    code, _, err = cli(capsys, "playbook", "import", str(old), str(source))
    assert code == 130 and content_digest(old) == before and len(_lessons(old)) == 3
    assert f"nothing imported; {old} is as it was" in err


def test_an_import_reports_its_progress_on_stderr_when_asked(capsys, tmp_path):
    source = _export(_templated(tmp_path / "source.sqlite", count=5), tmp_path / "lessons.jsonl")
    code, out, err = cli(capsys, "playbook", "import", str(tmp_path / "a.sqlite"), str(source), "--progress")
    assert code == 0 and "imported 5 lessons" in out
    assert f"import: 5 of 5 lines of {source} read" in err and "import: 5 of 5 lessons done (100%)" in err
    code, out, err = cli(capsys, "playbook", "import", str(tmp_path / "b.sqlite"), str(source))
    assert code == 0 and "imported 5 lessons" in out and err == ""  # not a terminal: only the last line, on stdout


@pytest.mark.slow
def test_an_import_killed_midway_leaves_the_playbook_as_it_was(tmp_path):
    """SIGKILL, not Ctrl-C: no handler runs; the transaction (an existing playbook) or the temporary file (a new
    one) is what keeps the playbook whole."""
    lines = [json.dumps({"failure_type": "progress", "labels": ["planning_stall"], "trigger": f"idles {n}",
                         "principle": f"act on the goal, case {n}", "provenance": {"env": "textworld", "n": n}})
             for n in range(60_000)]
    source = tmp_path / "lessons.jsonl"
    source.write_text("\n".join(lines) + "\n")
    old = _templated(tmp_path / "old.sqlite", count=3)
    before = content_digest(old)
    for target in (old, tmp_path / "new.sqlite"):
        command = [sys.executable, "-c", "import sys; from playground.cli.main import main; sys.exit(main())",
                   "playbook", "import", str(target), str(source), "--progress"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        started = time.monotonic()
        for line in process.stderr:  # kill it once it is adding lessons
            if "lessons done" in line or time.monotonic() - started > 120:
                break
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        if process.returncode == 0:
            pytest.skip(f"the import finished before the kill: {shlex.join(command)}")
        assert process.returncode == -signal.SIGKILL
    assert content_digest(old) == before and len(_lessons(old)) == 3
    assert not (tmp_path / "new.sqlite").exists()


# ---- a playbook written on another env ------------------------------------------------------------------------

def _origin(env: str, run: str = "run-1", episode: str = "e1") -> dict:
    return {"run": run, "env": env, "task": "t", "episode": episode, "attempt": 1, "step": 4}


def test_retrieving_from_a_playbook_of_another_env_warns_once_per_run(caplog, tmp_path):
    path = _templated(tmp_path / "pb.sqlite", count=6, env="textworld")
    caplog.set_level(logging.WARNING, logger="playground.plugins.playbook")
    for episode in ("e1", "e2"):  # Sentry opens the playbook once per episode
        with Playbook(path) as pb:
            assert pb.retrieve("progress", ["repetition_or_looping"], 3, origin=_origin("alfworld", episode=episode))
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [f"warning: playbook {path}: 6 of the 6 lessons that record an env come from another env "
                        f"(textworld 6), and this run plays alfworld: they may not apply here "
                        f"(`playground playbook stats {path}` lists the envs)"]
    with Playbook(path) as pb:  # its own env: no warning
        pb.retrieve("progress", ["repetition_or_looping"], 3, origin=_origin("textworld", run="run-2"))
    assert len(caplog.records) == 1


def test_stats_lists_the_envs_the_lessons_were_written_on(capsys, tmp_path):
    path = _templated(tmp_path / "pb.sqlite", count=3, env="textworld")
    with Playbook(path) as pb:
        pb.add("grounding", ["hallucination"], "names unseen things", "act on what you saw",
               provenance={"env": "alfworld"})
        pb.add("grounding", ["hallucination"], "names a door", "look first")
    code, out, _ = cli(capsys, "playbook", "stats", str(path), "--json")
    assert code == 0 and json.loads(out)["by_env"] == {"textworld": 3, "alfworld": 1}
    code, out, _ = cli(capsys, "playbook", "stats", str(path))
    assert "envs (from the lessons' provenance): textworld 3, alfworld 1, none recorded 1" in out
