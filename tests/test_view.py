"""`playground view`: the episode list with its filters, and one episode step by step (rich, record mode)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from playground.cli.view import find_episode, render_episode, render_list, select
from playground.run.rundir import load_records
from tests.conftest import cli


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from playground.cli.main import main
    from playground.host.manager import reset_host

    out = tmp_path_factory.mktemp("view") / "run"
    reset_host()
    assert main(["run", "--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=0.3", "--agent-option",
                 "repeat=0.3", "--agent-option", "stop=0.15", "--harness", "base", "--harness", "sentry",
                 "--episodes", "8", "--out", str(out), "--quiet"]) == 0
    return out


def console() -> Console:
    return Console(record=True, width=140, color_system=None)


def test_filters_select_by_harness_status_task_and_label(run_dir):
    records = load_records(run_dir)
    assert {r.harness for r in select(records, run_dir, harness="sentry")} == {"sentry"}
    statuses = {r.status for r in records}
    for status in statuses:
        assert {r.status for r in select(records, run_dir, status=status)} == {status}
    assert [r.task_id for r in select(records, run_dir, task="tiny-20003")] == ["tiny-20003"] * 2
    looping = select(records, run_dir, label="repetition_or_looping")
    assert looping and all(any(k.endswith("/repetition_or_looping") for k in r.failures) for r in looping)
    assert select(records, run_dir, label="progress") == [r for r in records
                                                          if any(k.startswith("progress/") for k in r.failures)]
    assert select(records, run_dir, harness="base", label="repetition_or_looping") == []  # base detects nothing
    assert select(records, run_dir, label="no-such-label") == []


def test_the_list_shows_a_page_and_how_to_see_more(run_dir):
    records = load_records(run_dir)
    screen = console()
    render_list(screen, records[:5], len(records), len(records), offset=0)
    text = screen.export_text()
    assert f"{len(records)} of {len(records)} episodes" in text
    assert all(r.key in text for r in records[:5]) and records[5].key not in text
    assert "--offset 5 for more" in text and "showing 1-5" in text
    screen = console()
    render_list(screen, records[10:], len(records), len(records), offset=10)
    text = screen.export_text()
    assert records[10].key in text and records[9].key not in text and "for more" not in text


def test_the_unfiltered_list_parses_only_its_page(run_dir, tmp_path):
    from playground.cli.view import read_page

    records = load_records(run_dir)
    page, total = read_page(run_dir, 3, 4)
    assert total == len(records) and page == records[3:7]
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    (damaged / "episodes.jsonl").write_text("\n".join(lines[:2] + ["{not json"] + lines[3:]) + "\n")
    assert read_page(damaged, 3, 4)[0] == records[3:7]  # the bad line is not on this page
    from playground.run.rundir import RunDirError

    with pytest.raises(RunDirError, match=r"episodes.jsonl:3: not valid JSON"):
        read_page(damaged, 0, 5)


def test_one_episode_is_shown_step_by_step(run_dir):
    records = load_records(run_dir)
    record = max((r for r in records if r.harness == "sentry"), key=lambda r: r.detected_failures)
    events = [json.loads(line) for line in (run_dir / record.trace).read_text().splitlines()]
    screen = console()
    render_episode(screen, run_dir, record)
    text = screen.export_text()
    assert record.key in text and f"seed {record.seed}" in text
    proposals = [e for e in events if e["type"] == "proposal"]
    assert text.count("propose ") == len(proposals)
    assert text.count("⚠ detected ") == sum(e["type"] == "detection" for e in events) > 0
    assert text.count("↺ intervention ") == sum(e["type"] == "intervention" for e in events) > 0
    assert text.count("→ ") >= sum(e["type"] == "step" for e in events)
    assert text.count(" verdict ") == sum(e["type"] == "verification" for e in events)
    assert text.count("★ lesson stored") == sum(e["type"] == "lesson" for e in events)
    end = [e for e in events if e["type"] == "end"][0]
    assert f"{end['status']} after {end['steps']} steps" in text


def test_text_from_the_trace_is_shown_as_text_not_markup(run_dir, tmp_path):
    from playground.cli.view import render_events
    from playground.core.events import HeaderEvent, StepEvent

    events = [HeaderEvent(env="tiny", task_id="t", seed=0),
              StepEvent(step=0, action="[bold]x[/bold]", observation="[red]y", valid_action=False)]

    screen = console()
    render_events(screen, events)
    text = screen.export_text()
    assert "[bold]x[/bold]" in text and "[red]y" in text and "rejected by the env" in text


def test_find_episode_by_key_episode_id_or_unique_task(run_dir):
    records = load_records(run_dir)
    record = records[3]
    assert find_episode(records, record.key) is record
    assert find_episode(records, record.episode_id) is record
    sentry = [r for r in records if r.harness == "sentry"]
    assert find_episode(sentry, record.task_id).harness == "sentry"
    from playground.cli.options import CLIError

    with pytest.raises(CLIError, match="ambiguous"):
        find_episode(records, record.task_id)
    with pytest.raises(CLIError, match="no episode"):
        find_episode(records, "nope")


def test_the_command_lists_and_shows(capsys, run_dir):
    code, out, err = cli(capsys, "view", str(run_dir), "--harness", "sentry", "--limit", "3")
    assert code == 0, err
    assert "sentry/tiny-20000" in out and "base/" not in out and "8 of 16 episodes" in out
    code, out, err = cli(capsys, "view", str(run_dir), "--limit", "3", "--offset", "2")
    assert code == 0, err
    assert "16 of 16 episodes" in out and "showing 3-5; --offset 5 for more" in out
    code, out, err = cli(capsys, "view", str(run_dir), "--episode", "sentry/tiny-20001")
    assert code == 0, err
    assert "propose" in out and "sentry/tiny-20001" in out
    code, _, err = cli(capsys, "view", str(run_dir), "--episode", "tiny-20001")
    assert code == 2 and "ambiguous" in err
    code, _, err = cli(capsys, "view", str(run_dir.parent / "missing"))
    assert code == 2 and "not a run directory" in err


def test_an_episode_is_found_by_its_number_in_the_list(run_dir, capsys):
    """Issue 44: `--episode 2` was refused; one had to paste an 85-character key."""
    records = load_records(run_dir)
    assert find_episode(records, "2") is records[1]
    base = select(records, run_dir, "base", None, None, None)
    assert find_episode(base, "1") is base[0]  # numbered within the same filters as the list
    code, out, _ = cli(capsys, "view", str(run_dir), "--episode", "1")
    assert code == 0 and str(records[0].key) in out
    code, _, err = cli(capsys, "view", str(run_dir), "--episode", str(len(records) + 1))
    assert code == 2 and f"the list has {len(records)}" in err


def test_an_errored_episode_shows_its_one_line_cause_in_the_list(run_dir, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    lines = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    lines[1].update(status="error", won=False, error="HTTP 400: requested 2307 tokens\nTraceback (most recent ...)")
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    shown = Console(record=True, width=220, color_system=None)
    render_list(shown, load_records(run)[:3], 3, len(lines), 0, run)
    text = shown.export_text()
    assert "error: HTTP 400: requested 2307 tokens" in text and "Traceback" not in text
    assert text.count("error:") == 1


def _in_a_terminal(tmp_path: Path, *args: str, lines: int = 20) -> tuple[str, str | None]:
    """Run `playground view ARGS` with stdin and stdout on a pseudo-terminal of `lines` lines and a pager that writes
    what it is given to a file; return what the terminal showed and what the pager got (None: not paged)."""
    import os
    import pty
    import shlex
    import subprocess
    import sys

    paged = tmp_path / "paged.txt"
    paged.unlink(missing_ok=True)
    pager = shlex.join([sys.executable, "-c", f"import sys; open({str(paged)!r}, 'w').write(sys.stdin.read())"])
    leader, follower = pty.openpty()
    env = {**os.environ, "PAGER": pager, "LINES": str(lines), "COLUMNS": "120", "TERM": "xterm"}
    process = subprocess.Popen([sys.executable, "-m", "playground.cli.main", "view", *args], stdin=follower,
                               stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0, process.stderr.read()
    return shown.decode(errors="replace"), paged.read_text() if paged.exists() else None


def test_long_output_in_a_terminal_goes_through_the_pager_unless_no_pager(run_dir, tmp_path):
    import re

    shown, paged = _in_a_terminal(tmp_path, str(run_dir), "--episode", "sentry/tiny-20001")
    assert paged is not None and "sentry/tiny-20001" in paged and "propose" in paged
    assert "propose" not in shown
    shown, paged = _in_a_terminal(tmp_path, str(run_dir), "--episode", "sentry/tiny-20001", "--no-pager")
    assert paged is None and "propose" in re.sub(r"\x1b\[[0-9;]*m", "", shown)
    shown, paged = _in_a_terminal(tmp_path, str(run_dir), "--limit", "2", lines=60)  # shorter than the terminal
    assert paged is None and "showing 1-2" in shown


def test_output_is_paged_only_when_longer_than_the_terminal():
    from playground.cli.view import needs_pager

    assert not needs_pager("a\n" * 23, 24) and needs_pager("a\n" * 24, 24)
