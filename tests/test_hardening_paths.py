"""Issue 16, item 4: no write escapes the run directory through a name used as a path."""

from __future__ import annotations

import json

import pytest

from playground.run.files import PathEscapeError, confined, safe_file_name
from tests.conftest import cli

COMMON = ["--env", "tiny", "--agent", "noisy", "--agent-option", "stall=0.2", "--episodes", "3", "--quiet"]


def _files(root):
    return {p for p in root.rglob("*")}


def test_a_relative_policy_path_in_a_harness_name_writes_nothing_outside_the_run(capsys, tmp_path, monkeypatch):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "pol.json").write_text(json.dumps({"chain": ["sentry"]}))
    work = tmp_path / "w1" / "w2" / "w3"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = _files(tmp_path)
    harness = "darc:../../../x/pol.json"
    code, _, err = cli(capsys, "run", *COMMON, "--harness", harness, "--out", "run")
    assert code == 0, err
    out = (work / "run").resolve()
    created = _files(tmp_path) - before
    outside = [p for p in created if not p.resolve().is_relative_to(out) and p != work / "run"]
    assert not outside, outside
    playbooks = list((out / "playbooks").iterdir())
    assert playbooks and all(p.is_file() for p in playbooks)  # flat: no folders named after the path
    assert all(p.parent == out / "traces" for p in (out / "traces").iterdir())
    summary = json.loads((out / "summary.json").read_text())
    assert harness in summary["harnesses"]


def test_an_absolute_policy_path_makes_no_folders_named_after_it(capsys, tmp_path):
    policy = tmp_path / "pol.json"
    policy.write_text(json.dumps({"chain": ["sentry"]}))
    out = tmp_path / "run"
    code, _, err = cli(capsys, "run", *COMMON, "--harness", f"darc:{policy}", "--out", str(out))
    assert code == 0, err
    for folder in (out / "playbooks", out / "traces"):
        names = [p.name for p in folder.iterdir()]
        assert len(names) == 1 and "/" not in names[0] and not (folder / "darc:").exists()
    assert not [p for p in (out / "traces").rglob("*") if p.is_dir() and p.parent != out / "traces"]


def test_safe_file_names_are_flat_distinct_and_confined(tmp_path):
    names = ["darc:../../x/p.json", "darc:.._.._x_p.json", "..", ".", "", "/etc/passwd", "a/b", "a_b", "é"]
    safe = [safe_file_name(n) for n in names]
    assert len(set(safe)) == len(safe)
    for name in safe:
        assert "/" not in name and name not in ("", ".", "..") and not name.startswith(".")
        assert confined(tmp_path, name).resolve().parent == tmp_path.resolve()
    assert safe_file_name("tiny-3") == "tiny-3" and safe_file_name("sentry") == "sentry"
    for bad in ("../x", "/etc/passwd", "a/../../b"):
        with pytest.raises(PathEscapeError):
            confined(tmp_path, bad)
