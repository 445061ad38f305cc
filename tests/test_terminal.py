"""Text from runs reaches the terminal with its control characters shown, never obeyed: an ESC sequence in an
observation, a lesson or an error line could retitle the window, clear the screen or plant an outside link."""

from __future__ import annotations

import json

from playground.cli.terminal import visible, visible_data
from playground.plugins.playbook.store import Playbook
from tests.conftest import cli

HOSTILE = "A\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil.example\x07click\x1b]8;;\x07\x9bZ"


def test_visible_shows_every_control_character_but_newline_and_tab():
    assert visible(HOSTILE) == ("A\\x1b]0;pwned\\x07\\x1b[2J\\x1b]8;;http://evil.example\\x07click"
                                "\\x1b]8;;\\x07\\x9bZ")
    assert visible("line one\n\tline two") == "line one\n\tline two"
    assert visible_data({"k\x1b": ["\x1b", ("\x07",), 3]}) == {"k\\x1b": ["\\x1b", ("\\x07",), 3]}


def test_view_prints_no_escape_from_a_trace(capsys, tmp_path):
    run = tmp_path / "run"
    assert cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "base", "--episodes", "1",
               "--quiet", "--out", str(run))[0] == 0
    trace = run / "traces" / "base" / "tiny-20000.jsonl"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    for event in events:
        if "observation" in event:
            event["observation"] = HOSTILE
    trace.write_text("".join(json.dumps(event) + "\n" for event in events))
    code, out, err = cli(capsys, "view", str(run), "--episode", "base/tiny-20000", "--full")
    assert code == 0 and "\\x1b]0;pwned" in out
    assert not any(ch in out + err for ch in "\x1b\x07\x9b")


def test_playbook_show_and_error_lines_print_no_escape(capsys, tmp_path):
    path = tmp_path / "book.sqlite"
    with Playbook(path) as playbook:
        playbook.add("progress", ["planning_stall"], "when " + HOSTILE, "do " + HOSTILE)
    code, out, _ = cli(capsys, "playbook", "show", str(path))
    assert code == 0 and "\\x1b[2J" in out and "\x1b" not in out
    code, _, err = cli(capsys, "view", str(tmp_path / HOSTILE))  # the error names the path it could not read
    assert code == 2 and "\x1b" not in err and "\x07" not in err


def test_no_command_writes_over_a_runs_own_files(capsys, tmp_path):
    run = tmp_path / "run"
    assert cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "base", "--episodes", "1",
               "--quiet", "--out", str(run))[0] == 0
    records = (run / "episodes.jsonl").read_text()
    for own in ("episodes.jsonl", "summary.json", "traces/base/tiny-20000.jsonl"):
        code, _, err = cli(capsys, "report", str(run), "--out", str(run / own), "--force")
        assert code == 2 and "own files" in err, err
    assert (run / "episodes.jsonl").read_text() == records
    assert cli(capsys, "report", str(run), "--out", str(run / "report.html"))[0] == 0  # a new file beside them
