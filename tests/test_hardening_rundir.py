"""Issue 16, item 3: a damaged run directory is a named error (file, line, how to recover), never a
traceback; `playground run --repair` quarantines bad lines and resumes; `compare` reports the same."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli

RUN = ["run", "--env", "tiny", "--agent", "expert", "--harness", "base", "--episodes", "4", "--quiet"]


@pytest.fixture
def run_dir(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = cli(capsys, *RUN, "--out", str(out))
    assert code == 0, err
    return out


def _lines(out):
    return (out / "episodes.jsonl").read_bytes().split(b"\n")[:-1]


def _damage(out, number: int, raw: bytes) -> None:
    lines = _lines(out)
    lines.insert(number - 1, raw)
    (out / "episodes.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))


BAD_LINES = {
    "invalid JSON": b'{"key": "base/tiny-9", "status": ',
    "binary": bytes(range(256)).replace(b"\n", b""),
    "a list": b'["base/tiny-1", "won"]',
    "no key": b'{"harness": "base", "task_id": "tiny-1", "status": "won", "won": true}',
    "no status": b'{"key": "base/tiny-1", "harness": "base", "task_id": "tiny-1", "won": true}',
    "steps not a number": b'{"key": "base/x", "harness": "base", "task_id": "x", "status": "won", "steps": "many"}',
}


@pytest.mark.parametrize("what", BAD_LINES)
def test_a_bad_line_in_the_middle_is_named_and_repair_quarantines_it(capsys, run_dir, what):
    keys = sorted(json.loads(line)["key"] for line in _lines(run_dir))
    _damage(run_dir, 2, BAD_LINES[what])
    before = (run_dir / "episodes.jsonl").read_bytes()
    code, _, err = cli(capsys, *RUN, "--out", str(run_dir))
    assert code == 2 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: "), err
    assert "episodes.jsonl:2:" in err and "--repair" in err
    assert (run_dir / "episodes.jsonl").read_bytes() == before  # refused: nothing touched

    code, _, err = cli(capsys, "compare", str(run_dir), str(run_dir))
    assert code == 2 and "episodes.jsonl:2:" in err and "Traceback" not in err

    code, _, err = cli(capsys, *RUN, "--out", str(run_dir), "--repair")
    assert code == 0, err
    quarantined = [json.loads(line) for line in (run_dir / "episodes.quarantine.jsonl").read_text().splitlines()]
    assert [q["line"] for q in quarantined] == [2]
    assert quarantined[0]["raw"].encode("utf-8", "surrogateescape") == BAD_LINES[what]  # no byte lost
    records = [json.loads(line) for line in _lines(run_dir)]
    assert sorted(r["key"] for r in records) == keys
    assert json.loads((run_dir / "summary.json").read_text())["harnesses"]["base"]["episodes"] == 4


@pytest.mark.parametrize("content", [b"[]", b"{}", b'{"harnesses": "base"}', b"\x00\xff garbage", b'{"env": '])
def test_a_bad_config_is_named_with_how_to_recover(capsys, run_dir, content):
    (run_dir / "config.json").write_bytes(content)
    code, _, err = cli(capsys, *RUN, "--out", str(run_dir))
    assert code == 2 and "config.json" in err and "move it away" in err and "Traceback" not in err, err
    assert (run_dir / "config.json").read_bytes() == content


def test_a_run_resumed_after_moving_a_bad_config_away_completes(capsys, run_dir):
    run_id = json.loads((run_dir / "config.json").read_text())["run_id"]
    (run_dir / "config.json").write_text("[]")
    (run_dir / "config.json").rename(run_dir / "config.json.bad")
    code, _, err = cli(capsys, *RUN, "--out", str(run_dir))
    assert code == 0, err
    # Issue 38: the run keeps the id its records carry, so a replayed episode's lessons are still taken back
    assert json.loads((run_dir / "config.json").read_text())["run_id"] == run_id


def test_the_run_id_is_found_in_the_traces_when_no_record_holds_it(capsys, run_dir):
    from playground.run.rundir import run_id_in_files

    run_id = json.loads((run_dir / "config.json").read_text())["run_id"]
    (run_dir / "config.json").unlink()
    (run_dir / "episodes.jsonl").unlink()  # as after a kill before the first record
    assert run_id_in_files(run_dir) == run_id
    code, _, err = cli(capsys, *RUN, "--out", str(run_dir))
    assert code == 0, err
    assert json.loads((run_dir / "config.json").read_text())["run_id"] == run_id


def test_episodes_jsonl_that_is_a_folder_is_named(capsys, tmp_path):
    out = tmp_path / "run"
    (out / "episodes.jsonl").mkdir(parents=True)
    code, _, err = cli(capsys, *RUN, "--out", str(out))
    assert code == 2 and "episodes.jsonl" in err and "Traceback" not in err


def test_compare_of_a_directory_without_episodes_is_named(capsys, tmp_path):
    code, _, err = cli(capsys, "compare", str(tmp_path), str(tmp_path))
    assert code == 2 and "not a run directory" in err


def test_a_corrupt_trace_is_a_named_error(tmp_path):
    from playground.run.traces import TraceError, read_trace

    path = tmp_path / "t.jsonl"
    for content in (b'{"type": "header"}\n[1]\n', b'{"type": "header"}\n\xff\n', b'{"type": "header"}\n{\n', b"{}\n"):
        path.write_bytes(content)
        with pytest.raises(TraceError, match="t.jsonl"):
            read_trace(path)


def test_out_refuses_a_folder_of_other_files_but_takes_an_empty_one(tmp_path, capsys):
    """A mistyped --out naming a source tree or a home folder writes nothing there."""
    from playground.cli.main import main

    source = tmp_path / "src"
    source.mkdir()
    (source / "module.py").write_text("x = 1\n")
    assert main(["run", "--env", "tiny", "--agent", "noisy", "--episodes", "1", "--quiet", "--out", str(source)]) == 2
    assert "holds no run" in capsys.readouterr().err
    assert sorted(p.name for p in source.iterdir()) == ["module.py"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["run", "--env", "tiny", "--agent", "noisy", "--episodes", "1", "--quiet", "--out", str(empty)]) == 0
    assert main(["run", "--env", "tiny", "--agent", "noisy", "--episodes", "1", "--quiet", "--out", str(empty)]) == 0
