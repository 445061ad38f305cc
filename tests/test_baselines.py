"""The baselines (plugins/baselines): ACE's delta updates and its ACE-format round trip, Reflexion's reflection
carried from trial 1 into trial 2, AWM's induced workflows, ReasoningBank's distilled and retrieved items, the
runtime monitor's feedback, ACE+Sentry's separate playbooks, each harness run through the CLI on tiny, WebShop
and TextWorld, and their parameters checked before a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground import EpisodeEnd, EpisodeIds, Proposal
from playground.cli.main import main
from playground.plugins.baselines.ace import (
    AcePlaybook,
    AcePlugin,
    Bullet,
    Reflection,
    prune_operations,
    rule_curation,
    rule_reflection,
)
from playground.plugins.baselines.awm import AwmPlugin
from playground.plugins.baselines.monitor import MonitorPlugin
from playground.plugins.baselines.reasoningbank import ReasoningBankPlugin, retrieve
from playground.plugins.baselines.reflexion import ReflexionPlugin
from playground.plugins.baselines.store import read_records
from playground.plugins.baselines.trajectory import Trajectory, abstract_action
from playground.run.traces import read_trace
from playground.testing import ScriptedAgent, play, tiny_env
from playground.testing.openai_server import ScriptedChatServer
from tests.conftest import run_cli

HARNESSES = ["ace", "ace-frozen", "reflexion", "awm", "reasoningbank", "monitor", "ace-sentry"]
FAILING = ["--agent-option", "stop=0.1", "--agent-option", "repeat=0.2", "--agent-option", "invalid=0.15"]


def cli_run(tmp_path: Path, env: str, harness: str, episodes: int = 3, *extra: str) -> Path:
    out = tmp_path / f"{env.replace(':', '-')}-{harness}"
    code = main(["run", "--env", env, "--agent", "noisy", "--harness", harness, "--episodes", str(episodes),
                 "--out", str(out), "--quiet", *extra])
    assert code == 0
    return out


def proposals_with_notes(trace: Path) -> list[list[str]]:
    """The notes each proposal of a trace was shown, as text."""
    events = read_trace(trace)
    texts = {e["hash"]: e["text"] for e in events if e["type"] == "prompt"}
    return [[texts[h] for h in e.get("notes") or ()] for e in events if e["type"] == "proposal"]


def end(won: bool = False, status: str = "truncated", attempt: int = 1, episode: str = "e") -> EpisodeEnd:
    return EpisodeEnd(EpisodeIds("test-run", episode, "tiny", "tiny-1", "h", "default", attempt), status, 5, won)


# -- ACE: delta updates ---------------------------------------------------------------------------------------------


def test_ace_adds_updates_dedupes_counts_and_removes_bullets():
    playbook = AcePlaybook()
    done = playbook.apply([
        {"op": "add", "section": "COMMON MISTAKES AND CORRECT STRATEGIES",
         "text": "When 'take ...' is rejected as invalid: copy the admissible action's wording."},
        {"op": "add", "section": "STRATEGIES AND HARD RULES",
         "text": "To complete a task that starts with 'go {direction}': go -> take -> drop."},
        {"op": "add", "section": "no such section", "text": "Keep notes of the rooms you visited."},
    ], dedupe=0.85)
    assert [d["op"] for d in done] == ["add", "add", "add"]
    assert [b.id for b in playbook.bullets] == ["cms-00001", "shr-00002", "misc-00003"]
    assert playbook.get("misc-00003").section == "OTHERS"

    # the same trigger in the same section: the bullet's text is updated in place, its id and counters kept
    playbook.get("shr-00002").helpful = 2
    done = playbook.apply([{"op": "add", "section": "STRATEGIES AND HARD RULES",
                            "text": "To complete a task that starts with 'go {direction}': go -> take -> examine -> drop."}],
                          dedupe=0.85)
    assert done[0]["op"] == "update" and done[0]["id"] == "shr-00002"
    assert playbook.get("shr-00002").text.endswith("examine -> drop.") and playbook.get("shr-00002").helpful == 2
    assert len(playbook.bullets) == 3

    # a near repeat (word-set similarity >= dedupe) is not added
    done = playbook.apply([{"op": "add", "section": "OTHERS", "text": "Keep notes of all the rooms you visited."}],
                          dedupe=0.85)
    assert done[0]["op"] == "dedupe" and done[0]["id"] == "misc-00003" and len(playbook.bullets) == 3
    # ... but a different mistake is a new bullet
    done = playbook.apply([{"op": "add", "section": "COMMON MISTAKES AND CORRECT STRATEGIES",
                            "text": "When 'open ...' fails because it is locked: unlock it first with its key."}],
                          dedupe=0.85)
    assert done[0]["op"] == "add" and len(playbook.bullets) == 4

    # counters and text through UPDATE, REMOVE, and an id that is gone
    done = playbook.apply([{"op": "update", "id": "cms-00001", "harmful": 1},
                           {"op": "update", "id": "cms-00001", "helpful": 1, "text": "Copy admissible actions."},
                           {"op": "remove", "id": "misc-00003"},
                           {"op": "update", "id": "misc-00003", "helpful": 1}], dedupe=0.85)
    bullet = playbook.get("cms-00001")
    assert (bullet.helpful, bullet.harmful, bullet.text) == (1, 1, "Copy admissible actions.")
    assert playbook.get("misc-00003") is None and done[-1]["skipped"] == "no such bullet"

    # a bullet tagged harmful often enough, and more often than helpful, is removed
    playbook.get("cms-00001").harmful = 3
    assert prune_operations(playbook, 3) == [{"op": "remove", "id": "cms-00001", "why": "harmful=3 > helpful=1"}]
    assert prune_operations(playbook, 0) == []


def test_ace_rule_curator_turns_tags_into_counter_updates_and_insights_into_adds():
    from playground.plugins.baselines.ace import Insight

    reflection = Reflection([Insight("VERIFICATION CHECKLIST", "Before declaring the task done: look for proof.")],
                            {"a-1": "helpful", "b-2": "harmful", "c-3": "neutral"})
    assert rule_curation(reflection) == [
        {"op": "update", "id": "a-1", "helpful": 1}, {"op": "update", "id": "b-2", "harmful": 1},
        {"op": "add", "section": "VERIFICATION CHECKLIST", "text": "Before declaring the task done: look for proof."}]


def test_ace_renders_the_best_bullets_within_the_token_budget():
    playbook = AcePlaybook([Bullet(f"shr-{i:05d}", "STRATEGIES AND HARD RULES", f"strategy number {i} " + "x" * 80,
                                   helpful=i) for i in range(1, 11)])
    whole, shown_all = playbook.render(10_000)
    assert len(shown_all) == 10 and "## STRATEGIES AND HARD RULES" in whole
    part, shown = playbook.render(100)
    assert 0 < len(shown) < 10 and shown == sorted(shown)  # the best ones, shown in playbook order
    assert set(shown) == {f"shr-{i:05d}" for i in range(11 - len(shown), 11)}
    assert playbook.render(5) == ("", [])


def test_ace_reflects_on_the_observable_trajectory_and_tags_what_it_was_shown(tmp_path):
    playbook = tmp_path / "pb.sqlite"
    agent = ScriptedAgent(["look", "look", "look", "look", "look", Proposal("done", "", finish=True)])
    ace = AcePlugin({})
    play(tiny_env(), agent, [ace], task="tiny-3", playbook=str(playbook))
    bullets = AcePlaybook.load(tmp_path / "pb.ace.txt").bullets
    texts = " ".join(b.text for b in bullets)
    assert "When 'look' brings the same observation again" in texts
    assert "Before declaring the task done" in texts
    assert not any(b.section == "STRATEGIES AND HARD RULES" for b in bullets)  # nothing was completed

    # the next episode is shown the playbook and, completing its task, tags the bullets it was shown helpful (by
    # the env's success signal: tiny's win banner is grade text, which the trajectory never holds)
    agent = ScriptedAgent([])
    play(tiny_env(), agent, [AcePlugin({"ace_feedback": "outcome"})], task="tiny-4", playbook=str(playbook))
    assert agent.views[0].notes and "ACE playbook" in agent.views[0].notes[0]
    after = AcePlaybook.load(tmp_path / "pb.ace.txt")
    assert all(after.get(b.id).helpful == 1 for b in bullets)
    assert any(b.section == "STRATEGIES AND HARD RULES" and "take {object from the goal}" in b.text
               for b in after.bullets)
    log = read_records(tmp_path / "pb.ace.txt.deltas.jsonl")
    assert [r["attempt"] for r in log] == [1, 1] and all(r["reflector"] == r["curator"] == "rules" for r in log)


def test_ace_applies_an_episodes_deltas_once_and_frozen_never_writes(tmp_path):
    ace = AcePlugin({})
    play(tiny_env(), ScriptedAgent(["look"] * 6), [ace], task="tiny-3", playbook=str(tmp_path / "pb.sqlite"),
         max_steps=6)
    before = (tmp_path / "pb.ace.txt").read_text()
    reflection = rule_reflection(ace.trajectory, [], None, 4)
    assert ace.curate(reflection, end(episode="test:tiny-3")) == []  # a replay of the same episode: nothing twice
    assert (tmp_path / "pb.ace.txt").read_text() == before
    play(tiny_env(), ScriptedAgent(["look"] * 6), [AcePlugin({"ace_mode": "frozen"})], task="tiny-5",
         playbook=str(tmp_path / "pb.sqlite"), max_steps=6)
    assert (tmp_path / "pb.ace.txt").read_text() == before


def test_ace_offline_mode_grows_the_playbook_on_train_and_evaluates_it_frozen_on_test(tmp_path):
    playbook = tmp_path / "offline.ace.txt"
    # outcome feedback: on tiny nothing but its win banner (grade text, never in the trajectory) says a task is done
    shared = ["--param", f"ace_playbook={playbook}", "--param", "ace_feedback=outcome", *FAILING]
    cli_run(tmp_path / "epoch1", "tiny", "ace", 8, "--split", "train", *shared)
    after_one = AcePlaybook.load(playbook)
    cli_run(tmp_path / "epoch2", "tiny", "ace", 8, "--split", "train", *shared)
    after_two = AcePlaybook.load(playbook)
    assert after_one.bullets and sum(b.helpful + b.harmful for b in after_two.bullets) > \
        sum(b.helpful + b.harmful for b in after_one.bullets)  # the second epoch tags what the first wrote
    frozen = playbook.read_text()
    test = cli_run(tmp_path / "test", "tiny", "ace-frozen", 4, "--split", "test", *shared)
    assert playbook.read_text() == frozen
    assert all(any("ACE playbook" in note for note in proposals_with_notes(trace)[0])
               for trace in (test / "traces" / "ace-frozen").glob("*.jsonl"))


def test_ace_outcome_feedback_uses_the_success_signal_for_strategies_and_checks():
    trajectory = Trajectory(goal="Bring the lamp to the hall.")
    from playground.plugins.baselines.trajectory import Step

    trajectory.steps = [Step("take lamp", "You take the lamp.", True, "take"),
                        Step("drop lamp", "You drop the lamp. Well done!", True, "use")]
    trajectory.ending = "ended"
    sections = lambda r: [i.section for i in r.insights]  # noqa: E731
    # a win banner is a grade, not a completion the agent observed
    assert "STRATEGIES AND HARD RULES" not in sections(rule_reflection(trajectory, [], None, 4))
    trajectory.steps[-1] = Step("click[Buy Now]", "Thank you for shopping with us! You bought the lamp.", True,
                                "finish")  # the page confirming the agent's own purchase is
    assert "STRATEGIES AND HARD RULES" in sections(rule_reflection(trajectory, [], None, 4))
    lost = rule_reflection(trajectory, [], False, 4)  # completed to the eye, but the env says not solved
    assert "STRATEGIES AND HARD RULES" not in sections(lost) and "VERIFICATION CHECKLIST" in sections(lost)
    trajectory.steps[-1] = Step("drop lamp", "You drop the lamp.", True, "use")
    assert "STRATEGIES AND HARD RULES" in sections(rule_reflection(trajectory, [], True, 4))


def test_ace_with_a_judge_model_uses_its_reflection_and_curation(tmp_path):
    (tmp_path / "pb.ace.txt").write_text("## OTHERS\n[misc-00001] helpful=0 harmful=0 :: An old tip.\n"
                                         "[misc-00002] helpful=0 harmful=0 :: A wrong tip.\n")
    reflection = json.dumps({"insights": [{"section": "VERIFICATION CHECKLIST", "content": "Check the goal."}],
                             "bullet_tags": [{"id": "misc-00001", "tag": "helpful"}, {"id": "nope", "tag": "helpful"}]})
    curation = json.dumps({"operations": [
        {"type": "ADD", "section": "VERIFICATION CHECKLIST", "content": "Check every constraint of the goal."},
        {"type": "UPDATE", "id": "misc-00001", "content": "An old tip, refined."},
        {"type": "REMOVE", "id": "misc-00002"}]})
    with ScriptedChatServer([reflection, curation]) as server:
        ace = AcePlugin({"judge_base_url": server.base_url, "judge_model": "judge"})
        play(tiny_env(), ScriptedAgent(["look"] * 3), [ace], task="tiny-3", playbook=str(tmp_path / "pb.sqlite"),
             max_steps=3)
        assert len(server.requests) == 2
        assert "reflector of ACE" in server.requests[0]["messages"][0]["content"]
        assert "curator of ACE" in server.requests[1]["messages"][0]["content"]
    playbook = AcePlaybook.load(tmp_path / "pb.ace.txt")
    assert sorted((b.id, b.text, b.helpful) for b in playbook.bullets) == [
        ("misc-00001", "An old tip, refined.", 1), ("vc-00003", "Check every constraint of the goal.", 0)]
    assert read_records(tmp_path / "pb.ace.txt.deltas.jsonl")[0]["curator"] == "model"


def test_ace_playbook_round_trips_through_the_ace_format(tmp_path, capsys):
    out = cli_run(tmp_path, "tiny", "ace", 12, *FAILING)
    grown = out / "playbooks" / "ace.ace.txt"
    original = AcePlaybook.load(grown)
    assert len(original.bullets) >= 3 and any(b.helpful or b.harmful for b in original.bullets)
    database, exported = tmp_path / "imported.sqlite", tmp_path / "exported.ace.txt"
    assert main(["playbook", "import", str(database), str(grown), "--format", "ace"]) == 0
    assert main(["playbook", "export", str(database), str(exported), "--format", "ace"]) == 0
    capsys.readouterr()
    again = AcePlaybook.load(exported)
    assert [(b.id, b.section, b.text, b.helpful, b.harmful) for b in again.bullets] == \
        [(b.id, b.section, b.text, b.helpful, b.harmful) for b in original.bullets]
    assert exported.read_text() == grown.read_text()

    # and the exported file is an ACE playbook the ace harness reads (frozen: shown, never changed)
    reused = cli_run(tmp_path, "tiny", "ace-frozen", 2, "--param", f"ace_playbook={exported}")
    trace = next((reused / "traces" / "ace-frozen").glob("*.jsonl"))
    notes = proposals_with_notes(trace)[0]
    assert any(original.bullets[0].id in note for note in notes)
    assert exported.read_text() == grown.read_text()


# -- Reflexion ------------------------------------------------------------------------------------------------------


def test_reflexion_carries_trial_ones_reflection_into_trial_two(tmp_path):
    playbook = str(tmp_path / "pb.sqlite")
    first = ScriptedAgent(["look"] * 4 + [Proposal("done", "", finish=True)])
    play(tiny_env(), first, [ReflexionPlugin({})], task="tiny-3", playbook=playbook, attempt=1)
    assert not any(view.notes for view in first.views)  # trial 1 has no earlier reflections
    stored = read_records(tmp_path / "pb.reflections.jsonl")
    assert len(stored) == 1 and stored[0]["attempt"] == 1
    assert "Trial 1 failed" in stored[0]["reflection"] and "I repeated 'look'" in stored[0]["reflection"]

    second = ScriptedAgent([])
    result = play(tiny_env(), second, [ReflexionPlugin({})], task="tiny-3", playbook=playbook, attempt=2)
    assert result.result.won
    assert stored[0]["reflection"] in second.views[0].notes[0] and second.views[-1].notes == second.views[0].notes
    assert len(read_records(tmp_path / "pb.reflections.jsonl")) == 1  # a won trial reflects on nothing

    other = ScriptedAgent([])
    play(tiny_env(), other, [ReflexionPlugin({})], task="tiny-4", playbook=playbook, attempt=2)
    assert not other.views[0].notes  # reflections stay with their own task


def test_reflexion_harness_retries_failed_trials_with_the_reflections_in_context(tmp_path):
    out = cli_run(tmp_path, "tiny", "reflexion", 2, "--agent-option", "stop=1.0")
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    for record in records:
        assert [a["won"] for a in record["attempts"]] == [False, False, False]  # noisy stops at once every trial
        traces = [out / a["trace"] for a in record["attempts"]]
        assert proposals_with_notes(traces[0])[0] == []
        trial2 = " ".join(proposals_with_notes(traces[1])[0])
        trial3 = " ".join(proposals_with_notes(traces[2])[0])
        assert "Trial 1 failed" in trial2 and "Trial 2" not in trial2
        assert "Trial 1 failed" in trial3 and "Trial 2 failed" in trial3
    assert json.loads((out / "summary.json").read_text())["harnesses"]["reflexion"]["mean_attempts"] == 3.0
    summary = json.loads((cli_run(tmp_path, "tiny", "reflexion:2", 1, "--agent-option", "stop=1.0")
                          / "summary.json").read_text())
    assert summary["harnesses"]["reflexion:2"]["mean_attempts"] == 2.0


def test_reflexion_with_a_judge_model_writes_its_reflection(tmp_path):
    with ScriptedChatServer([json.dumps({"reflection": "I looped on look. Next time go east first."})]) as server:
        plugin = ReflexionPlugin({"judge_base_url": server.base_url, "judge_model": "judge"})
        play(tiny_env(), ScriptedAgent(["look"] * 3), [plugin], task="tiny-3", playbook=str(tmp_path / "pb.sqlite"),
             max_steps=3)
    stored = read_records(tmp_path / "pb.reflections.jsonl")
    assert stored[0]["reflection"] == "Trial 1: I looped on look. Next time go east first." and stored[0]["by"] == "model"


# -- AWM ------------------------------------------------------------------------------------------------------------


def test_awm_induces_a_workflow_from_a_success_and_shows_it_on_later_tasks(tmp_path):
    playbook = str(tmp_path / "pb.sqlite")
    play(tiny_env(), ScriptedAgent(["look"] * 3), [AwmPlugin({})], task="tiny-3", playbook=playbook, max_steps=3)
    assert read_records(tmp_path / "pb.workflows.jsonl") == []  # no success, no workflow
    # tiny says the task is done only in its win banner, a grade the trajectory never holds: the env's signal
    play(tiny_env(), ScriptedAgent([]), [AwmPlugin({})], task="tiny-3", playbook=playbook)
    assert read_records(tmp_path / "pb.workflows.jsonl") == []  # observed: no completion seen, no workflow
    play(tiny_env(), ScriptedAgent([]), [AwmPlugin({"awm_success": "env"})], task="tiny-3", playbook=playbook)
    [workflow] = read_records(tmp_path / "pb.workflows.jsonl")
    assert "take {object from the goal}" in workflow["steps"] and workflow["success_by"] == "env"
    assert not any(step for step in workflow["steps"] if "lamp" in step or "apple" in step)  # entities abstracted
    later = ScriptedAgent([])
    play(tiny_env(), later, [AwmPlugin({"awm_success": "env"})], task="tiny-9", playbook=playbook)
    assert "Workflow 1:" in later.views[0].notes[0] and "take {object from the goal}" in later.views[0].notes[0]
    assert len(read_records(tmp_path / "pb.workflows.jsonl")) == 2  # induced again: counted, shown once
    assert later.views[0].notes[0].count("Workflow ") == 1


def test_entity_slots_are_named_by_the_action_kind():
    goal = "Buy red running shoes in size 9"
    assert abstract_action("search[red running shoes]", "search", goal) == "search[{query from the goal}]"
    assert abstract_action("click[B0X123]", "open", goal) == "click[{item}]"
    assert abstract_action("click[Buy Now]", "finish", goal) == "click[Buy Now]"
    assert abstract_action("put apple on table", "use", "eat") == "put {object} on {object}"
    assert abstract_action("look", "look", goal) == "look"


# -- ReasoningBank --------------------------------------------------------------------------------------------------


def test_reasoningbank_distils_items_from_failures_and_successes_and_retrieves_the_closest(tmp_path):
    playbook = str(tmp_path / "pb.sqlite")
    play(tiny_env(), ScriptedAgent(["look"] * 5 + [Proposal("done", "", finish=True)]), [ReasoningBankPlugin({})],
         task="tiny-3", playbook=playbook)
    failures = read_records(tmp_path / "pb.memory.jsonl")
    assert failures and not any(r["success"] for r in failures)
    assert {"Do not repeat an action that changes nothing", "Do not stop before the task is confirmed"} <= \
        {r["title"] for r in failures}
    # tiny's win banner is grade text the trajectory never holds: the success is the env's signal
    play(tiny_env(), ScriptedAgent([]), [ReasoningBankPlugin({"rb_success": "env"})], task="tiny-4",
         playbook=playbook)
    records = read_records(tmp_path / "pb.memory.jsonl")
    assert [r["title"] for r in records if r["success"]] == ["A sequence that completed a similar task"]
    agent = ScriptedAgent([])
    play(tiny_env(), agent, [ReasoningBankPlugin({"rb_k": 2})], task="tiny-5", playbook=playbook)
    assert agent.views[0].notes[0].count("# Memory item") == 2

    items = [{"query": q, "title": t, "description": "d", "content": "c"} for q, t in
             [("buy red shoes size 9", "shoes"), ("find a blue lamp", "lamp"), ("cook an omelette", "cook")]]
    assert [i["title"] for i in retrieve(items, "I want a lamp that is blue", 1)] == ["lamp"]
    assert retrieve(items, "zzz qqq", 1) == []


# -- the runtime monitor --------------------------------------------------------------------------------------------


def test_monitor_gives_feedback_on_repeats_and_invalid_actions_and_keeps_nothing(tmp_path):
    agent = ScriptedAgent(["look", "look", "look", "fly away", "inventory", "inventory"])
    result = play(tiny_env(), agent, [MonitorPlugin({})], task="tiny-3", playbook=str(tmp_path / "pb.sqlite"))
    assert [(d["step"], d["detections"][0]["subtype"]) for d in result.of("intervention")] == [(1, "repeat"),
                                                                                                (2, "invalid")]
    messages = [v.message for v in agent.views if v.message]
    assert messages[0].kind == "feedback" and messages[0].labels == ("repetition_or_looping",)
    assert "not a valid action" in messages[1].text and messages[1].labels == ("invalid_action",)
    assert result.result.won and not list(tmp_path.iterdir())  # no memory


def test_monitor_stall_rule_fires_once_per_step_after_steps_that_bring_nothing_new():
    agent = ScriptedAgent(["look", "inventory", "look", "inventory", "look", "inventory"])
    result = play(tiny_env(), agent, [MonitorPlugin({"monitor_window": 0})], task="tiny-3", max_steps=8)
    fired = [(d["step"], d["detections"][0]["subtype"]) for d in result.of("intervention")]
    assert fired and {rule for _, rule in fired} == {"stall"}
    assert len({step for step, _ in fired}) == len(fired)  # once per step
    assert "brought nothing new" in next(v.message.text for v in agent.views if v.message)


# -- ACE + Sentry ---------------------------------------------------------------------------------------------------


def test_ace_sentry_keeps_the_two_playbooks_apart_and_sentry_retrieves_only_on_soft_repair(tmp_path):
    out = cli_run(tmp_path, "tiny", "ace-sentry", 12, *FAILING)
    ace_file, sentry_file = out / "playbooks" / "ace-sentry.ace.txt", out / "playbooks" / "ace-sentry.sqlite"
    assert AcePlaybook.load(ace_file).bullets
    from playground.plugins.playbook.store import Playbook

    with Playbook(sentry_file, read_only=True) as sentry:
        lessons = list(sentry.all())
    assert lessons and all(lesson.failure_type != "procedure" for lesson in lessons)  # no ACE bullet in Sentry's
    assert not any(lesson.principle in ace_file.read_text() for lesson in lessons)
    for trace in (out / "traces" / "ace-sentry").glob("*.jsonl"):
        events = read_trace(trace)
        for event in events:
            if event["type"] == "intervention" and event["details"].get("lessons"):
                assert event["kind"] == "soft_repair"
        for notes in proposals_with_notes(trace):
            assert all("ACE playbook" in note for note in notes)  # the only standing note is ACE's


# -- every harness runs; bad parameters are refused -----------------------------------------------------------------


def test_every_baseline_is_listed_by_playground_harnesses():
    result = run_cli("harnesses")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")}
    assert set(HARNESSES) | {"reflexion:"} <= listed


def test_the_baselines_are_points_of_comparison_not_candidates_in_darcs_library():
    from playground.host.manager import Host
    from playground.plugins.darc.profile import library

    host = Host().load()
    baselines = {"ace", "reflexion", "awm", "reasoningbank", "monitor"}
    assert baselines <= set(host.interventions.names())
    assert all(not host.interventions.get(name).candidate for name in baselines)
    assert not baselines & {spec.name for spec in library(host, "tiny")}
    assert "sentry" in {spec.name for spec in library(host, "tiny")}


@pytest.mark.parametrize("harness", HARNESSES)
def test_each_baseline_runs_on_tiny_and_webshop(tmp_path, harness):
    for env in ("tiny", "webshop"):
        out = cli_run(tmp_path, env, harness, 3, *FAILING)
        summary = json.loads((out / "summary.json").read_text())["harnesses"][harness]
        assert summary["episodes"] == 3 and summary["errors"] == 0


@pytest.mark.parametrize("harness", HARNESSES)
def test_each_baseline_runs_on_textworld(tmp_path, harness):
    out = cli_run(tmp_path, "textworld:easy", harness, 2, *FAILING)
    summary = json.loads((out / "summary.json").read_text())["harnesses"][harness]
    assert summary["episodes"] == 2 and summary["errors"] == 0


@pytest.mark.parametrize("param, message", [
    ("ace_mode=sometimes", "ace parameter 'ace_mode' must be one of online, frozen"),
    ("ace_budget=-3", "ace parameter 'ace_budget' must be a non-negative number"),
    ("awm_success=judge", "awm_success=judge needs a judge model"),
    ("judge_base_url=http://127.0.0.1:9/v1", "judge_base_url needs judge_model too"),
])
def test_bad_baseline_parameters_are_refused_before_the_run(tmp_path, param, message):
    harness = "awm" if param.startswith("awm") else "ace"
    result = run_cli("run", "--env", "tiny", "--agent", "noisy", "--harness", harness, "--episodes", "1",
                     "--param", param, "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


def test_a_broken_memory_file_named_up_front_is_refused_with_its_line(tmp_path):
    broken = tmp_path / "broken.ace.txt"
    broken.write_text("## OTHERS\n[misc-00001] helpful=0 harmful=0 :: fine\nnot a bullet\n")
    result = run_cli("run", "--env", "tiny", "--agent", "noisy", "--harness", "ace", "--episodes", "1",
                     "--param", f"ace_playbook={broken}", "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and "ace_playbook" in result.stderr and "line 3" in result.stderr
    memory = tmp_path / "memory.jsonl"
    memory.write_text('{"title": "t"}\n{oops\n')
    result = run_cli("run", "--env", "tiny", "--agent", "noisy", "--harness", "reasoningbank", "--episodes", "1",
                     "--param", f"rb_memory={memory}", "--out", str(tmp_path / "run2"))
    assert result.returncode == 2 and f"{memory}:2: not JSON" in result.stderr


def test_the_trajectory_holds_no_grade():
    fields = set(Trajectory.__dataclass_fields__) | set(Trajectory().__dict__)
    assert not fields & {"won", "reward", "score", "status"}


def test_a_baseline_memory_beside_a_url_playbook_of_another_kind_is_refused_by_name(tmp_path):
    """A playbook URL other than PostgreSQL's (tests/test_baselines_postgres.py) has no folder for a baseline's
    memory file: the error names the parameter that names the file instead of a file being made under a path built
    from the URL."""
    from playground import EpisodeStart
    from playground.plugins.baselines.memory import FileMemory, MemoryFileError, memory_for

    ids = EpisodeIds("r", "e", "tiny", "t", "h")
    start = EpisodeStart(ids, "noisy", 1, "goal", "obs", 10, playbook="mysql://u@127.0.0.1:3306/db")
    with pytest.raises(MemoryFileError, match=r"mysql://\.\.\..*--param rb_memory=PATH"):
        memory_for(start, "memory.jsonl", "", "rb_memory")
    memory = memory_for(start, "memory.jsonl", str(tmp_path / "m.jsonl"), "rb_memory")
    assert isinstance(memory, FileMemory) and memory.path == tmp_path / "m.jsonl"
    assert not any(Path.cwd().glob("postgresql:*"))
