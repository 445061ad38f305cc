"""DARC's commands over run directories refuse what they must not build on, and read no more than they should:
an unfinished run, a trace path outside the run, an empty --out; the LLM diagnoser's prompt carries no grade
text. (These replace the `darc profile` cases of test_unfinished, test_hardening_policy, test_silent_inputs and
test_grade_text: the run is now `playground run`, the command reads it.)"""

from __future__ import annotations

import json

import pytest

from playground.testing.openai_server import ScriptedChatServer
from playground.testing.tiny import TinyEnv
from tests.conftest import cli
from tests.darc_runs import evidence_run, play

PROFILE = "darc-profile:sentry"


def test_a_diagnosis_or_evidence_of_an_unfinished_run_is_refused(capsys, tmp_path):
    """DARC's evidence (and a diagnosis) must not be built on a part of the tasks."""
    with ScriptedChatServer() as server:
        url = server.base_url  # closed once the block ends: every call fails
    run_dir = tmp_path / "p"
    code, _, err = cli(capsys, "run", "--env", "tiny", "--agent", "llm", "--agent-option", f"base_url={url}",
                       "--agent-option", "model=m", "--agent-option", "retries=0", "--agent-option", "cache_dir=off",
                       "--episodes", "2", "--quiet", "--harness", PROFILE, "--harness", "base",
                       "--harness", "darc-eval:sentry", "--out", str(run_dir))
    assert code != 0
    code, _, err = cli(capsys, "darc", "diagnose", str(run_dir), "--out", str(tmp_path / "d"))
    assert code == 2 and "unfinished" in err and "rerun the same command" in err, err
    assert not (tmp_path / "d" / "diagnosis.json").exists()
    code, _, err = cli(capsys, "darc", "evidence", str(run_dir), "--out", str(tmp_path / "e"))
    assert code == 2 and "unfinished" in err, err
    assert not (tmp_path / "e").exists()


def test_darc_diagnose_opens_no_trace_outside_its_run_directory(capsys, tmp_path):
    run_dir = play(capsys, tmp_path / "p", ["--env", "tiny", "--agent", "noisy", "--episodes", "2", "--quiet"],
                   [PROFILE])
    diagnose = ["darc", "diagnose", str(run_dir)]
    code, _, err = cli(capsys, *diagnose)
    assert code == 0, err
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"type": "detection", "step": 0, "labels": ["x"], "failure_type": "progress"}\n')
    episodes = run_dir / "episodes.jsonl"
    records = [json.loads(line) for line in episodes.read_text().splitlines()]
    records[0]["trace"] = "../secret.jsonl"
    episodes.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = cli(capsys, *diagnose)
    assert code == 2 and "outside" in err and "Traceback" not in err, err
    records[0]["trace"] = str(secret)
    episodes.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = cli(capsys, *diagnose)
    assert code == 2 and "outside" in err


@pytest.mark.parametrize("command", ["diagnose", "evidence"])
def test_an_empty_out_is_refused_not_taken_as_the_current_folder(capsys, tmp_path, monkeypatch, command):
    run_dir = evidence_run(capsys, tmp_path / "run", ["--env", "tiny", "--agent", "noisy", "--episodes", "1",
                                                      "--quiet"], ["sentry"])
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "darc", command, str(run_dir), "--out", "")
    assert code == 2 and "--out is empty" in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_darc_llm_prompt_carries_no_grade_text(tmp_path, monkeypatch, capsys):
    """DARC's LLM diagnoser (`darc diagnose --diagnoser llm`) gets the env provider's `remove_grade_text` from the
    CLI: tiny's win banner, planted into every observation of the profiling run, never reaches the judge."""
    banner = " Well done: the red key is back in the hall."  # tiny's win banner, planted where the agent failed
    describe = TinyEnv._describe
    monkeypatch.setattr(TinyEnv, "_describe", lambda self: describe(self) + banner)
    run_dir = play(capsys, tmp_path / "p", ["--env", "tiny", "--agent", "noisy", "--episodes", "6", "--agent-option",
                                            "stop=0.3", "--quiet"], [PROFILE])
    with ScriptedChatServer(default=json.dumps({"mode": "none", "why": "x"})) as server:
        code, _out, err = cli(capsys, "darc", "diagnose", str(run_dir), "--diagnoser", "llm", "--judge-base-url",
                              server.base_url, "--judge-model", "judge", "--out", str(tmp_path / "d"))
        assert code == 0, err
        prompts = [request["messages"][-1]["content"] for request in server.requests]
    assert prompts and all("Well done" not in prompt for prompt in prompts)
    assert any("You are in the" in prompt for prompt in prompts)
