"""What the baselines keep beside a playbook travels with a copy of it (issue 55: every method that keeps lessons):
a held-out grid's ACE and Reflexion start from the memories their init cells grew, `playground playbook copy`
carries them between SQLite files and PostgreSQL both ways, and a target that already holds other memories is
refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from playground.cli.main import main
from playground.core.study_file import load_study
from playground.host.manager import get_host
from playground.plugins.baselines.memory import FileMemory, MemoryFileError, PostgresMemory
from playground.run.study import run_study
from tests.postgres_server import postgres_server, postgres_url  # noqa: F401 (fixtures: a real PostgreSQL)

FAILING = "invalid = 0.15, repeat = 0.2, stop = 0.1"
HELDOUT = f"""
name = "baselines-heldout"
title = "the baselines' memories carried to held-out tasks"

[grid_defaults]
env = "tiny"
episodes = 4
max_steps = 20
agent_options = {{ {FAILING} }}

[[grids]]
name = "init"
split = "train"
harnesses = ["ace", "reflexion:2"]

[[grids]]
name = "eval"
split = "test"
harnesses = ["ace"]
playbook_from = "init/ace"

[[grids]]
name = "eval-reflexion"
split = "test"
harnesses = ["reflexion:2"]
playbook_from = "init/reflexion:2"
"""


def test_a_held_out_grid_starts_from_the_memories_its_init_cell_grew(tmp_path):
    path = tmp_path / "heldout.toml"
    path.write_text(HELDOUT)
    out = tmp_path / "out"
    run_study(get_host(), load_study(path), out)
    grown, carried = out / "init" / "playbooks", out / "eval" / "playbooks"
    init_deltas = FileMemory(grown / "ace.ace.txt.deltas.jsonl").records()
    assert init_deltas and (grown / "ace.ace.txt").read_text().strip()
    # the eval cell's ACE began with the init cell's delta log and went on from it
    eval_deltas = FileMemory(carried / "ace.ace.txt.deltas.jsonl").records()
    assert eval_deltas[:len(init_deltas)] == init_deltas and len(eval_deltas) > len(init_deltas)
    reflections = FileMemory(grown / "reflexion:2.reflections.jsonl").records()
    assert reflections
    assert FileMemory(out / "eval-reflexion" / "playbooks" / "reflexion:2.reflections.jsonl").records()[
        :len(reflections)] == reflections


def ace_sentry_playbook(tmp_path: Path) -> Path:
    """A run of `ace-sentry` on tiny: a Sentry playbook (lessons) and ACE's memories beside it."""
    out = tmp_path / "run"
    assert main(["run", "--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=0.15", "--agent-option",
                 "repeat=0.2", "--agent-option", "stop=0.1", "--harness", "ace-sentry", "--episodes", "4", "--out",
                 str(out), "--quiet"]) == 0
    playbook = out / "playbooks" / "ace-sentry.sqlite"
    assert playbook.is_file() and (out / "playbooks" / "ace-sentry.ace.txt").read_text().strip()
    return playbook


def test_playbook_copy_carries_the_memories_to_postgresql_and_back(tmp_path, postgres_url, capsys):  # noqa: F811
    source = ace_sentry_playbook(tmp_path)
    assert main(["playbook", "copy", str(source), postgres_url]) == 0
    assert PostgresMemory(postgres_url, "ace.txt").read_text() == source.with_name("ace-sentry.ace.txt").read_text()
    assert PostgresMemory(postgres_url, "ace.txt.deltas.jsonl").records() == FileMemory(
        source.with_name("ace-sentry.ace.txt.deltas.jsonl")).records()
    back = tmp_path / "back" / "copy.sqlite"
    back.parent.mkdir()
    assert main(["playbook", "copy", postgres_url, str(back)]) == 0
    # the text byte for byte; the records as data (JSONB keeps no key order)
    assert back.with_name("copy.ace.txt").read_bytes() == source.with_name("ace-sentry.ace.txt").read_bytes()
    assert FileMemory(back.with_name("copy.ace.txt.deltas.jsonl")).records() == FileMemory(
        source.with_name("ace-sentry.ace.txt.deltas.jsonl")).records()


def test_a_target_holding_other_memories_is_refused_before_anything_is_written(tmp_path, capsys):
    source = ace_sentry_playbook(tmp_path)
    target = tmp_path / "t" / "copy.sqlite"
    target.parent.mkdir()
    target.with_name("copy.ace.txt").write_text("another ACE playbook\n")
    capsys.readouterr()
    assert main(["playbook", "copy", str(source), str(target)]) == 2
    err = capsys.readouterr().err
    assert "copy.ace.txt holds another memory" in err and "Traceback" not in err
    assert not target.exists() and target.with_name("copy.ace.txt").read_text() == "another ACE playbook\n"
    assert not target.with_name("copy.ace.txt.deltas.jsonl").exists()
    with pytest.raises(MemoryFileError):  # the study's way in (the host's hook) refuses the same
        get_host().pm.hook.copy_playbook(source=str(source), target=str(target))
    assert not target.exists()
