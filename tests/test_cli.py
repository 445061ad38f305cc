"""The command line: runs, listings and every kind of bad input (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import cli, run_cli


def test_run_on_tiny_writes_the_run_directory(capsys, tmp_path):
    out = tmp_path / "run"
    code, stdout, _ = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "base",
                          "--episodes", "4", "--out", str(out), "--quiet")
    assert code == 0
    assert "base" in stdout and "success" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "tiny:default" and summary["agent"] == "noisy" and summary["tasks"] == 4
    base = summary["harnesses"]["base"]
    for key in ("episodes", "success_rate", "mean_steps", "invalid_actions_per_episode", "detected_failures",
                "interventions", "verified_recoveries", "lessons_added", "prompt_tokens", "completion_tokens"):
        assert key in base
    assert base["episodes"] == 4
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 4
    trace = [json.loads(line) for line in (out / records[0]["trace"]).read_text().splitlines()]
    assert trace[0]["type"] == "header" and trace[0]["env"] == "tiny" and "version" in trace[0]
    assert trace[-1]["type"] == "end"
    assert {e["type"] for e in trace} >= {"reset", "proposal", "step", "end"}
    config = json.loads((out / "config.json").read_text())
    assert config["agent"] == "noisy" and config["harnesses"] == ["base"]


def test_two_harnesses_run_the_same_tasks(capsys, tmp_path):
    out = tmp_path / "run"
    code, stdout, _ = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "base",
                          "--harness", "guard-only", "--episodes", "3", "--seed", "5", "--out", str(out), "--quiet")
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["harnesses"]) == ["base", "guard-only"]
    assert all(h["episodes"] == 3 for h in summary["harnesses"].values())
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    by_harness = {h: {r["task_id"]: r for r in records if r["harness"] == h} for h in ("base", "guard-only")}
    assert len(records) == 6 and set(by_harness["base"]) == set(by_harness["guard-only"])
    for task in by_harness["base"]:
        base, guarded = by_harness["base"][task], by_harness["guard-only"][task]
        assert base["seed"] == guarded["seed"]  # the same seed under every harness
        resets = [next(json.loads(line) for line in (out / r["trace"]).read_text().splitlines()
                       if json.loads(line)["type"] == "reset") for r in (base, guarded)]
        assert resets[0]["observation"] == resets[1]["observation"] and resets[0]["goal"] == resets[1]["goal"]
        headers = [json.loads((out / r["trace"]).read_text().splitlines()[0]) for r in (base, guarded)]
        assert [h["interventions"] for h in headers] == [[], ["validity-guard"]]
    assert len({r["seed"] for r in by_harness["base"].values()}) == 3  # while tasks get their own seeds


def test_a_harness_named_twice_is_played_once(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, _ = cli(capsys, "run", "--env", "tiny", "--agent", "expert", "--harness", "base",
                     "--harness", "base", "--episodes", "3", "--out", str(out), "--quiet")
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["harnesses"]) == ["base"] and summary["harnesses"]["base"]["episodes"] == 3
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3


def test_rerun_resumes_and_skips_finished_episodes(capsys, tmp_path):
    out = str(tmp_path / "run")
    args = ["run", "--env", "tiny", "--agent", "noisy", "--episodes", "3", "--out", out, "--quiet"]
    assert cli(capsys, *args)[0] == 0
    before = (tmp_path / "run" / "episodes.jsonl").read_text()
    assert cli(capsys, *args)[0] == 0
    assert (tmp_path / "run" / "episodes.jsonl").read_text() == before


@pytest.mark.parametrize("args, expected", [
    (["--env", "nowhere"], "unknown env 'nowhere'; choose from: "),
    (["--env", "tiny:nope"], "unknown task set 'nope' for env 'tiny'; choose from: default"),
    (["--env", "tiny", "--split", "holdout"], "unknown split 'holdout'"),
    (["--env", "tiny", "--agent", "wizard"], "unknown agent 'wizard'; choose from: "),
    (["--env", "tiny", "--harness", "magic"], "unknown harness 'magic'; choose from: "),
    (["--env", "tiny", "--episodes", "many"], "'many' is not a valid integer"),
    (["--env", "tiny", "--episodes", "0"], "--episodes"),
    (["--env", "tiny", "--max-steps", "-3"], "--max-steps"),
    (["--env", "tiny", "--agent-option", "novalue"], "--agent-option expects KEY=VALUE"),
    (["--env", "tiny", "--agent", "noisy", "--agent-option", "colour=red"], "agent 'noisy' has no option 'colour'"),
    (["--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=lots"], "option 'invalid' expects float"),
    (["--env", "tiny", "--bogus"], "No such option '--bogus'"),
    (["--env", "tiny", "--agent", "noisy", "--harness", "sentry", "--param", "threshold=high"],
     "'threshold' must be a non-negative number"),
    (["--env", "tiny", "--agent", "noisy", "--harness", "sentry", "--param", "fallback=pray"],
     "'fallback' must be one of"),
])
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, args, expected):
    code, _, err = cli(capsys, "run", *args, "--out", str(tmp_path / "r"), "--quiet")
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("run:")]
    assert len(lines) == 1, err
    assert expected in lines[0]


def test_unwritable_out_exits_2(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--episodes", "1",
                       "--out", str(blocker / "run"), "--quiet")
    assert code == 2 and "cannot write to run directory" in err


def test_resume_with_a_different_config_is_refused(capsys, tmp_path):
    out = str(tmp_path / "run")
    args = ("run", "--env", "tiny", "--agent", "noisy", "--episodes", "2", "--out", out, "--quiet")
    assert cli(capsys, *args)[0] == 0
    code, _, err = cli(capsys, *args, "--seed", "7")
    assert code == 2 and "different seed" in err


def test_listings(capsys):
    code, out, _ = cli(capsys, "envs")
    assert code == 0 and "tiny:default" in out and "textworld:custom" in out
    code, out, _ = cli(capsys, "agents")
    assert code == 0 and "noisy" in out
    code, out, _ = cli(capsys, "harnesses")
    assert code == 0 and "base" in out
    code, out, _ = cli(capsys, "plugins")
    assert code == 0 and "hooks: register_agents" in out


def test_help_does_not_import_heavy_engines():
    result = run_cli("--help")
    assert result.returncode == 0 and "run" in result.stdout
    probe = subprocess.run([sys.executable, "-c", "import sys; from playground.cli.main import main; "
                            "main(['envs']); print('textworld' in sys.modules, 'alfworld' in sys.modules)"],
                           capture_output=True, text=True)
    assert probe.stdout.strip().endswith("False False"), probe.stdout + probe.stderr


def test_wilson_interval():
    from playground.run.report import wilson_interval

    assert wilson_interval(0, 0) == [0.0, 1.0]
    low, high = wilson_interval(40, 50)
    assert 0.66 < low < 0.68 and 0.88 < high < 0.90
    assert wilson_interval(50, 50)[1] == 1.0 and wilson_interval(0, 50)[0] == 0.0
