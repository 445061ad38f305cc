"""DARC's committed figures re-derive from the committed run directories (docs/runs/darc-alf-noisy-v2): the
evidence `darc evidence` reads from each evidence run, the policies `darc distill` and the `darc.policy_controls` step make
from it, and the diagnosis's episodes are the profiling run's (its traces, which the histogram reads, are left out
of the repository, so the histogram itself is not re-derived here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.run.rundir import load_records
from tests.conftest import cli

DOCS = Path(__file__).resolve().parent.parent / "docs"
P = "runs/darc-alf-noisy-v2"  # as the commands were run, from docs/ (the files record these relative paths)


@pytest.fixture(autouse=True)
def in_docs(monkeypatch):
    monkeypatch.chdir(DOCS)


@pytest.mark.parametrize("library", ["av", "full"])
def test_the_evidence_files_are_what_darc_evidence_reads_from_the_committed_run(capsys, tmp_path, library):
    code, _, err = cli(capsys, "darc", "evidence", f"{P}/{library}/evaluate-run", "--out", str(tmp_path / "copy"))
    assert code == 0, err
    for name in ("evidence.csv", "base.csv"):
        assert (tmp_path / "copy" / name).read_text() == (DOCS / P / library / name).read_text(), name
    meta = json.loads((tmp_path / "copy" / "evidence.json").read_text())
    assert meta["base"].pop("played_in") == str(tmp_path / "copy")  # read from the copy of the run
    committed = json.loads((DOCS / P / library / "evidence.json").read_text())
    assert committed["base"].pop("played_in") == f"{P}/{library}/evaluate-run" and meta == committed


@pytest.mark.parametrize("library", ["av", "full"])
def test_the_frozen_policies_are_what_darc_distill_makes_of_the_committed_evidence(capsys, tmp_path, library):
    code, _, err = cli(capsys, "darc", "distill", "--evidence", f"{P}/{library}/evidence.csv", "--bootstrap", "200",
                       "--out", str(tmp_path / "policy.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "policy.json").read_text()) == json.loads((DOCS / P / library / "policy.json")
                                                                              .read_text())


def test_the_table6_policies_are_what_darc_policy_controls_writes(tmp_path):
    from playground.plugins.darc.steps import ControlsParams, policy_controls

    policy_controls(f"{P}/full/evidence.csv", tmp_path, ControlsParams(diagnosis=f"{P}/diagnosis.json"))
    for control in ("correct", "generic", "mismatched"):
        assert (tmp_path / f"{control}.json").read_text() == (DOCS / P / "t6" / "policies" / f"{control}.json") \
            .read_text(), control


def test_the_diagnosis_is_of_the_committed_profiling_runs_episodes():
    diagnosis = json.loads((DOCS / P / "diagnosis.json").read_text())
    config = json.loads((DOCS / P / "profile-run" / "config.json").read_text())
    records = load_records(DOCS / P / "profile-run")
    assert config["harnesses"] == [f"darc-profile:{','.join(diagnosis['detectors'])}"]
    assert diagnosis["env"] == f"{config['env']}:{config['task_set']}"
    assert (diagnosis["split"], diagnosis["agent"]) == (config["split"], config["agent"])
    assert diagnosis["episodes"] == len(records) == len(config["tasks"])
    assert diagnosis["success_rate"] == sum(r.won for r in records) / len(records)
    assert diagnosis["invalid_actions"] == sum(r.invalid_actions for r in records)
    assert [(e["task_id"], e["won"], e["steps"]) for e in diagnosis["per_episode"]] == [
        (r.task_id, r.won, r.steps) for r in records]


@pytest.mark.parametrize("study, grid, harnesses, wins", [
    ("darc-table10", "test", ["base", "darc:{out}/av/policy.json", "darc:{out}/full/policy.json"], [41, 45, 50]),
    ("darc-table5", "transfer", ["base", "darc:{out}/av/policy.json"], [41, 45]),
])
def test_tables_5_and_10_distil_their_own_policies(study, grid, harnesses, wins):
    """docs/results/darc.md: darc-table5 and darc-table10 run DARC's stages themselves (no committed policy): their
    pipelines distilled the policies the commands distilled for the committed run (darc-alf-noisy-v2), and the
    grids that deploy them gave the bare agent 41, the diagnosed policy 45 and the full library's 50 of 50, with no
    invalid action under a policy."""
    from playground.core.study_file import load_study
    from playground.host.manager import get_host
    from playground.run.study import study_table

    host = get_host()
    loaded = load_study(host.studies.get(study).path)
    assert not [h for g in loaded.grids for h in g.harnesses if "{here}" in h]  # nothing deployed but its own
    cells = {(c.grid, c.harness): c for c in study_table(loaded, DOCS / "runs" / study,
                                                         {f.name: f for f in host.figures})}
    for library in [h.split("/")[1] for h in harnesses[1:]]:
        mine = json.loads((DOCS / "runs" / study / library / "policy.json").read_text())
        committed = json.loads((DOCS / P / library / "policy.json").read_text())
        assert (mine["chain"], mine["succ"]) == (committed["chain"], committed["succ"]), library
    assert [cells[(grid, h)].wins for h in harnesses] == wins
    assert [cells[(grid, h)].invalid for h in harnesses[1:]] == [0.0] * (len(harnesses) - 1)


def test_the_whole_table14_study_re_derives_from_its_committed_run():
    """docs/results/darc.md, "The whole of it as one study": the darc-table14 study's pipelines chose what the commands
    chose (the committed darc-alf-noisy-v2 policies) and its test grid gave 41 / 45 / 50 of 50."""
    from playground.core.study_file import load_study
    from playground.host.manager import get_host
    from playground.run.study import study_table

    host = get_host()
    study = load_study(host.studies.get("darc-table14").path)
    cells = {(c.grid, c.harness): c for c in study_table(study, DOCS / "runs" / "darc-table14",
                                                         {f.name: f for f in host.figures})}
    for library in ("av", "full"):
        mine = json.loads((DOCS / "runs" / "darc-table14" / library / "policy.json").read_text())
        committed = json.loads((DOCS / P / library / "policy.json").read_text())
        assert (mine["chain"], mine["succ"]) == (committed["chain"], committed["succ"]), library
        assert cells[(library, "base")].figures["darc_distinct_winners"] == committed["bootstrap"]["distinct_winners"]
    assert cells[("diagnosed", "darc-profile:sentry")].figures["darc_diagnosed_admissible"] == 4
    assert [cells[("test", h)].wins for h in ("base", "darc:{out}/av/policy.json", "darc:{out}/full/policy.json")] == [
        41, 45, 50]


def test_the_whole_table6_study_re_derives_from_its_committed_run():
    """docs/results/darc.md, Table 6's shape: the darc-table6 study's `controls` pipeline wrote the policies the command
    wrote for the committed run (docs/runs/darc-alf-noisy-v2/t6), and its test grid gave correct 45, generic 50,
    mismatched 44 and the bare agent 41 of 50, paired against the correct policy."""
    from playground.core.study_file import load_study
    from playground.host.manager import get_host
    from playground.run.study import study_table

    host = get_host()
    study = load_study(host.studies.get("darc-table6").path)
    cells = {(c.grid, c.harness): c for c in study_table(study, DOCS / "runs" / "darc-table6",
                                                         {f.name: f for f in host.figures})}
    for control in ("correct", "generic", "mismatched"):
        mine = json.loads((DOCS / "runs" / "darc-table6" / "controls" / "policies" / f"{control}.json").read_text())
        committed = json.loads((DOCS / P / "t6" / "policies" / f"{control}.json").read_text())
        assert {k: v for k, v in mine.items() if k != "evidence"} == {
            k: v for k, v in committed.items() if k != "evidence"}, control
    harnesses = ["base", *(f"darc:{{out}}/controls/policies/{c}.json" for c in ("correct", "generic", "mismatched"))]
    assert [cells[("policies", h)].wins for h in harnesses] == [41, 45, 50, 44]
    assert cells[("policies", harnesses[1])].versus is None  # the reference: the others are paired with it
    assert [cells[("policies", h)].versus for h in harnesses[2:]] == [harnesses[1]] * 2


def test_the_table15_study_re_derives_from_its_committed_run():
    """docs/results/darc.md, "ALFWorld: Table 15's shape (the noisy instrument)": 7 lost games, all fixed by some mode;
    majority 7/7, uniform random 9/14, the rule 5/7, the instrument as the LLM diagnoser 4/7."""
    from playground.core.study_file import load_study
    from playground.host.manager import get_host
    from playground.run.study import study_table

    host = get_host()
    study = load_study(host.studies.get("darc-table15").path)
    cells = {(c.grid, c.harness): c for c in study_table(study, DOCS / "runs" / "darc-table15",
                                                         {f.name: f for f in host.figures})}
    agreement = cells[("agreement", "base")].figures
    assert [round(agreement[f"darc_agreement[{d}]"] * 14) for d in ("majority", "uniform random", "rule", "LLM")] == [
        14, 9, 10, 8]
    assert cells[("evidence", "base")].episodes - cells[("evidence", "base")].wins == 7
