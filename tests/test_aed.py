"""AED and forks: traces record the agent's view, forks rebuild the recorded state, diagnoses are grounded in
the trace, both replay arms start from the same state, exports validate and round-trip, end to end on tiny."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playground.plugins.aed.diagnose import check_record, diagnose_run, llm_diagnoses, rule_diagnoses
from playground.plugins.aed.figures import figures_of
from playground.plugins.aed.replay import GRADES, evidence_grade
from playground.plugins.aed.views import ExportError, build_view, export, read_export, validate

from playground.agents.chat import Completion
from playground.agents.llm import SYSTEM_PROMPT, LLMAgent
from playground.cli.main import main
from playground.core.events import HeaderEvent
from playground.core.hookspecs import hookimpl
from playground.host.manager import get_host
from playground.run.forks import ForkError, fork, load_episode, prefix_turns, rebuild
from playground.run.rundir import load_records
from playground.run.traces import TraceWriter, read_trace
from playground.testing import ScriptedAgent, play, tiny_env
from playground.testing.openai_server import Reply, ScriptedChatServer

NOISE = ["invalid=0.3", "stop=0.05"]


def make_run(out: Path, episodes: int = 12, harnesses=("base", "sentry"), max_steps: int = 12) -> Path:
    options = [arg for pair in NOISE for arg in ("--agent-option", pair)]
    harness_args = [arg for h in harnesses for arg in ("--harness", h)]
    code = main(["run", "--env", "tiny", "--agent", "noisy", *options, *harness_args, "--episodes", str(episodes),
                 "--max-steps", str(max_steps), "--out", str(out), "--quiet"])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("aed") / "run")


def traces(run: Path) -> list[Path]:
    return sorted((run / "traces").rglob("*.jsonl"))


# --- 1. trace completeness -------------------------------------------------------------------------------------

class Notes:
    @hookimpl
    def agent_notes(self, context):
        return "a standing note that is the same every step"


def test_proposals_record_the_view_and_notes_once():
    result = play(tiny_env(), ScriptedAgent(["look", "not a verb"]), [Notes()], task="tiny-3")
    proposals = result.of("proposal")
    prompts = result.of("prompt")
    assert len(prompts) == 1 and prompts[0]["text"] == "a standing note that is the same every step"
    for proposal in proposals:
        assert proposal["admissible_actions"] and proposal["notes"] == [prompts[0]["hash"]]
        assert proposal["message"] is None and proposal["prompt"] is None
    assert proposals[0]["admissible_actions"] == list(result.of("reset")[0]["admissible_actions"])


class FixedModel:
    def complete(self, messages, *, choices=None, max_tokens=None):
        return Completion("Thought: go.\nAction: look", 3, 1)


def test_llm_prompts_are_stored_once_per_text_and_referenced():
    result = play(tiny_env(expert=False), LLMAgent(FixedModel()), task="tiny-3", max_steps=4)
    texts = {p["hash"]: p["text"] for p in result.of("prompt")}
    assert list(texts.values()).count(SYSTEM_PROMPT) == 1
    for proposal in result.of("proposal"):
        roles = [m["role"] for m in proposal["prompt"]]
        assert roles == ["system", "user"]
        user = texts[proposal["prompt"][1]["hash"]]
        assert "Valid actions: " + ", ".join(proposal["admissible_actions"]) in user


def test_header_records_what_rebuilds_the_start(tiny_run):
    header = read_trace(traces(tiny_run)[0])[0]
    for key in ("env", "task_set", "task_id", "seed", "agent", "agent_options", "harness", "params", "max_steps"):
        assert key in header, key
    assert header["agent_options"] == {"invalid": 0.3, "stop": 0.05}


# --- 2. forks --------------------------------------------------------------------------------------------------

def test_forks_reproduce_every_recorded_observation(tiny_run):
    host = get_host()
    for path in traces(tiny_run)[:6]:
        episode = load_episode(path)
        for position in range(len(episode.steps) + 1):
            env, observation, _ = rebuild(host, episode, position)
            env.close()
            assert observation == episode.observation_before(position)


def test_fork_continues_from_the_recorded_state(tiny_run, tmp_path):
    episode = load_episode(traces(tiny_run)[0])
    position = min(2, len(episode.steps))
    result = fork(get_host(), episode, position, tmp_path / "f.jsonl", agent="expert")
    events = read_trace(tmp_path / "f.jsonl")
    assert events[0]["source_trace"] == str(episode.path) and events[0]["fork_point"] == position
    assert events[1]["observation"] == episode.observation_before(position) == result.start_observation
    assert result.restored["observation_equal"] and result.won
    assert events[2]["step"] == position  # numbered from the fork point


def test_fork_refuses_a_trace_that_does_not_match_the_env(tiny_run, tmp_path):
    source = traces(tiny_run)[0]
    lines = source.read_text().splitlines()
    events = [json.loads(line) for line in lines]
    step = next(i for i, e in enumerate(events) if e["type"] == "step")
    events[step]["observation"] = "a room that never was"
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(json.dumps(e) + "\n" for e in events))
    with pytest.raises(ForkError, match="differs from the recorded one"):
        rebuild(get_host(), load_episode(tampered), 1)


class Narrow:
    """Shows the agent only the first two admissible actions (an `agent_actions` view, like a guard's top-k)."""

    @hookimpl
    def agent_actions(self, context):
        return context.admissible_actions[:2]


def test_fork_rebuilds_a_step_whose_view_a_plugin_narrowed(tmp_path):
    played = play(tiny_env(), ScriptedAgent(), [Narrow()], task="tiny-3", max_steps=6)
    proposal = played.of("proposal")[1]
    assert len(proposal["admissible_actions"]) == 2 < len(proposal["env_admissible_actions"])
    trace = TraceWriter(tmp_path / "t.jsonl", HeaderEvent(env="tiny", task_set="default", task_id="tiny-3", seed=0,
                                                          max_steps=6))
    for event in played.trace:
        trace.emit(event)
    trace.close()
    episode = load_episode(tmp_path / "t.jsonl")
    env, observation, info = rebuild(get_host(), episode, 1)  # checked against the env's whole list, not the view
    env.close()
    assert list(info["admissible_actions"]) == proposal["env_admissible_actions"]
    assert episode.steps[1].admissible == proposal["admissible_actions"]


def test_step_events_record_the_action_kind_and_the_prefix_keeps_it(tiny_run):
    episode = load_episode(traces(tiny_run)[0])
    assert {s.kind for s in episode.steps if s.valid} - {""}
    assert [t.kind for t in prefix_turns(episode, len(episode.steps))] == [s.kind for s in episode.steps]


class Watcher:
    def __init__(self) -> None:
        self.steps = []

    @hookimpl
    def step_completed(self, outcome):
        self.steps.append(outcome.proposal.action)


class Meddler(Watcher):
    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        return None


def test_fork_observers_watch_but_cannot_intervene(tiny_run, tmp_path):
    episode = load_episode(traces(tiny_run)[0])
    watcher = Watcher()
    result = fork(get_host(), episode, 1, tmp_path / "w.jsonl", agent="expert", observers=[("watch", watcher)])
    events = read_trace(tmp_path / "w.jsonl")
    assert events[0]["observers"] == ["watch"] and events[0]["interventions"] == []
    assert watcher.steps == [e["action"] for e in events if e["type"] == "step"] and len(watcher.steps) == result.steps
    with pytest.raises(ForkError, match="observers may only watch"):
        fork(get_host(), episode, 1, tmp_path / "m.jsonl", agent="expert", observers=[("meddler", Meddler())])
    assert not (tmp_path / "m.jsonl").exists()


def test_fork_command(tiny_run, capsys):
    episode = load_episode(traces(tiny_run)[0])
    key = f"{episode.header.harness}/{episode.header.task_id}"
    assert main(["fork", str(tiny_run), "--episode", key, "--step", "1", "--agent", "expert"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["restored"]["observation_equal"] and Path(out["trace"]).parent.parent.name == "forks"
    assert main(["fork", str(tiny_run), "--episode", key, "--step", "999"]) == 2


# --- 3. diagnoses ----------------------------------------------------------------------------------------------

def failed(run: Path):
    for path in traces(run):
        episode = load_episode(path)
        if episode.status not in ("won", "error"):
            yield str(path.relative_to(run)), episode


def test_rule_diagnoses_are_grounded_and_executable(tiny_run):
    found = 0
    for relative, episode in failed(tiny_run):
        for record in rule_diagnoses(episode, relative):
            assert check_record(record, episode) is None, record
            found += 1
    assert found


def test_made_up_quotations_and_bad_corrections_are_rejected(tiny_run):
    relative, episode = next(failed(tiny_run))
    record = rule_diagnoses(episode, relative)[0]
    assert check_record({**record, "quotations": ["the agent was clearly confused by the unicorn"]},
                        episode) == "quotation_not_in_trace"
    assert check_record({**record, "quotations": []}, episode) == "no_quotation"
    assert check_record({**record, "quotations": ["go"]}, episode) == "quotation_too_short"
    assert check_record({**record, "correction": "fly to the moon"}, episode) == "correction_not_admissible"
    assert check_record({**record, "correction": None, "correction_reason": ""},
                        episode) == "null_correction_without_reason"
    assert check_record({**record, "step": 10_000}, episode) == "step_out_of_range"
    if record["attributed_action"]:
        assert check_record({**record, "correction": record["attributed_action"]}, episode) == "correction_is_the_error"
    # a quotation that is a substring of an observation, not a whole field, is grounded
    observation = episode.steps[0].observation
    assert check_record({**record, "quotations": [observation[2:-2]]}, episode) is None


def test_llm_diagnoser_against_the_scripted_server(tiny_run):
    relative, episode = next(failed(tiny_run))
    rule = rule_diagnoses(episode, relative)[0]
    good = json.dumps({"step": rule["step"], "responsible": "agent", "explanation": "it sent a garbled command",
                       "quotations": rule["quotations"][:1], "correction": rule["correction"],
                       "correction_reason": rule["correction_reason"]})
    invented = json.dumps({"step": rule["step"], "responsible": "agent", "explanation": "x",
                           "quotations": ["a dragon ate the key"],
                           "correction": rule["correction"], "correction_reason": ""})
    from playground.agents.http_model import HTTPChatModel

    with ScriptedChatServer([f"Here you go:\n```json\n{good}\n```", invented, "no idea"]) as server:
        model = HTTPChatModel(server.base_url, "test-model", retries=0)
        records = [llm_diagnoses(episode, relative, model)[0] for _ in range(3)]
        assert "Episode status" in server.requests[0]["messages"][1]["content"]
    assert check_record(records[0], episode) is None and records[0]["responsible"] == "agent"
    assert check_record(records[1], episode) == "quotation_not_in_trace"
    assert records[2].get("unparseable")


def test_the_llm_producer_is_the_default_when_a_model_is_given(tmp_path, capsys):
    run = make_run(tmp_path / "run", episodes=6, harnesses=("base",), max_steps=4)
    failed_count = sum(1 for _ in failed(run))
    with ScriptedChatServer(["no idea"] * failed_count) as server:
        capsys.readouterr()
        assert main(["aed", "diagnose", str(run), "--judge-base-url", server.base_url, "--judge-model", "m"]) == 0
        assert len(server.requests) == failed_count
    summary = json.loads(capsys.readouterr().out)
    assert summary["producer"] == "llm" and summary["rejected"] == {"unparseable_reply": failed_count}
    assert summary["yield"] == {"produced": failed_count, "usable": 0, "checked": 0, "with_correction": 0}
    assert main(["aed", "diagnose", str(run)]) == 0
    rule = json.loads(capsys.readouterr().out)
    assert rule["producer"] == "rule" and rule["yield"]["usable"] == rule["yield"]["produced"]


def test_a_failed_model_call_costs_one_episode_not_the_diagnosis(tmp_path):
    """The endpoint answers 500 for the first failed episode: that episode is a `model_error` rejection and
    every other failed episode is still diagnosed from its own reply."""
    run = make_run(tmp_path / "run", episodes=6, harnesses=("base",), max_steps=4)
    failed_count = sum(1 for _ in failed(run))
    assert failed_count >= 2
    unparseable = "I cannot tell."
    from playground.agents.http_model import HTTPChatModel

    with ScriptedChatServer([Reply(status=500, raw='{"error": "overloaded"}')] + [unparseable] * failed_count) as server:
        summary = diagnose_run(run, "llm", HTTPChatModel(server.base_url, "test-model", retries=0))
    assert summary["failed"] == failed_count
    assert summary["rejected"] == {"model_error": 1, "unparseable_reply": failed_count - 1}
    rejected = [json.loads(line) for line in (run / "aed" / "rejected.jsonl").read_text().splitlines()]
    assert "500" in rejected[0]["model_error"]


def test_a_stopped_llm_diagnosis_resumes_without_asking_again(tmp_path):
    """The model is interrupted at its second call (Ctrl-C): the first episode's record is on disk, and the rerun
    asks only about the episodes not done, ending with every failed episode diagnosed once."""
    run = make_run(tmp_path / "run", episodes=6, harnesses=("base",), max_steps=4)
    failed_count = sum(1 for _ in failed(run))
    from playground.agents.http_model import HTTPChatModel

    class StopsAtSecondCall:
        def __init__(self, model):
            self.model, self.calls = model, 0

        def complete(self, messages, **kwargs):
            self.calls += 1
            if self.calls == 2:
                raise KeyboardInterrupt
            return self.model.complete(messages, **kwargs)

    with ScriptedChatServer(["no idea"] * (2 * failed_count)) as server:
        model = HTTPChatModel(server.base_url, "test-model", retries=0)
        with pytest.raises(KeyboardInterrupt):
            diagnose_run(run, "llm", StopsAtSecondCall(model))
        assert len((run / "aed" / "rejected.jsonl").read_text().splitlines()) == 1
        asked_before = len(server.requests)
        summary = diagnose_run(run, "llm", model)
        assert len(server.requests) - asked_before == failed_count - 1
    assert summary["rejected"] == {"unparseable_reply": failed_count}
    traces = [json.loads(line)["trace"] for line in (run / "aed" / "rejected.jsonl").read_text().splitlines()]
    assert len(traces) == len(set(traces)) == failed_count
    assert not (run / "aed" / "diagnose.partial.json").exists()


def test_aed_diagnose_names_one_model_for_the_llm_producer(tiny_run, capsys):
    for argv, needle in [(["--producer", "rule", "--judge-local"], "needs --producer llm"),
                         (["--producer", "llm"], "--judge-local"),
                         (["--producer", "llm", "--judge-local", "--judge-model", "m"], "two models")]:
        assert main(["aed", "diagnose", str(tiny_run), *argv]) == 2
        assert needle in capsys.readouterr().err


def test_diagnose_run_screens_errors_and_counts_rejections(tmp_path):
    run = make_run(tmp_path / "run", episodes=8, harnesses=("base",))
    lines = (run / "episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first.update(status="error", won=False)
    (run / "episodes.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    summary = diagnose_run(run)
    assert summary["screened"] == {"infrastructure_error": 1}
    assert summary["episodes"] == 8 and summary["failed"] + summary["won"] + 1 == 8
    kept = [json.loads(line) for line in (run / "aed" / "diagnoses.jsonl").read_text().splitlines()]
    assert len(kept) == summary["pairs"] and all(r["task_id"] != first["task_id"] for r in kept)


# --- 4. matched replay -----------------------------------------------------------------------------------------

def test_evidence_grades():
    assert evidence_grade([], []) == "none"
    assert evidence_grade([True], [False]) == "E1"
    assert evidence_grade([True, True], [False, False]) == "E2"
    assert evidence_grade([True, False], [False, False]) == "none"
    assert evidence_grade([True, True], [False, True]) == "none"


@pytest.fixture(scope="module")
def replayed(tiny_run):
    assert main(["aed", "diagnose", str(tiny_run)]) == 0
    assert main(["aed", "replay", str(tiny_run), "--agent", "noisy", "--agent-option", "invalid=0.2",
                 "--trials", "2"]) == 0
    return tiny_run


def test_both_replay_arms_start_from_the_same_state(replayed):
    replays = [json.loads(line) for line in (replayed / "aed" / "replays.jsonl").read_text().splitlines()]
    assert replays
    for replay in replays:
        episode = load_episode(replayed / replay["trace"])
        starts = {}
        for transcript in replay["transcripts"]:
            events = read_trace(replayed / transcript["trace"])
            assert events[0]["lineage"]["diagnosis"] == replay["id"]
            assert events[1]["observation"] == episode.observation_before(replay["step"])
            starts.setdefault(transcript["trial"], set()).add(events[1]["observation"])
            first = next(e for e in events if e["type"] == "proposal")
            expected = replay["correction"] if transcript["arm"] == "treatment" else replay["original"]
            assert first["action"] == (expected or "")
        assert all(len(s) == 1 for s in starts.values())
        assert replay["restored_state_check"] and len(replay["treatment_won"]) == len(replay["control_won"]) == 2


def test_replay_limit_replays_the_first_pairs_only(replayed, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(replayed, run)
    correctable = [json.loads(line) for line in (run / "aed" / "diagnoses.jsonl").read_text().splitlines()
                   if json.loads(line)["correction"] is not None]
    assert len(correctable) >= 2
    capsys.readouterr()
    assert main(["aed", "replay", str(run), "--trials", "1", "--limit", "1"]) == 0
    counts = json.loads(capsys.readouterr().out)
    replays = [json.loads(line) for line in (run / "aed" / "replays.jsonl").read_text().splitlines()]
    assert [r["id"] for r in replays] == [correctable[0]["id"]] and counts["replayed"] == 1
    assert counts["not_chosen"] == len(correctable) - 1
    assert main(["aed", "replay", str(run), "--limit", "0"]) == 2


def test_replay_continues_with_the_diagnosed_episodes_own_agent_by_default(replayed, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(replayed, run)
    assert main(["aed", "replay", str(run), "--trials", "1", "--limit", "1"]) == 0
    replay = json.loads((run / "aed" / "replays.jsonl").read_text().splitlines()[0])
    header = load_episode(run / replay["trace"]).header
    assert (replay["agent"], replay["agent_options"]) == (header.agent, header.agent_options)
    assert replay["agent_options"] == {"invalid": 0.3, "stop": 0.05} and replay["continuation"] == "run_agent"
    assert all(read_trace(run / t["trace"])[0]["agent"] == "noisy" for t in replay["transcripts"])
    assert main(["aed", "replay", str(run), "--agent-option", "invalid=0"]) == 2  # options need --agent


@pytest.mark.parametrize("agent, oracle", [("expert", True), ("random", False)])
def test_a_substituted_continuation_is_labelled_and_an_expert_one_as_an_oracle(replayed, tmp_path, capsys, agent,
                                                                                 oracle):
    run = tmp_path / "run"
    shutil.copytree(replayed, run)
    capsys.readouterr()
    assert main(["aed", "replay", str(run), "--agent", agent, "--trials", "1", "--limit", "1"]) == 0
    out, _err = capsys.readouterr()
    assert json.loads(out)["oracle_continuation"] == int(oracle)
    assert ("oracle continuation" in json.loads(out).get("note", "")) is oracle
    replay = json.loads((run / "aed" / "replays.jsonl").read_text().splitlines()[0])
    assert (replay["agent"], replay["continuation"], replay["oracle"]) == (agent, "substituted", oracle)
    assert figures_of(run, load_records(run))["aed_oracle_continuation"] == float(oracle)  # the column saying so


# --- 5. exports ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("view", ["diagnosis", "actor", "adp"])
def test_exports_validate_and_round_trip(replayed, tmp_path, view):
    records = build_view(replayed, view, "none")
    assert records
    out = tmp_path / f"{view}.jsonl"
    assert export(replayed, view, out, "none") == len(records)
    assert read_export(out, view) == records


def test_actor_export_admits_only_replayed_targets_by_default(replayed, tmp_path, capsys):
    grades = {json.loads(line)["id"]: json.loads(line)["grade"]
              for line in (replayed / "aed" / "replays.jsonl").read_text().splitlines()}
    admitted = build_view(replayed, "actor")
    assert all(grades[r["id"].rsplit(":", 1)[0]] in ("E1", "E2") and r["meta"]["min_grade"] == "E1"
               for r in admitted)
    everything = build_view(replayed, "actor", "none")
    assert len(everything) > len(admitted) and all(r["meta"]["min_grade"] == "none" for r in everything)
    run = tmp_path / "run"
    shutil.copytree(replayed, run)
    (run / "aed" / "replays.jsonl").unlink()  # nothing replayed: no target has evidence
    assert build_view(run, "actor") == []
    capsys.readouterr()
    assert main(["aed", "export", str(run), "--view", "actor", "--out", str(tmp_path / "a.jsonl")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("0 actor record(s)") and "left out" in err and "--min-grade none" in err
    assert main(["aed", "export", str(run), "--view", "actor", "--min-grade", "none",
                 "--out", str(tmp_path / "b.jsonl")]) == 0
    assert len(read_export(tmp_path / "b.jsonl", "actor")) == len(everything)


def test_actor_views_never_hold_the_failed_suffix(replayed):
    for record in build_view(replayed, "actor", "none"):
        step = record["meta"]["step"]
        assert len(record["history"]) == step
        if record["variant"] == "after_error":
            assert record["rejected"]["action"] != record["target"]["action"]


def test_schema_rejects_a_bad_record(replayed):
    record = build_view(replayed, "diagnosis")[0]
    with pytest.raises(ExportError):
        validate("diagnosis", {**record, "output": {**record["output"], "quotations": []}})
    adp = build_view(replayed, "adp")[0]
    with pytest.raises(ExportError):
        validate("adp", {**adp, "content": [{"class_": "telepathy", "content": "?"}]})


# --- 6. the commands end to end --------------------------------------------------------------------------------

def test_diagnose_replay_export_and_the_run_directorys_table_end_to_end(replayed, tmp_path, capsys):
    capsys.readouterr()
    assert main(["aed", "export", str(replayed), "--view", "actor", "--out", str(tmp_path / "a.jsonl")]) == 0
    assert main(["study", "table", str(replayed), "--json"]) == 0  # AED's columns on the run directory's table
    cells = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    figures = cells[0]["figures"]
    replays = [json.loads(line) for line in (replayed / "aed" / "replays.jsonl").read_text().splitlines()]
    assert figures["aed_pairs_replayed"] == len(replays) >= 1
    assert sum(figures.get(f"aed_grades[{grade}]", 0) for grade in GRADES) == len(replays)  # 0s not shown
    assert figures["aed_oracle_continuation"] == 1.0  # `noisy` follows the expert plan
    treatment = [sum(r["treatment_won"]) / len(r["treatment_won"]) for r in replays]
    control = [sum(r["control_won"]) / len(r["control_won"]) for r in replays]
    assert figures["aed_correction_pass_rate"] == pytest.approx(sum(treatment) / len(treatment))
    difference = figures.get("aed_difference", 0.0)  # a figure that is 0 in every cell is not shown
    assert difference == pytest.approx((sum(treatment) - sum(control)) / len(replays))
    assert figures.get("aed_difference_ci_low", 0.0) <= difference <= figures.get("aed_difference_ci_high", 0.0)
    assert main(["study", "table", str(replayed)]) == 0
    assert "aed_correction_pass_rate" in capsys.readouterr().out
