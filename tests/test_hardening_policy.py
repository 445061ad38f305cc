"""A policy file sets only allow-listed parameters and its content is part of the resume check (`darc diagnose`
opening no trace outside its run directory: tests/test_darc_inputs.py)."""

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

