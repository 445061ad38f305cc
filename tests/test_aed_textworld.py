"""AED on TextWorld (the real engine): a noisy run's failed episodes are diagnosed, their fork points rebuilt
exactly from the recorded prefix, corrections replayed against retries, and the views exported and validated."""

from __future__ import annotations

import json

import pytest
from playground.plugins.aed.views import read_export

from playground.cli.main import main
from playground.host.manager import get_host
from playground.run.forks import load_episode, rebuild

pytestmark = pytest.mark.slow

NOISE = ["invalid=0.25", "repeat=0.1", "stall=0.1", "stop=0.03"]


@pytest.fixture(scope="module")
def textworld_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("aed-textworld") / "run"
    options = [arg for pair in NOISE for arg in ("--agent-option", pair)]
    assert main(["run", "--env", "textworld:custom", "--agent", "noisy", *options, "--harness", "base",
                 "--harness", "sentry", "--episodes", "8", "--max-steps", "16", "--out", str(out), "--quiet"]) == 0
    return out


def test_aed_end_to_end_on_textworld(textworld_run, tmp_path):
    run = textworld_run
    assert main(["aed", "diagnose", str(run)]) == 0
    diagnosed = json.loads((run / "aed" / "diagnose.json").read_text())
    assert diagnosed["failed"] >= 1 and diagnosed["pairs"] >= 1, diagnosed
    records = [json.loads(line) for line in (run / "aed" / "diagnoses.jsonl").read_text().splitlines()]
    for record in records[:3]:  # the fork point is rebuilt exactly from the recorded prefix
        episode = load_episode(run / record["trace"])
        env, observation, _ = rebuild(get_host(), episode, record["step"])
        env.close()
        assert observation == episode.observation_before(record["step"])
    assert main(["aed", "replay", str(run), "--agent", "noisy", "--agent-option", "invalid=0.1", "--trials", "2"]) == 0
    replays = [json.loads(line) for line in (run / "aed" / "replays.jsonl").read_text().splitlines()]
    assert len(replays) == sum(r["correction"] is not None for r in records) >= 1
    assert all(r["restored_state_check"] and r["same_start"] for r in replays)
    for view in ("diagnosis", "actor", "adp"):
        out = tmp_path / f"{view}.jsonl"
        assert main(["aed", "export", str(run), "--view", view, "--min-grade", "none", "--out", str(out)]) == 0
        assert read_export(out, view)
    assert main(["study", "table", str(run)]) == 0  # AED's columns on the run's own table
