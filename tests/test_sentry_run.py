"""Sentry end to end: lessons only after verified recoveries, traceable, reused, and never over-exposed."""

from __future__ import annotations

import json
from pathlib import Path

from playground.host.manager import Host
from playground.plugins.playbook.store import Playbook
from playground.plugins.sentry.harness import SentryPlugin
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import ScriptedAgent, play, tiny_env

TASKS = [f"tiny-{i}" for i in range(20_000, 20_040)]


def _run(tmp_path: Path, name: str, harnesses, playbook: Path, tasks=TASKS):
    return run(Host().load(), RunConfig(env="tiny", task_set="default", split="test", tasks=tasks, agent="noisy",
                                        harnesses=list(harnesses), out=str(tmp_path / name), playbook=str(playbook),
                                        agent_options={"stop": 0.04, "repeat": 0.08, "stall": 0.08}))


def _events(run_dir: Path, harness: str):
    for trace in sorted((run_dir / "traces" / harness).glob("*.jsonl")):
        yield trace, [json.loads(line) for line in trace.read_text().splitlines()]


def test_sentry_beats_base_and_its_lessons_are_traceable_and_reused(tmp_path):
    playbook = tmp_path / "playbook.sqlite"
    summary = _run(tmp_path, "first", ["base", "sentry"], playbook)
    base, sentry = summary["harnesses"]["base"], summary["harnesses"]["sentry"]
    assert sentry["success_rate"] > base["success_rate"]
    assert sentry["invalid_actions_per_episode"] < base["invalid_actions_per_episode"]
    assert sentry["lessons_added"] > 0 and base["lessons_added"] == 0

    with Playbook(playbook) as pb:
        stored = {lesson.id: lesson for lesson in pb.all()}
    assert len(stored) == sentry["lessons_added"]
    traced = 0
    for trace, events in _events(tmp_path / "first", "sentry"):
        header = events[0]
        soft_steps = {e["step"] for e in events if e["type"] == "intervention" and e["kind"] == "soft_repair"}
        resolved = {e["repair_step"] for e in events if e["type"] == "verification" and e["verdict"] == "resolved"}
        for lesson in (e for e in events if e["type"] == "lesson"):
            prov = lesson["provenance"]
            assert prov["episode"] == header["episode_id"] and prov["task"] == header["task_id"]
            assert prov["step"] in soft_steps and prov["step"] in resolved
            assert stored[lesson["id"]].provenance == prov
            traced += 1
    assert traced == len(stored)

    _run(tmp_path, "second", ["sentry-frozen"], playbook, tasks=TASKS[:15])
    reused = [lid for _, events in _events(tmp_path / "second", "sentry-frozen")
              for e in events if e["type"] == "intervention" for lid in e["details"].get("lessons", [])]
    assert reused and set(reused) <= set(stored)
    with Playbook(playbook) as pb:
        assert len(list(pb.all())) == len(stored)  # frozen: retrieval on, no updates

    frozen_bytes = playbook.read_bytes()
    summary = run(Host().load(), RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS[:15], agent="noisy",
                                           harnesses=["sentry"], out=str(tmp_path / "third"), playbook=str(playbook),
                                           params={"playbook_read_only": True},
                                           agent_options={"stop": 0.04, "repeat": 0.08, "stall": 0.08}))
    shown = [lid for _, events in _events(tmp_path / "third", "sentry")
             for e in events if e["type"] == "intervention" for lid in e["details"].get("lessons", [])]
    assert shown and summary["harnesses"]["sentry"]["lessons_added"] == 0 and summary["harnesses"]["sentry"]["errors"] == 0
    assert playbook.read_bytes() == frozen_bytes  # read-only: not even the counters change


def test_no_detection_means_no_retrieval(tmp_path):
    playbook = tmp_path / "pb.sqlite"
    with Playbook(playbook) as pb:
        pb.add("progress", ["repetition_or_looping"], "a trigger", "a principle")
    result = play(tiny_env(), ScriptedAgent(), plugins=[SentryPlugin({})], task="tiny-3", playbook=str(playbook))
    assert result.result.won and result.count("intervention") == 0
    with Playbook(playbook) as pb:
        assert [lesson.retrieved for lesson in pb.all()] == [0]


class RecordingAgent(ScriptedAgent):
    """Loops on `look`, then follows the expert; keeps every view."""


def test_exposure_sentry_shows_only_matching_lessons_persistent_shows_all(tmp_path):
    playbook = tmp_path / "pb.sqlite"
    with Playbook(playbook) as pb:
        pb.add("progress", ["repetition_or_looping"], "looping on look", "LOOP-LESSON do something new")
        pb.add("grounding", ["hallucination"], "naming unseen things", "FOREIGN-LESSON only act on what you saw")
    agent = RecordingAgent(["look"] * 4)
    play(tiny_env(), agent, plugins=[SentryPlugin({})], task="tiny-3", playbook=str(playbook), max_steps=12)
    texts = [(v.message.text if v.message else "") + "".join(v.notes) for v in agent.views]
    assert any("LOOP-LESSON" in t for t in texts)
    assert not any("FOREIGN-LESSON" in t for t in texts)
    assert "LOOP-LESSON" not in texts[0]  # nothing before a detection

    agent = RecordingAgent(["look"] * 4)
    play(tiny_env(), agent, plugins=[SentryPlugin({"persistent": True})], task="tiny-3", playbook=str(playbook),
         max_steps=12)
    assert all("FOREIGN-LESSON" in "".join(v.notes) for v in agent.views)


def test_follow_up_keeps_offering_fresh_actions_for_the_set_number_of_steps():
    agent = RecordingAgent(["look"] * 4)
    play(tiny_env(), agent, plugins=[SentryPlugin({"follow_up": 2})], task="tiny-3", max_steps=12)
    repairs = [v.step for v in agent.views if v.message and v.message.kind == "soft_repair"]
    assert repairs, "the look loop should be repaired"
    first = repairs[0]
    noted = {v.step for v in agent.views if any("not tried recently" in n for n in v.notes)}
    assert {first + 1, first + 2} <= noted and first not in noted
    assert first + 3 not in noted  # the cooldown puts the next repair at first + 3 at the earliest
    for view in agent.views:
        for note in (n for n in view.notes if "not tried recently" in n):
            offered = note.split(": ", 1)[1].split(", ")
            assert "look" not in offered and set(offered) <= set(view.admissible_actions)

    agent = RecordingAgent(["look"] * 4)
    play(tiny_env(), agent, plugins=[SentryPlugin({})], task="tiny-3", max_steps=12)
    assert not any(v.notes for v in agent.views)  # follow_up defaults to 0: no standing note
