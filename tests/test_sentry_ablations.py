"""Every Sentry ablation is a registered harness that runs, and does what its name says."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from playground.host.manager import Host
from playground.plugins.playbook.store import Playbook
from playground.plugins.sentry import ABLATIONS
from playground.plugins.sentry.harness import SentryPlugin
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import ScriptedAgent, play, tiny_env
from tests.conftest import run_cli

NAMES = [name for name, _, _ in ABLATIONS]
TASKS = [f"tiny-{i}" for i in range(20_000, 20_003)]
NOISY = {"invalid": 0.15, "repeat": 0.15, "stall": 0.15, "stop": 0.08, "drift": 0.08}


def seed_playbook(path: Path) -> Path:
    """Lessons of every learned type, several of them for loops (more than k=3 distinct ones)."""
    with Playbook(path) as pb:
        for i in range(12):
            pb.add("progress", ["repetition_or_looping"], f"looping {i}", f"LOOP-{i} do something new", subtype=f"r{i}")
        pb.add("progress", ["planning_stall"], "idling", "STALL change the world", subtype="idle")
        pb.add("grounding", ["objective_drift"], "drifting", "DRIFT back to the goal's objects", subtype="off_goal")
    return path


def _run(tmp_path: Path, harness: str, playbook: Path | None = None, tasks=TASKS) -> tuple[dict, list[dict]]:
    out = tmp_path / harness
    summary = run(Host().load(), RunConfig(env="tiny", task_set="default", split="test", tasks=tasks, agent="noisy",
                                           harnesses=[harness], out=str(out), agent_options=NOISY, max_steps=30,
                                           playbook=str(playbook) if playbook else None, strict=True))
    events = [json.loads(line) for trace in sorted((out / "traces" / harness).glob("*.jsonl"))
              for line in trace.read_text().splitlines()]
    return summary["harnesses"][harness], events


def test_every_ablation_is_listed_by_playground_harnesses():
    result = run_cli("harnesses")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines()[1:] if line.startswith("  ")}
    assert set(NAMES) | {"sentry", "sentry-no-soft", "sentry-frozen", "sentry-k3", "sentry-k10"} <= listed


@pytest.mark.parametrize("harness", NAMES)
def test_each_ablation_runs_on_tiny_episodes(tmp_path, harness):
    figures, events = _run(tmp_path, harness, seed_playbook(tmp_path / "pb.sqlite"))
    assert figures["episodes"] == len(TASKS) and figures["errors"] == 0
    kinds = [e["kind"] for e in events if e["type"] == "intervention"]
    verdicts = [e["verdict"] for e in events if e["type"] == "verification"]
    shown = [lesson for e in events if e["type"] == "intervention" for lesson in e["details"].get("lessons", [])]
    if harness == "sentry-no-hard":
        assert "hard_repair" not in kinds and figures["invalid_actions_per_episode"] > 0
    if harness == "sentry-no-soft":
        assert "soft_repair" not in kinds and not verdicts
    if harness == "sentry-no-verify":
        assert verdicts and set(verdicts) == {"unverified"}
        assert figures["lessons_added"] == kinds.count("soft_repair") and figures["verified_recoveries"] == 0
    if harness == "sentry-frozen":
        assert figures["lessons_added"] == 0 and shown
    if harness == "sentry-retrieval-off":
        assert "soft_repair" in kinds and not shown and figures["lessons_added"] > 0
    if harness in ("sentry-k3", "sentry-k10"):
        k = int(harness.rsplit("k", 1)[1])
        per_repair = [len(e["details"]["lessons"]) for e in events if e["type"] == "intervention"
                      and e["kind"] == "soft_repair"]
        assert per_repair and max(per_repair) <= k and k in per_repair


def test_without_the_need_check_every_detection_is_repaired():
    def soft_steps(params):
        result = play(tiny_env(), ScriptedAgent(["look"] * 8), plugins=[SentryPlugin(params)], task="tiny-4", max_steps=10)
        return [d["step"] for d in result.of("intervention") if d["kind"] == "soft_repair"]

    checked, unchecked = soft_steps({}), soft_steps({"need_check": False})
    assert len(unchecked) > len(checked)
    assert any(b - a == 1 for a, b in zip(unchecked, unchecked[1:]))  # no cooldown
    assert all(b - a > 2 for a, b in zip(checked, checked[1:]))


@pytest.mark.parametrize("mode", ["labels", "type", "any", "random"])
def test_retrieval_modes(tmp_path, mode):
    with Playbook(seed_playbook(tmp_path / "pb.sqlite")) as pb:
        got = pb.retrieve("progress", ["planning_stall"], 5, count=False, mode=mode, rng=random.Random(1))
        assert len(got) == (1 if mode == "labels" else 5)
        principles = [item.lesson.principle for item in got]
        types = {item.lesson.failure_type for item in got}
        if mode == "labels":  # only the one lesson sharing the label
            assert [p[:5] for p in principles] == ["STALL"]
        if mode == "type":  # labels ignored: the newest of the type
            assert types == {"progress"} and principles[0].startswith("STALL") and all("type only" in i.reason for i in got)
        if mode == "any":  # the newest of any type, the drift lesson first
            assert principles[0].startswith("DRIFT") and "grounding" in types
        if mode == "random":
            again = pb.retrieve("progress", ["planning_stall"], 5, count=False, mode=mode, rng=random.Random(1))
            assert [i.lesson.id for i in again] == [i.lesson.id for i in got]
        assert pb.retrieve("progress", ["planning_stall"], 0, mode=mode) == []
        with pytest.raises(ValueError, match="retrieval mode"):
            pb.retrieve("progress", ["planning_stall"], 5, mode="psychic")


def test_bar_loops_keeps_the_looped_action_out_of_the_looped_state_for_the_set_steps():
    agent = ScriptedAgent(["look"] * 8)
    result = play(tiny_env(), agent, plugins=[SentryPlugin({"bar_loops": 3})], task="tiny-3", max_steps=14)
    soft = [d["step"] for d in result.of("intervention") if d["kind"] == "soft_repair"]
    assert soft, "the look loop should be repaired"
    barred = [d for d in result.of("intervention") if d["kind"] == "loop_bar"]
    assert barred and barred[0]["step"] == soft[0] and barred[0]["attempt"] == 1
    bar_views = [view for view in agent.views if view.message is not None and view.message.kind == "hard_repair"]
    assert bar_views and "look" not in bar_views[0].message.actions
    hall = result.of("reset")[0]["observation"]
    before = [hall] + [s["observation"] for s in result.of("step")]
    looped = [s for s, b in zip(result.of("step"), before) if s["action"] == "look" and b == hall]
    assert all(not soft[0] <= s["step"] <= soft[0] + 3 for s in looped)
    assert result.result.won
    unbarred = play(tiny_env(), ScriptedAgent(["look"] * 8), plugins=[SentryPlugin({})], task="tiny-3", max_steps=14)
    assert not [d for d in unbarred.of("intervention") if d["kind"] == "loop_bar"]


def test_the_cli_runs_the_ablations(tmp_path):
    args = [arg for name in NAMES for arg in ("--harness", name)]
    result = run_cli("run", "--env", "tiny", "--agent", "noisy", *args, "--episodes", "2", "--quiet",
                     "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert set(summary["harnesses"]) == set(NAMES)
    assert all(figures["errors"] == 0 and figures["episodes"] == 2 for figures in summary["harnesses"].values())
