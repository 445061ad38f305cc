"""`playground playbook ...` commands, including bad input (exit 2, one line, file untouched)."""

from __future__ import annotations

import json

from playground.plugins.playbook.store import Playbook
from tests.conftest import cli


def _playbook(tmp_path):
    path = tmp_path / "pb.sqlite"
    with Playbook(path) as pb:
        pb.add("progress", ["repetition_or_looping"], "repeats look", "do something new", subtype="repeat:look",
               provenance={"run": "r", "task": "t", "episode": "e", "step": 3})
        pb.add("progress", ["planning_stall"], "idles", "act on the goal", subtype="idle:look")
        pb.add("grounding", ["hallucination"], "names unseen things", "act on what you saw")
    return path


def test_retrieve_explains_its_choice(capsys, tmp_path):
    path = _playbook(tmp_path)
    code, out, _ = cli(capsys, "playbook", "retrieve", str(path), "--type", "progress",
                       "--labels", "repetition_or_looping", "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0]["trigger"] == "repeats look" and rows[0]["reason"].startswith("shares 1 label")
    assert all(r["failure_type"] == "progress" for r in rows)


def test_stats_show_export_import_log(capsys, tmp_path):
    path = _playbook(tmp_path)
    code, out, _ = cli(capsys, "playbook", "stats", str(path), "--json")
    assert code == 0 and json.loads(out)["count"] == 3
    code, out, _ = cli(capsys, "playbook", "stats", str(path))
    assert code == 0 and "3 lessons" in out and "progress/repetition_or_looping" in out
    code, out, _ = cli(capsys, "playbook", "show", str(path), "--type", "grounding")
    assert code == 0 and "names unseen things" in out and "repeats look" not in out
    exported = tmp_path / "out.jsonl"
    assert cli(capsys, "playbook", "export", str(path), str(exported))[0] == 0
    copy = tmp_path / "copy.sqlite"
    code, out, _ = cli(capsys, "playbook", "import", str(copy), str(exported))
    assert code == 0 and "imported 3" in out
    code, out, _ = cli(capsys, "playbook", "import", str(copy), str(exported))  # issue 44: a no-op the second time
    assert code == 0 and "imported 0 lessons" in out and "3 already in the playbook" in out
    code, out, _ = cli(capsys, "playbook", "log", str(copy))
    assert code == 0 and len(out.splitlines()) == 3


def test_bad_input_is_one_line_exit_2_and_leaves_files_alone(capsys, tmp_path):
    path = _playbook(tmp_path)
    before = path.read_bytes()
    code, _, err = cli(capsys, "playbook", "retrieve", str(path), "--type", "mystery", "--labels", "x")
    assert code == 2 and "unknown failure type 'mystery'" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"failure_type": "progress", "labels": ["planning_stall"], "trigger": "t"}\n')
    code, _, err = cli(capsys, "playbook", "import", str(path), str(bad))
    assert code == 2 and "bad.jsonl" in err and "line 1" in err
    assert path.read_bytes() == before
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    code, _, err = cli(capsys, "playbook", "stats", str(corrupt))
    assert code == 2 and "corrupt.sqlite" in err
    assert corrupt.read_bytes() == b"this is not a database" * 100
    code, _, err = cli(capsys, "playbook", "stats", str(tmp_path / "missing.sqlite"))
    assert code == 2 and "no playbook" in err
    code, _, err = cli(capsys, "playbook", "prune", str(path))
    assert code == 2 and "needs at least one" in err
    with Playbook(path) as pb:
        assert len(pb) == 3


def test_merge_dry_run_lists_what_it_would_collapse_and_changes_nothing(capsys, tmp_path):
    """Issue 44: merge at its default similarity once collapsed 220 lessons into 4 with no preview."""
    path = tmp_path / "pb.sqlite"
    with Playbook(path) as pb:
        pb.add("progress", ["repetition_or_looping"], "repeats look", "do something new")
        pb.add("progress", ["repetition_or_looping"], "repeats look", "do something new!")
        pb.add("progress", ["repetition_or_looping"], "opens the fridge", "take the apple out first")
    code, out, _ = cli(capsys, "playbook", "merge", str(path), "--dry-run")
    assert code == 0 and "#2 -> #1" in out and "would merge away 1 of 3 lessons (nothing changed)" in out
    with Playbook(path, read_only=True) as pb:
        assert len(pb) == 3
    code, out, _ = cli(capsys, "playbook", "merge", str(path), "--apply")  # issue 56: merging needs --apply
    assert code == 0 and "merged away 1" in out
    code, out, _ = cli(capsys, "playbook", "log", str(path))
    merged = [json.loads(line) for line in out.splitlines() if json.loads(line)["op"] == "merge"]
    assert merged and merged[0]["details"]["lesson"]["principle"] == "do something new!"  # recoverable
