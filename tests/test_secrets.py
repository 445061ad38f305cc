"""Credentials in URLs never reach what a run writes: config.json, lock.json, trace headers, error records."""

from __future__ import annotations

import json

from playground.cli.main import main
from playground.run.secrets import redact, redact_text, redact_url

SECRET_URL = "http://alice:s3cr3t@127.0.0.1:9/v1?api_key=k3y&region=eu"


def test_userinfo_and_secret_query_values_are_masked():
    assert redact_url(SECRET_URL) == "http://***@127.0.0.1:9/v1?api_key=***&region=eu"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url("https://h/x?token=abc&sig=1") == "https://h/x?token=***&sig=***"
    assert "s3cr3t" not in redact_text(f"POST {SECRET_URL}: HTTP 500")
    assert redact({"a": [SECRET_URL, 3], "b": ("x", SECRET_URL)}) == {
        "a": [redact_url(SECRET_URL), 3], "b": ("x", redact_url(SECRET_URL))}


def test_a_run_writes_no_credential_of_its_endpoint(tmp_path):
    """The endpoint is unreachable (port 9), so every episode errors with the URL in its message: neither the
    config, the lock, the traces nor the records hold the password or the key."""
    out = tmp_path / "run"
    main(["run", "--env", "tiny", "--agent", "llm", "--llm-base-url", SECRET_URL, "--model", "m",
          "--agent-option", "retries=0", "--agent-option", "timeout=2", "--harness", "base", "--episodes", "1",
          "--max-steps", "2", "--out", str(out), "--quiet"])
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "config.json" for p in written) and any(p.suffix == ".jsonl" for p in written)
    for path in written:
        text = path.read_text(errors="replace")
        assert "s3cr3t" not in text and "k3y" not in text, path
    config = json.loads((out / "config.json").read_text())
    assert config["agent_options"]["base_url"] == redact_url(SECRET_URL)
