"""The default job (`playground run` with no options) gives the summary pinned before the restructure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

PINNED = Path(__file__).with_name("data") / "default_run_summary.json"
UNPINNED = ("run_id",)  # differs on every run
TIMINGS = ("seconds_per_step",)


@pytest.mark.slow
def test_default_run_summary_is_pinned(tmp_path):
    result = run_cli("run", "--quiet", "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for key in UNPINNED:
        summary.pop(key)
    for figures in summary["harnesses"].values():
        for key in TIMINGS:
            figures.pop(key)
    assert summary == json.loads(PINNED.read_text())
