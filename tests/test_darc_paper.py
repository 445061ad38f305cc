"""DARC as the paper defines it: admissible sets by mode, no default diagnosis, the LLM diagnoser and the
agreement table, the narrowed action view, base-attempt tau_free, AppWorld costs in steps, bootstrap stability."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from playground.core.episode_hooks import PluginError
from playground.core.hookspecs import hookimpl
from playground.core.payloads import EpisodeIds, StepContext, Turn
from playground.host.manager import get_host
from playground.plugins.darc.distill import bootstrap_stability, count_chains
from playground.plugins.darc.evidence import Evidence, base_tau_free, write_evidence
from playground.plugins.darc.profile import (
    NO_DOMINANT,
    admissible_sets,
    diagnose,
    dominant,
)
from playground.testing import ScriptedAgent, play, tiny_env
from playground.testing.openai_server import ScriptedChatServer
from tests.conftest import cli
from tests.darc_runs import evidence_run
from tests.darc_runs import play as play_run

COMMON = ["--env", "tiny", "--agent", "noisy", "--episodes", "8", "--quiet"]


# -- 1. admissible sets as Table 11 states them ----------------------------------------------


def test_alfworld_action_validity_admits_exactly_the_four_action_validity_harnesses():
    sets = admissible_sets(get_host(), "alfworld")
    assert sets["action_validity"] == ["action_pruning", "loop_fallback", "type_saturation", "validity-guard"]
    assert "sentry" not in sets["action_validity"]
    assert sets["progress"] == ["sentry"] and sets["grounding"] == ["sentry"]
    library = {name for names in sets.values() for name in names}
    assert len(library) >= 8  # the full library on ALFWorld
    assert count_chains(len(sets["action_validity"]), 3) == 40 and count_chains(8, 3) == 400


def test_the_other_families_admit_the_papers_interventions():
    host = get_host()
    assert admissible_sets(host, "appworld")["procedure_breadth"] == ["auto_knowledge", "local_induction",
                                                                      "retrieval_fallback"]
    finance = admissible_sets(host, "finance")["format_precision"]
    assert {f"demos-k{k}" for k in (1, 2, 4, 8, 16)} <= set(finance)
    assert "sentry" not in admissible_sets(host, "appworld")["procedure_breadth"]


def test_failure_types_declare_the_papers_modes():
    labels = get_host().labels
    assert labels.mode_of("progress") == "progress" and labels.mode_of("grounding") == "grounding"
    assert labels.mode_of("action_validity") == "action_validity"
    assert labels.mode_of("procedure") == "procedure_breadth"


# -- 2. diagnosis: no dominant mode is reported as such ------------------------------------------


def test_no_detection_is_no_dominant_mode_never_a_default():
    host = get_host()
    diagnosis = diagnose({}, 0, 10, host, "alfworld")
    assert diagnosis.mode is None and diagnosis.admissible == []
    assert diagnosis.why.startswith(NO_DOMINANT) and "default" not in diagnosis.why


def test_a_tie_at_the_top_is_no_dominant_mode():
    assert dominant({"action_validity": 1.0, "progress": 1.0}) is None
    assert dominant({"action_validity": 1.0, "progress": 0.5}) == "action_validity"
    host = get_host()
    histogram = {"action_validity": {"invalid_action": 3}, "progress": {"planning_stall": 3}}
    tied = diagnose(histogram, 3, 3, host, "alfworld", modes=None)
    assert tied.mode is None and "tie" in tied.why
    # by default progress is not a candidate (the paper's three modes): it is reported apart and cannot tie
    paper = diagnose(histogram, 3, 3, host, "alfworld")
    assert paper.mode == "action_validity" and paper.others == {"progress": 1.0} and "progress" not in paper.per_episode


def test_the_mode_comes_from_the_label_registry():
    host = get_host()
    diagnosis = diagnose({"progress": {"planning_stall": 5}, "action_validity": {"invalid_action": 1}}, 1, 2, host,
                         "alfworld", modes=None)
    assert diagnosis.mode == "progress" and diagnosis.admissible == ["sentry"]
    diagnosis = diagnose({"action_validity": {"invalid_action": 5}}, 5, 2, host, "alfworld")
    assert diagnosis.mode == "action_validity" and len(diagnosis.admissible) == 4


def test_evidence_refuses_a_diagnosis_without_a_dominant_mode(capsys, tmp_path):
    path = tmp_path / "diagnosis.json"
    path.write_text(json.dumps({"mode": None, "why": f"{NO_DOMINANT}: no failure detected in 8 episodes",
                                "admissible_interventions": []}))
    run_dir = evidence_run(capsys, tmp_path / "run", COMMON, ["sentry"])
    code, _, err = cli(capsys, "darc", "evidence", str(run_dir), "--diagnosis", str(path),
                       "--out", str(tmp_path / "e"))
    assert code == 2 and NO_DOMINANT in err and "the whole library's evidence" in err


def _judge(body: dict) -> str:
    user = body["messages"][-1]["content"]
    assert "won" not in user.lower().split() and "reward" not in user.lower()  # the summaries are blind
    return json.dumps({"mode": "progress", "why": "it loops"})


def _profiled(capsys, tmp_path) -> Path:
    """A profiling run of COMMON on the dev split (darc-profile:sentry): what the LLM diagnoser reads."""
    return play_run(capsys, tmp_path / "profile-run", [*COMMON, "--split", "dev"], ["darc-profile:sentry"])


def test_llm_diagnoser_and_agreement_table(capsys, tmp_path):
    p = tmp_path / "p"
    run_dir = _profiled(capsys, p)
    with ScriptedChatServer(default=_judge) as server:
        code, out, err = cli(capsys, "darc", "diagnose", str(run_dir), "--diagnoser", "llm", "--judge-base-url",
                             server.base_url, "--judge-model", "judge", "--modes", "all")
        assert code == 0, err
        asked = len(server.requests)
    diagnosis = json.loads((run_dir / "diagnosis.json").read_text())
    failed = [e for e in diagnosis["per_episode"] if not e["won"]]
    assert asked == len(failed) > 0 and "Trace:" in server.requests[0]["messages"][-1]["content"]
    assert diagnosis["diagnoser"] == "llm" and diagnosis["mode"] == "progress"
    assert diagnosis["admissible_interventions"] == ["sentry"] and diagnosis["rule"]["mode"]
    assert all(e["llm"] == "progress" for e in failed)
    assert all(e["llm_verdict"] == {"reason": "named progress", "why": "it loops"} for e in failed)

    library = sorted(n for names in admissible_sets(get_host(), "tiny").values() for n in names)
    dev = evidence_run(capsys, p / "dev-run", [*COMMON, "--split", "dev"], sorted(set(library)))
    code, out, err = cli(capsys, "darc", "evidence", str(dev), "--out", str(p / "dev"))
    assert code == 0, err
    # Table 15 as the study's step and column: the step writes agreement.json into the folder, the figure reads it
    from playground.plugins.darc.figures import FIGURES
    from playground.plugins.darc.steps import AgreementParams, agreement_step

    agreement_step(get_host(), p / "dev", AgreementParams(diagnosis=str(run_dir / "diagnosis.json")))
    result = json.loads((p / "dev" / "agreement.json").read_text())
    assert [r["diagnoser"] for r in result["rows"]] == ["majority", "uniform random", "rule", "LLM"]
    assert result["reference"] and result["fixable"] <= result["failures"]
    for row in result["rows"]:
        assert row["agreement"] is None or 0.0 <= row["agreement"] <= 1.0
    column = next(f for f in FIGURES if f.name == "darc_agreement")
    assert column.value([], None, p / "dev") == {r["diagnoser"]: r["agreement"] for r in result["rows"]}
    assert column.value([], None, p / "profile-run") is None


def test_a_judge_reply_naming_no_candidate_is_no_mode(capsys, tmp_path):
    run_dir = _profiled(capsys, tmp_path)
    with ScriptedChatServer(default="I think it is bad luck") as server:
        code, _out, err = cli(capsys, "darc", "diagnose", str(run_dir), "--diagnoser", "llm", "--judge-base-url",
                              server.base_url, "--judge-model", "judge")
    assert code == 0, err
    diagnosis = json.loads((run_dir / "diagnosis.json").read_text())
    assert diagnosis["mode"] is None and diagnosis["why"].startswith(NO_DOMINANT)
    verdicts = [e["llm_verdict"] for e in diagnosis["per_episode"] if not e["won"]]
    assert verdicts and all(v["reason"] == "no JSON object in the reply: 'I think it is bad luck'" for v in verdicts)
    code, _, err = cli(capsys, "darc", "diagnose", str(run_dir), "--diagnoser", "llm", "--out", str(tmp_path / "x"))
    assert code == 2 and "judge" in err


@pytest.mark.parametrize(("reply", "reason"), [
    ('{"mode": "bad_luck", "why": "dice"}', "named 'bad_luck', not one of the candidate modes"),
    ('{"mode": "none", "why": "it did fine"}', "named no mode"),
])
def test_each_verdict_says_why_it_names_no_mode(capsys, tmp_path, reply, reason):
    run_dir = _profiled(capsys, tmp_path)
    with ScriptedChatServer(default=reply) as server:
        code, _out, err = cli(capsys, "darc", "diagnose", str(run_dir), "--diagnoser", "llm", "--judge-base-url",
                              server.base_url, "--judge-model", "judge")
    assert code == 0, err
    diagnosis = json.loads((run_dir / "diagnosis.json").read_text())
    failed = [e for e in diagnosis["per_episode"] if not e["won"]]
    assert failed and all(e["llm"] is None and e["llm_verdict"]["reason"] == reason for e in failed)
    assert diagnosis["mode"] is None


def test_a_failed_judge_call_is_a_verdict_with_its_error(capsys, tmp_path):
    run_dir = _profiled(capsys, tmp_path)
    code, _out, err = cli(capsys, "darc", "diagnose", str(run_dir), "--diagnoser", "llm", "--judge-base-url",
                          "http://127.0.0.1:9/v1", "--judge-model", "judge")
    assert code == 0, err
    failed = [e for e in json.loads((run_dir / "diagnosis.json").read_text())["per_episode"] if not e["won"]]
    assert failed and all(e["llm_verdict"]["reason"].startswith("the judge call failed:") for e in failed)


# -- 3. the narrowed action view (core hook) --------------------------------------------------


class Narrow:
    def __init__(self, actions):
        self.actions = actions
        self.seen: list[tuple[str, ...]] = []

    @hookimpl
    def agent_actions(self, context):
        self.seen.append(context.admissible_actions)
        return self.actions(context)

    @hookimpl
    def detect_failures(self, context, proposal):
        self.seen.append(context.admissible_actions)


def test_agent_actions_narrows_what_the_agent_sees_only():
    plugin = Narrow(lambda c: ["not an action", *c.admissible_actions[:2], c.admissible_actions[0]])
    agent = ScriptedAgent()
    play(tiny_env(), agent, [plugin], max_steps=3)
    full = plugin.seen[0]
    assert len(full) > 2 and plugin.seen[1] == full  # detectors still see the env's whole list
    assert agent.views[0].admissible_actions == tuple(full[:2])  # admissible ones, in order, once each


def test_agent_actions_with_nothing_admissible_is_the_plugins_error():
    with pytest.raises(PluginError, match="agent_actions"):
        play(tiny_env(), ScriptedAgent(), [Narrow(lambda c: ["nope"])], max_steps=2)


def test_no_answer_shows_the_whole_list():
    agent = ScriptedAgent()
    play(tiny_env(), agent, [Narrow(lambda c: None)], max_steps=2)
    assert len(agent.views[0].admissible_actions) > 2


ROOM = ["go to cabinet 1", "go to countertop 1", "go to countertop 2", "go to fridge 1", "go to garbagecan 1",
        "go to microwave 1", "go to sinkbasin 1", "go to shelf 1", "go to shelf 2", "go to drawer 1",
        "go to drawer 2", "go to stoveburner 1", "go to toaster 1", "help", "inventory", "look"]


def _context(step=0, history=()):
    ids = EpisodeIds("r", "e", "alfworld", "t", "h")
    return StepContext(ids, step, "put a hot apple in fridge.", "You are in the middle of a room.", tuple(ROOM),
                       tuple(history))


def test_the_guard_view_replaces_the_list_with_its_top_12():
    from playground.envs.alfworld.interventions import ActionPruning

    context = _context()
    top = ActionPruning({"view": "top", "prior_games": 0}).agent_actions(context)
    assert len(top) == 12 and set(top) <= set(ROOM)
    assert list(top) == ActionPruning({"prior_games": 0}).ranked(context)[:12]
    assert ActionPruning({"prior_games": 0}).agent_actions(context) == top  # the paper's operator by default
    assert ActionPruning({"view": "full", "prior_games": 0}).agent_actions(context) is None
    random12 = ActionPruning({"view": "random", "prior_games": 0}).agent_actions(context)
    assert len(random12) == 12 and list(random12) == sorted(random12)


def test_the_recovery_prompt_is_a_separate_switch():
    from playground.core.payloads import Proposal
    from playground.envs.alfworld.interventions import ActionPruning

    context = _context()
    on = ActionPruning({"prior_games": 0, "recovery_prompt": "repair"}).decide_intervention(
        context, Proposal("", "hta apple"), [])
    assert ActionPruning({"prior_games": 0, "recovery_prompt": "repair"}).agent_notes(context) is None
    off = ActionPruning({"prior_games": 0, "recovery_prompt": "off"}).decide_intervention(
        context, Proposal("", "hta apple"), [])
    assert "looking for" in on.message.text and "looking for" not in off.message.text
    always = ActionPruning({"prior_games": 0}).agent_notes(context)  # every step by default
    assert always and "looking for" in always[0]
    assert ActionPruning({"prior_games": 0, "repair": False}).decide_intervention(
        context, Proposal("", "hta apple"), []) is None


def test_alfworld_procedural_help_acts_after_a_rejected_command():
    from playground.envs.alfworld.procedural import ProceduralHelp

    rejected = [Turn(0, "", "hta apple", "Nothing happens.", False)]
    for source, expect in (("alfworld_induction", "not a command here"), ("alfworld_knowledge", "Procedure"),
                           ("alfworld_retrieval_fallback", "not a command here")):
        plugin = ProceduralHelp(source, {})
        assert plugin.decide_intervention(_context(), None, []) is None
        decision = plugin.decide_intervention(_context(1, rejected), None, [])
        assert decision.message.kind == "soft_repair" and expect in decision.message.text
        assert not decision.message.actions  # informs, never prunes


# -- 4. costs ----------------------------------------------------------------------------------


def test_appworld_interventions_cost_env_steps():
    host = get_host()
    for name in ("local_induction", "auto_knowledge", "retrieval_fallback"):
        spec = host.interventions.get(name)
        assert spec.cost_unit == "steps" and spec.cost is None


def test_tau_free_defaults_to_the_mean_cost_of_a_base_attempt(capsys, tmp_path):
    write_evidence(tmp_path / "evidence.csv", [("t1", "a", 1, 4), ("t1", "b", 0, 2), ("t2", "a", 0, 6),
                                               ("t2", "b", 1, 2)])
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(tmp_path / "evidence.csv"))
    assert code == 2 and "--tau-free" in err  # never a silent default
    write_evidence(tmp_path / "base.csv", [("t1", "base", 0, 10), ("t2", "base", 1, 5)])
    assert base_tau_free(tmp_path / "evidence.csv")[0] == 7.5
    code, out, err = cli(capsys, "darc", "distill", "--evidence", str(tmp_path / "evidence.csv"))
    assert code == 0, err
    assert "tau_free = 7.5" in out
    policy = json.loads((tmp_path / "policy.json").read_text())
    assert policy["tau_free"] == 7.5 and "base attempt" in policy["tau_free_source"]


def test_evidence_measures_the_base_attempt_and_states_cost_units(capsys, tmp_path):
    run_dir = evidence_run(capsys, tmp_path / "run", COMMON, ["sentry", "validity-guard"])
    code, _, err = cli(capsys, "darc", "evidence", str(run_dir))
    assert code == 0, err
    base = (run_dir / "base.csv").read_text().splitlines()
    assert len(base) == 9 and all(",base," in line for line in base[1:])
    meta = json.loads((run_dir / "evidence.json").read_text())
    assert meta["interventions"]["sentry"]["cost_unit"] == "steps" and meta["base"]["mean_cost"] > 0
    assert meta["base"]["played_in"] == str(run_dir)
    code, _out, err = cli(capsys, "darc", "distill", "--evidence", str(run_dir / "evidence.csv"))
    assert code == 0, err
    policy = json.loads((run_dir / "policy.json").read_text())
    assert policy["tau_free"] == pytest.approx(meta["base"]["mean_cost"])
    assert policy["cost_units"] == {"sentry": "steps", "validity-guard": "steps"}


def test_a_run_grows_from_the_diagnosed_interventions_to_the_library_and_each_evidence_keeps_its_own(capsys,
                                                                                                        tmp_path):
    diagnosis = tmp_path / "diagnosis.json"
    diagnosis.write_text(json.dumps({"mode": "action_validity", "admissible_interventions": ["validity-guard"]}))
    run_dir = evidence_run(capsys, tmp_path / "run", COMMON, ["validity-guard"])
    code, _, err = cli(capsys, "darc", "evidence", str(run_dir), "--diagnosis", str(diagnosis),
                       "--out", str(tmp_path / "av"))
    assert code == 0, err
    played = (run_dir / "episodes.jsonl").read_text().splitlines()
    assert len(played) == 8 * 2  # base and validity-guard
    evidence_run(capsys, run_dir, COMMON, ["validity-guard", "sentry"])  # the same run, one more harness
    resumed = (run_dir / "episodes.jsonl").read_text().splitlines()
    assert resumed[:16] == played and len(resumed) == 8 * 3  # only sentry's 8 episodes were played
    code, _, err = cli(capsys, "darc", "evidence", str(run_dir), "--out", str(tmp_path / "full"))
    assert code == 0, err
    full = {line.split(",")[1] for line in (tmp_path / "full" / "evidence.csv").read_text().splitlines()[1:]}
    assert full == {"sentry", "validity-guard"}
    # the diagnosed evidence, now over a run that also holds sentry, still reads only its own
    code, _, err = cli(capsys, "darc", "evidence", str(run_dir), "--diagnosis", str(diagnosis),
                       "--out", str(tmp_path / "av2"))
    assert code == 0, err
    assert (tmp_path / "av2" / "evidence.csv").read_text() == (tmp_path / "av" / "evidence.csv").read_text()
    narrow = (tmp_path / "av2" / "evidence.csv").read_text().splitlines()[1:]
    assert len(narrow) == 8 and all(",validity-guard," in line for line in narrow)


def test_evidence_takes_the_base_attempts_from_the_profile_instead_of_a_base_harness(capsys, tmp_path):
    train = [*COMMON, "--split", "train"]
    profile_run = play_run(capsys, tmp_path / "p" / "profile-run", train, ["darc-profile:sentry"])
    diagnosis = tmp_path / "diagnosis.json"
    diagnosis.write_text(json.dumps({"mode": "action_validity", "admissible_interventions": ["validity-guard"]}))
    with_base = evidence_run(capsys, tmp_path / "with-base", train, ["validity-guard"])
    without = play_run(capsys, tmp_path / "without", train, ["darc-eval:validity-guard"])  # no base cell played
    evidence = ["darc", "evidence", "--diagnosis", str(diagnosis)]
    code, _, err = cli(capsys, *evidence, str(with_base), "--out", str(tmp_path / "played"))
    assert code == 0, err
    code, _, err = cli(capsys, *evidence, str(without), "--out", str(tmp_path / "reused"))
    assert code == 2 and "no harness 'base'" in err  # without a base cell, say where the base attempts are
    code, _, err = cli(capsys, *evidence, str(without), "--base-from", str(profile_run),
                       "--out", str(tmp_path / "reused"))
    assert code == 0, err
    for name in ("base.csv", "evidence.csv"):  # the bare agent watched by detectors plays as the bare agent
        assert (tmp_path / "reused" / name).read_text() == (tmp_path / "played" / name).read_text()
    meta = json.loads((tmp_path / "reused" / "evidence.json").read_text())
    assert meta["base"]["played_in"] == str(profile_run)
    # a profile of other settings or of fewer tasks is refused, naming what differs
    other = play_run(capsys, tmp_path / "other", [*train, "--max-steps", "3"], ["darc-eval:validity-guard"])
    code, _, err = cli(capsys, *evidence, str(other), "--base-from", str(profile_run), "--out", str(tmp_path / "o"))
    assert code == 2 and "max_steps" in err and not (tmp_path / "o").exists()
    more = play_run(capsys, tmp_path / "more", [*train, "--episodes", "10"], ["darc-eval:validity-guard"])
    code, _, err = cli(capsys, *evidence, str(more), "--base-from", str(profile_run), "--out", str(tmp_path / "m"))
    assert code == 2 and "2 of the 10 tasks were not profiled" in err
    code, _, err = cli(capsys, *evidence, str(without), "--base-from", str(tmp_path / "p"),
                       "--out", str(tmp_path / "x"))
    assert code == 2 and "no config.json" in err


# -- 5. stability ------------------------------------------------------------------------------


def test_bootstrap_counts_distinct_winners_and_gives_intervals():
    rng = np.random.default_rng(3)
    n = 40
    dominant_column = np.ones(n, dtype=bool)
    success = np.column_stack([dominant_column, rng.random(n) < 0.3, rng.random(n) < 0.3])
    evidence = Evidence(tuple(f"t{i}" for i in range(n)), ("a", "b", "c"), success, np.ones((n, 3)))
    stable = bootstrap_stability(evidence, 3, 0.1, 0.0, 50, seed=1)
    assert stable.winners == ((("a",), 50),) and stable.interval(stable.selection)[0] == 1.0
    noisy = Evidence(evidence.task_ids, ("a", "b", "c"), rng.random((n, 3)) < 0.4, np.ones((n, 3)))
    unstable = bootstrap_stability(noisy, 3, 0.1, 0.0, 50, seed=1)
    assert len(unstable.winners) > 1 and sum(c for _, c in unstable.winners) == 50
    assert 0 < len(unstable.test) <= 50 and Counter(len(x) for x, _ in unstable.winners)


def test_distill_bootstrap_prints_and_records_stability(capsys, tmp_path):
    rows = [(f"t{i}", name, int((i + k) % 3 == 0), 1) for i in range(12) for k, name in enumerate("abc")]
    write_evidence(tmp_path / "evidence.csv", rows)
    code, out, err = cli(capsys, "darc", "distill", "--evidence", str(tmp_path / "evidence.csv"), "--tau-free", "0",
                         "--bootstrap", "30")
    assert code == 0, err
    assert "30 resamples" in out and "distinct winning chain" in out and "test success" in out
    record = json.loads((tmp_path / "policy.json").read_text())["bootstrap"]
    assert record["resamples"] == 30 and record["distinct_winners"] >= 1
    assert len(record["selection_success"]["ci95"]) == 2

