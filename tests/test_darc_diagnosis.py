"""DARC's diagnosis and its restriction, end to end: profiling an agent whose failures are known gives the
expected mode, the admissible interventions are exactly those registered for that mode on that env, and
`darc evidence --diagnosis` gathers exactly those; plus `diagnose()` on hand-made histograms."""

from __future__ import annotations

import csv
import json

import pytest

from playground.host.manager import Host
from playground.plugins.darc.profile import DARC_MODES, diagnose
from playground.run.traces import read_trace
from tests.conftest import cli
from tests.darc_runs import evidence_run, play, profile

QUIET = {mode: "0" for mode in ("invalid", "malformed", "repeat", "stall", "drift", "stop")}


def noisy_options(**rates) -> list[str]:
    """`--agent-option` pairs for a noisy agent making only the given failures."""
    pairs = []
    for mode, rate in {**QUIET, **rates}.items():
        pairs += ["--agent-option", f"{mode}={rate}"]
    return pairs


def expected_admissible(host: Host, env: str, mode: str) -> set[str]:
    """The spec of the restriction, from the registry: the interventions registered for `mode` usable on `env`."""
    return {spec.name for spec in host.interventions
            if mode in spec.modes and (not spec.envs or env in spec.envs) and not spec.name.startswith("detect-only:")}


def evidence_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_profiling_invalid_actions_diagnoses_action_validity_and_evaluates_exactly_its_interventions(capsys, tmp_path):
    out = tmp_path / "darc"
    common = ["--env", "tiny", "--agent", "noisy", *noisy_options(invalid="0.3"), "--quiet"]
    play(capsys, out / "profile-run", [*common, "--episodes", "6"], ["darc-profile:validity-guard"])
    code, stdout, err = cli(capsys, "darc", "diagnose", str(out / "profile-run"))
    assert code == 0, err
    diagnosis = json.loads((out / "profile-run" / "diagnosis.json").read_text())
    assert diagnosis["detectors"] == ["validity-guard"]
    assert diagnosis["mode"] == "action_validity"
    assert set(diagnosis["histogram"]) == {"action_validity"} and diagnosis["invalid_actions"] > 0
    assert diagnosis["modes_per_episode"]["action_validity"] > 0
    per_episode = diagnosis["modes_per_episode"]  # modes with no admissible intervention on tiny are not listed
    assert per_episode.get("procedure_breadth", 0) == per_episode.get("format_precision", 0) == 0
    assert f"{diagnosis['invalid_actions']} invalid actions reached the env" in diagnosis["why"]
    host = Host().load()
    admissible = expected_admissible(host, "tiny", "action_validity")
    # the paper's Table 11: the admissibility guard, not Sentry; ALFWorld's guards work only there
    assert "validity-guard" in admissible and "sentry" not in admissible and "action_pruning" not in admissible
    assert diagnosis["admissible_interventions"] == sorted(admissible)
    assert json.loads(stdout)["admissible_interventions"] == sorted(admissible)

    # the detectors only watched: no intervention in the profiling run, the invalid actions reached the env
    run_dir = out / "profile-run"
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 6 and diagnosis["episodes"] == 6
    events = [e for r in records for e in read_trace(run_dir / r["trace"])]
    assert not [e for e in events if e["type"] == "intervention"]
    invalid_steps = sum(e["type"] == "step" and not e["valid_action"] for e in events)
    assert diagnosis["invalid_actions"] == invalid_steps
    assert sum(diagnosis["histogram"]["action_validity"].values()) <= invalid_steps

    # the evidence run plays the whole library; the diagnosis restricts the evidence to its admissible ones
    library = sorted({spec.name for spec in host.interventions if spec.works_with("tiny") and spec.candidate
                      and not spec.name.startswith("detect-only:")})
    assert admissible < set(library)
    run_dir = evidence_run(capsys, out / "evidence-run", [*common, "--episodes", "3"], library)
    code, stdout, err = cli(capsys, "darc", "evidence", str(run_dir), "--diagnosis",
                            str(out / "profile-run" / "diagnosis.json"), "--out", str(out / "evidence"))
    assert code == 0, err
    assert {k: len(v) if k == "interventions" else v for k, v in json.loads(stdout).items()} == {
        "evidence": str(out / "evidence" / "evidence.csv"), "interventions": len(admissible), "tasks": 3}
    out = out / "evidence"  # a copy of the evidence run, the evidence written into it
    rows = evidence_rows(out / "evidence.csv")
    assert {r["intervention"] for r in rows} == admissible
    assert len(rows) == 3 * len(admissible)
    assert len(evidence_rows(out / "base.csv")) == 3  # the base attempt that prices a standard attempt (tau_free)


def test_profiling_loops_diagnoses_progress(capsys, tmp_path):
    diagnosis = profile(capsys, tmp_path / "darc", ["--env", "tiny", "--agent", "noisy",
                        *noisy_options(repeat="0.3", stall="0.3"), "--episodes", "6", "--quiet"], "--modes", "all")
    assert diagnosis["mode"] == "progress" and diagnosis["invalid_actions"] == 0 and diagnosis["candidate_modes"] == "all"
    host = Host().load()
    assert diagnosis["histogram"] and "progress" in {host.labels.mode_of(t) for t in diagnosis["histogram"]}
    assert diagnosis["admissible_interventions"] == sorted(expected_admissible(host, "tiny", "progress"))
    assert "validity-guard" not in diagnosis["admissible_interventions"]


def test_by_default_only_the_papers_three_modes_are_candidates(capsys, tmp_path):
    out = tmp_path / "darc"
    diagnosis = profile(capsys, out, ["--env", "tiny", "--agent", "noisy", *noisy_options(repeat="0.3", stall="0.3"),
                                      "--episodes", "6", "--quiet"])
    assert diagnosis["candidate_modes"] == ["action_validity", "procedure_breadth", "format_precision"]
    assert diagnosis["mode"] is None and diagnosis["other_modes_per_episode"]["progress"] > 0
    assert "--modes all" in diagnosis["why"] and "progress" in diagnosis["why"]
    code, _, err = cli(capsys, "darc", "diagnose", str(out / "profile-run"), "--modes", "progress,bogus",
                       "--out", str(tmp_path / "bad"))
    assert code == 2 and "unknown mode(s) bogus" in err


def test_finance_format_failures_diagnose_format_precision_and_restrict_to_finance_interventions(capsys, tmp_path):
    out = tmp_path / "darc"
    common = ["--env", "finance:formula", "--agent", "format-noisy", "--quiet"]
    diagnosis = profile(capsys, out, [*common, "--episodes", "8"], detectors="format-guard")
    assert diagnosis["mode"] == "format_precision" and set(diagnosis["histogram"]) == {"format_precision"}
    host = Host().load()
    admissible = expected_admissible(host, "finance", "format_precision")
    assert {"format-guard", "demos-k1", "demos-k16"} <= admissible
    assert diagnosis["admissible_interventions"] == sorted(admissible)

    # restrict the diagnosis by hand to two of them: the evidence follows the file, not the run's harnesses
    diagnosis["admissible_interventions"] = ["demos-k1", "format-guard"]
    (out / "diagnosis.json").write_text(json.dumps(diagnosis))
    run_dir = evidence_run(capsys, out / "evidence-run", [*common, "--episodes", "2"],
                           ["demos-k1", "demos-k2", "format-guard"])
    code, _, err = cli(capsys, "darc", "evidence", str(run_dir), "--diagnosis", str(out / "diagnosis.json"))
    assert code == 0, err
    rows = evidence_rows(run_dir / "evidence.csv")
    assert sorted((r["task_id"], r["intervention"]) for r in rows) == sorted(
        (t, n) for t in {r["task_id"] for r in rows} for n in ("demos-k1", "format-guard"))
    assert len(rows) == 4
    assert {float(r["cost"]) for r in rows if r["intervention"] == "demos-k1"} == {1.0}  # its fixed cost k


def test_evidence_refuses_a_diagnosis_without_interventions_or_with_unknown_ones_or_unplayed(capsys, tmp_path):
    run_dir = evidence_run(capsys, tmp_path / "run", ["--env", "tiny", "--agent", "noisy", "--episodes", "2",
                                                      "--quiet"], ["validity-guard"])
    path = tmp_path / "diagnosis.json"
    for content, message in [({"admissible_interventions": []}, "admits no intervention"),
                             ({"admissible_interventions": ["crystal-ball"]}, "unknown intervention(s) crystal-ball"),
                             ({"mode": "action_validity"}, "not a diagnosis file"),
                             ({"admissible_interventions": ["sentry"]}, "play it there too with --harness "
                                                                         "darc-eval:sentry")]:
        path.write_text(json.dumps(content))
        code, _, err = cli(capsys, "darc", "evidence", str(run_dir), "--diagnosis", str(path),
                           "--out", str(tmp_path / "out"))
        assert code == 2 and message in err, err


# -- diagnose() on hand-made histograms ---------------------------------------------------------------


@pytest.fixture(scope="module")
def host():
    return Host().load()


def test_the_mode_with_most_onsets_per_episode_wins(host):
    histogram = {"action_validity": {"invalid_action": 3}, "progress": {"planning_stall": 2, "repetition_or_looping": 2},
                 "grounding": {"objective_drift": 1}}
    paper = diagnose(histogram, invalid_actions=3, episodes=4, host=host, env="tiny")
    assert (paper.mode, paper.per_episode, paper.others) == (
        "action_validity", {"action_validity": 0.75}, {"progress": 1.0, "grounding": 0.25})
    d = diagnose(histogram, invalid_actions=3, episodes=4, host=host, env="tiny", modes=None)
    # with every mode a candidate, Sentry's progress and grounding count: 2 + 2 = 4 progress onsets over 4 episodes
    assert d.per_episode == {"action_validity": 0.75, "progress": 1.0, "grounding": 0.25}
    assert d.mode == "progress"
    assert d.why == "progress: 1.0 failure onsets per episode over 4 episodes (next: action_validity with 0.75)"
    assert d.admissible == sorted(expected_admissible(host, "tiny", "progress")) == ["sentry"]


def test_action_validity_names_the_invalid_actions_and_admits_per_env(host):
    histogram = {"action_validity": {"invalid_action": 5}, "format_precision": {"unparseable_number": 1}}
    d = diagnose(histogram, invalid_actions=7, episodes=10, host=host, env="alfworld")
    assert d.mode == "action_validity" and d.per_episode["action_validity"] == 0.5
    assert d.why.endswith("; 7 invalid actions reached the env")
    assert d.admissible == sorted(expected_admissible(host, "alfworld", "action_validity"))
    assert "action_pruning" in d.admissible
    assert "action_pruning" not in diagnose(histogram, 7, 10, host, "tiny").admissible


def test_a_tie_or_nothing_detected_is_no_dominant_mode_never_a_default(host):
    tie = diagnose({"format_precision": {"unparseable_number": 2}, "progress": {"planning_stall": 2}}, 0, 2, host,
                   "finance", modes=None)
    assert tie.mode is None and tie.admissible == []
    assert tie.why == "no dominant failure mode: format_precision and progress tie with 1.0 onsets per episode"
    empty = diagnose({}, 0, 3, host, "tiny")
    assert empty.mode is None and empty.admissible == [] and set(empty.per_episode.values()) == {0.0}
    assert set(empty.per_episode) <= set(DARC_MODES)
    assert empty.why == "no dominant failure mode: no failure detected in 3 episodes"
    finance = diagnose({"format_precision": {"prose_around_answer": 3}}, 0, 3, host, "finance")
    assert finance.mode == "format_precision" and finance.per_episode["format_precision"] == 1.0
    assert finance.admissible == sorted(expected_admissible(host, "finance", "format_precision"))


# -- profile() with a detector that would intervene at every step -----------------------------------


class Nag:
    """Detects a failure at every step but each third, and would stop the episode each time if it could."""

    from playground.core.hookspecs import hookimpl as _hookimpl

    @_hookimpl
    def detect_failures(self, context, proposal):
        from playground.core.payloads import Detection

        if context.step % 3 != 2:
            return Detection("nag", "action_validity", ("invalid_action",), 1.0, evidence="nag")

    @_hookimpl
    def decide_intervention(self, context, proposal, detections):
        from playground.core.payloads import Decision

        return Decision("nag", "give_up", stop=True)


class NagPlugin:
    from playground.core.hookspecs import hookimpl as _hookimpl

    @_hookimpl
    def register_interventions(self, register):
        register("nag", lambda params: Nag(), modes=("action_validity",))


def test_profiling_detectors_never_intervene_and_a_streak_counts_once(tmp_path):
    from playground.plugins.darc.profile import diagnose_run
    from playground.run.config import RunConfig
    from playground.run.runner import run

    host = Host(strict=True).load(extra={"nag": NagPlugin()})
    tasks = [f"tiny-{i}" for i in range(100, 104)]
    run_dir = tmp_path / "darc" / "profile-run"
    run(host, RunConfig(env="tiny", task_set="default", split="dev", tasks=tasks, agent="expert",
                        harnesses=["darc-profile:nag"], out=str(run_dir), strict=True))
    result = diagnose_run(host, run_dir)
    assert result["detectors"] == ["nag"]
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert result["success_rate"] == 1.0 and all(r["won"] for r in records)  # nag never stopped anything
    onsets = 0
    for record in records:
        events = list(read_trace(run_dir / record["trace"]))
        assert not [e for e in events if e["type"] == "intervention"]
        detected = sorted({e["step"] for e in events if e["type"] == "detection"})
        assert detected and all(s % 3 != 2 for s in detected)
        onsets += sum(1 for s in detected if s - 1 not in detected)  # a streak of consecutive steps counts once
    assert onsets > len(records)  # episodes are long enough for several streaks each
    assert result["histogram"] == {"action_validity": {"invalid_action": onsets}}
    assert result["mode"] == "action_validity" and "nag" in result["admissible_interventions"]
    assert result["modes_per_episode"]["action_validity"] == round(onsets / len(records), 4)
