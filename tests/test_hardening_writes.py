"""Issue 16, item 1: every write to a user-named file is safe.

Nothing is overwritten without `--force`, never an input of the command, never a folder;
files are written beside the target and renamed into place, temporary files removed on error.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from playground.plugins.playbook.store import Playbook
from playground.run.files import OutputError, atomic_write, atomic_write_text, check_output
from tests.conftest import cli


def _playbook(tmp_path):
    path = tmp_path / "pb.sqlite"
    with Playbook(path) as pb:
        pb.add("progress", ["repetition_or_looping"], "repeats look", "do something new", subtype="repeat:look")
    return path


def _evidence(tmp_path):
    path = tmp_path / "evidence.csv"
    path.write_text("task_id,intervention,success,cost\nt1,a,1,2\nt1,b,0,1\nt2,a,0,3\nt2,b,1,1\n")
    return path


def test_export_onto_the_playbook_itself_is_refused_and_the_playbook_kept(capsys, tmp_path):
    path = _playbook(tmp_path)
    before = path.read_bytes()
    for args in ([], ["--force"]):
        code, _, err = cli(capsys, "playbook", "export", str(path), str(path), *args)
        assert code == 2 and "input" in err and len(err.strip().splitlines()) == 1
    assert path.read_bytes() == before
    with Playbook(path, read_only=True) as pb:
        assert len(pb) == 1


def test_export_never_overwrites_without_force(capsys, tmp_path):
    path = _playbook(tmp_path)
    out = tmp_path / "lessons.jsonl"
    out.write_text("precious\n")
    code, _, err = cli(capsys, "playbook", "export", str(path), str(out))
    assert code == 2 and "--force" in err
    assert out.read_text() == "precious\n"
    code, _, err = cli(capsys, "playbook", "export", str(path), str(out), "--force")
    assert code == 0, err
    assert json.loads(out.read_text().splitlines()[0])["trigger"] == "repeats look"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temp file left


def test_export_into_a_folder_is_a_named_error(capsys, tmp_path):
    path = _playbook(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    code, _, err = cli(capsys, "playbook", "export", str(path), str(folder))
    assert code == 2 and "folder" in err and "Traceback" not in err


def test_distill_never_overwrites_the_policy_the_evidence_or_a_plot_without_force(capsys, tmp_path):
    evidence = _evidence(tmp_path)
    before = evidence.read_text()
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(evidence), "--out", str(evidence))
    assert code == 2 and "input" in err
    assert evidence.read_text() == before
    policy = tmp_path / "policy.json"
    policy.write_text("{}")
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(evidence))
    assert code == 2 and "--force" in err and policy.read_text() == "{}"
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(evidence), "--force", "--tau-free", "0")
    assert code == 0, err
    assert json.loads(policy.read_text())["chain"]
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(evidence), "--out", str(tmp_path / "p2.json"),
                       "--plot", str(evidence))
    assert code == 2 and evidence.read_text() == before and not (tmp_path / "p2.json").exists()
    folder = tmp_path / "plots"
    folder.mkdir()
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(evidence), "--out", str(tmp_path / "p3.json"),
                       "--plot", str(folder))
    assert code == 2 and "folder" in err and "Traceback" not in err


def test_distill_into_a_folder_is_a_named_error(capsys, tmp_path):
    evidence = _evidence(tmp_path)
    folder = tmp_path / "pol"
    folder.mkdir()
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(evidence), "--out", str(folder))
    assert code == 2 and "folder" in err


def test_atomic_write_leaves_no_temp_file_and_the_old_content_on_error(tmp_path):
    target = tmp_path / "x.txt"
    target.write_text("old")

    def explode(handle):
        handle.write("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write(target, explode)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_gives_a_new_file_the_mode_open_would(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        written = atomic_write_text(tmp_path / "new.json", "{}\n")
        with open(tmp_path / "opened.json", "w") as handle:  # what a plain open() makes under the same umask
            handle.write("{}\n")
    finally:
        os.umask(old)
    assert oct(written.stat().st_mode & 0o777) == oct(mode) == oct((tmp_path / "opened.json").stat().st_mode & 0o777)
    assert written.read_text() == "{}\n" and sorted(p.name for p in tmp_path.iterdir()) == ["new.json", "opened.json"]


def test_atomic_write_over_a_file_keeps_its_mode(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text("old")
    target.chmod(0o640)
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and oct(target.stat().st_mode & 0o777) == "0o640"


def test_check_output_protects_sqlite_side_files_and_links(tmp_path):
    source = tmp_path / "pb.sqlite"
    source.write_text("x")
    link = tmp_path / "link"
    link.symlink_to(source)
    for target in (link, tmp_path / "pb.sqlite-wal"):
        with pytest.raises(OutputError):
            check_output(target, force=True, inputs=[source])
    with pytest.raises(OutputError):
        check_output("", force=True)


def test_atomic_write_onto_a_folder_is_a_named_error_and_leaves_no_temp_file(tmp_path):
    (tmp_path / "folder").mkdir()
    with pytest.raises(OutputError, match="cannot write .*folder"):
        atomic_write(tmp_path / "folder", lambda handle: handle.write("x"))
    assert [p.name for p in tmp_path.iterdir()] == ["folder"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc takes no new files on Linux only")
def test_check_output_tries_the_folder_before_any_work_is_done(capsys, tmp_path):
    with pytest.raises(OutputError, match="cannot write in '/proc'"):
        check_output("/proc/frontier.png", what="plot (--plot)")
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(_evidence(tmp_path)), "--tau-free", "1",
                       "--plot", "/proc/frontier.png")
    assert code == 2 and "cannot write in '/proc'" in err, err
    assert not (tmp_path / "policy.json").exists()  # refused before the policy was written, not after
