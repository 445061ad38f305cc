"""Issue 16, item 5: a policy file sets only allow-listed parameters, its content is part of the
resume check, and `darc profile` opens no trace outside its run directory."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli

COMMON = ["--env", "tiny", "--agent", "noisy", "--agent-option", "stall=0.2", "--episodes", "2", "--quiet"]


@pytest.mark.parametrize("params", [{"judge_base_url": "http://127.0.0.1:9/v1"}, {"judge_model": "m"},
                                    {"demo_pool": "/etc/passwd"}, {"k": {"nested": 1}}, {"k": [1]}])
def test_a_policy_may_not_set_endpoints_files_or_structures(capsys, tmp_path, params):
    policy = tmp_path / "pol.json"
    policy.write_text(json.dumps({"chain": ["sentry"], "params": params}))
    code, _, err = cli(capsys, "run", *COMMON, "--harness", f"darc:{policy}", "--out", str(tmp_path / "r"))
    assert code == 2 and "pol.json" in err and "Traceback" not in err, err
    assert not (tmp_path / "r" / "episodes.jsonl").exists()


def test_a_policy_may_set_tuning_parameters(capsys, tmp_path):
    policy = tmp_path / "pol.json"
    policy.write_text(json.dumps({"chain": ["sentry"], "params": {"k": 2, "fallback": "best"}}))
    code, _, err = cli(capsys, "run", *COMMON, "--harness", f"darc:{policy}", "--out", str(tmp_path / "r"))
    assert code == 0, err


@pytest.mark.parametrize("change", [{"params": {"k": 1}}, {"J": 0.5}])
def test_a_resumed_run_refuses_a_policy_that_changed(capsys, tmp_path, change):
    policy = tmp_path / "pol.json"
    policy.write_text(json.dumps({"chain": ["sentry"]}))
    args = ["run", *COMMON, "--harness", f"darc:{policy}", "--out", str(tmp_path / "r")]
    assert cli(capsys, *args)[0] == 0
    assert cli(capsys, *args)[0] == 0  # unchanged: resumes
    policy.write_text(json.dumps({"chain": ["sentry"], **change}))
    code, _, err = cli(capsys, *args)
    assert code == 2 and "defined differently" in err and "another --out" in err


def test_policy_files_that_are_not_policies_are_named(capsys, tmp_path):
    policy = tmp_path / "pol.json"
    for content in (b"[]", b"\xff\xfe", b'{"chain": "sentry"}', b'{"chain": ["sentry"], "verifier": 3}', b"nan"):
        policy.write_bytes(content)
        code, _, err = cli(capsys, "run", *COMMON, "--harness", f"darc:{policy}", "--out", str(tmp_path / "r"))
        assert code == 2 and "pol.json" in err and "Traceback" not in err, (content, err)


def test_darc_profile_opens_no_trace_outside_its_run_directory(capsys, tmp_path):
    out = tmp_path / "p"
    profile = ["darc", "profile", "--env", "tiny", "--agent", "noisy", "--episodes", "2", "--out", str(out)]
    code, _, err = cli(capsys, *profile)
    assert code == 0, err
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"type": "detection", "step": 0, "labels": ["x"], "failure_type": "progress"}\n')
    episodes = out / "profile-run" / "episodes.jsonl"
    records = [json.loads(line) for line in episodes.read_text().splitlines()]
    records[0]["trace"] = "../../secret.jsonl"
    episodes.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = cli(capsys, *profile)
    assert code == 2 and "outside" in err and "Traceback" not in err, err
    records[0]["trace"] = str(secret)
    episodes.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, _, err = cli(capsys, *profile)
    assert code == 2 and "outside" in err
