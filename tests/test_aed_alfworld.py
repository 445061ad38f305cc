"""AED on ALFWorld (the real engine, generated games): a noisy run under base and sentry is diagnosed, every
fork point is rebuilt by replaying the recorded prefix (observations and admissible actions checked), the
corrections are replayed against retries and graded by the env, and the views are exported and validated.

Four valid_unseen games are generated once into a temporary PLAYGROUND_CACHE (about 1 s each); the run, the
replay (two trials per arm) and the exports take a minute or two on two cores.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import require_extra  # noqa: E402

require_extra("alfworld", "alfworld")  # skips for users without the extra; fails in CI

from playground.plugins.aed.views import read_export  # noqa: E402

from playground.cli.main import main  # noqa: E402
from playground.host.manager import get_host  # noqa: E402
from playground.run.forks import load_episode, rebuild  # noqa: E402
from playground.run.traces import read_trace  # noqa: E402

pytestmark = pytest.mark.slow

GAMES = 4
NOISE = ["invalid=0.3", "stop=0.08", "repeat=0.1", "stall=0.1", "drift=0.1"]


@pytest.fixture(scope="module")
def alfworld_run(tmp_path_factory):
    """A noisy run on GAMES generated games under base and sentry, in a module PLAYGROUND_CACHE."""
    from playground.envs.alfworld.generate import list_generated

    root = tmp_path_factory.mktemp("aed-alfworld")
    before = os.environ.get("PLAYGROUND_CACHE")
    os.environ["PLAYGROUND_CACHE"] = str(root / "cache")
    try:
        list_generated("valid_unseen", GAMES)
        out = root / "run"
        options = [arg for pair in NOISE for arg in ("--agent-option", pair)]
        assert main(["run", "--env", "alfworld:generated", "--split", "valid_unseen", "--agent", "noisy", *options,
                     "--harness", "base", "--harness", "sentry", "--episodes", str(GAMES), "--max-steps", "20",
                     "--out", str(out), "--quiet"]) == 0
        yield out
    finally:
        if before is None:
            os.environ.pop("PLAYGROUND_CACHE", None)
        else:
            os.environ["PLAYGROUND_CACHE"] = before


def test_aed_end_to_end_on_alfworld(alfworld_run, tmp_path, capsys):
    run = alfworld_run
    assert main(["aed", "diagnose", str(run)]) == 0
    diagnosed = json.loads((run / "aed" / "diagnose.json").read_text())
    assert diagnosed["failed"] >= 1 and diagnosed["with_correction"] >= 1, diagnosed
    records = [json.loads(line) for line in (run / "aed" / "diagnoses.jsonl").read_text().splitlines()]
    for record in records:  # every fork point rebuilt from the recorded prefix, admissible actions included
        episode = load_episode(run / record["trace"])
        env, observation, info = rebuild(get_host(), episode, record["step"])
        env.close()
        assert observation == episode.observation_before(record["step"])
        at = episode.at(record["step"])
        assert at is None or at.admissible is None or list(info["admissible_actions"]) == at.env_admissible
        if record["correction"] is not None:
            assert record["correction"] in info["admissible_actions"]

    capsys.readouterr()
    assert main(["aed", "replay", str(run), "--agent", "noisy", "--agent-option", "invalid=0.1", "--trials", "2"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["not_replayable"] == {}
    replays = [json.loads(line) for line in (run / "aed" / "replays.jsonl").read_text().splitlines()]
    assert len(replays) == sum(r["correction"] is not None for r in records) >= 1
    for replay in replays:
        assert replay["restored_state_check"] and replay["same_start"]
        for transcript in replay["transcripts"]:
            events = read_trace(run / transcript["trace"])
            first = next(e for e in events if e["type"] == "proposal")
            expected = replay["correction"] if transcript["arm"] == "treatment" else replay["original"]
            assert first["action"] == (expected or "")
            end = next(e for e in events if e["type"] == "end")  # the env's grader decides, in the fork too
            assert transcript["won"] == (end["status"] == "won")
    assert any(any(r["treatment_won"]) for r in replays)  # a correction can win: the grader works in a fork

    for view in ("diagnosis", "actor", "adp"):
        out = tmp_path / f"{view}.jsonl"
        assert main(["aed", "export", str(run), "--view", view, "--min-grade", "none", "--out", str(out)]) == 0
        assert read_export(out, view)
    admitted = tmp_path / "actor-admitted.jsonl"  # by default, only targets whose replay reached E1 or better
    assert main(["aed", "export", str(run), "--view", "actor", "--out", str(admitted)]) == 0
    assert all(r["meta"]["grade"] in ("E1", "E2") for r in read_export(admitted, "actor"))
    capsys.readouterr()
    assert main(["study", "table", str(run), "--json"]) == 0  # AED's columns on the run's own table
    figures = json.loads(capsys.readouterr().out)[0]["figures"]
    assert figures["aed_pairs_replayed"] == len(replays)
    assert sum(figures.get(f"aed_grades[{grade}]", 0) for grade in ("none", "E1", "E2")) == len(replays)
    assert figures.get("aed_difference_ci_low", 0.0) <= figures.get("aed_difference_ci_high", 0.0)
