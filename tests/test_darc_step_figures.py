"""DARC's Table 10 and Figure 3 as study columns (`plugins/darc/figures.py`): success per 100 env steps and the share
solved within each step budget, on hand-made records and on the committed run docs/results/darc.md quotes."""

from __future__ import annotations

from pathlib import Path

import pytest

from playground.host_api import EpisodeRecord, load_records, read_record, split_by_harness
from playground.plugins.darc.figures import BUDGETS, FIGURES, solved_within, success_per_100_steps

RUN = Path(__file__).resolve().parent.parent / "docs" / "runs" / "darc-alf-noisy-v2" / "test"


def _record(harness: str, task: str, won: bool, steps: int) -> EpisodeRecord:
    return read_record({"harness": harness, "task_id": task, "status": "won" if won else "lost", "won": won,
                        "steps": steps, "key": f"{harness}/{task}"})


def test_success_per_100_steps_and_the_share_solved_within_each_budget():
    base = [_record("base", "a", True, 6), _record("base", "b", False, 10), _record("base", "c", True, 9)]
    assert success_per_100_steps(base) == pytest.approx(8.0)  # 2 won in 25 steps, the lost one's counted
    assert solved_within(base) == {"5": 0.0, "10": pytest.approx(2 / 3), "20": pytest.approx(2 / 3),
                                   "30": pytest.approx(2 / 3), "40": pytest.approx(2 / 3), "50": pytest.approx(2 / 3)}
    quick = [_record("darc", "a", True, 3), _record("darc", "b", True, 8)]
    assert solved_within(quick)["5"] == 0.5 and solved_within(quick)["10"] == 1.0
    assert success_per_100_steps([]) is None and solved_within([]) is None
    assert [f.name for f in FIGURES][:2] == ["success_per_100_steps", "solved_within"] and BUDGETS[0] == 5


def test_the_committed_test_run_gives_the_published_table_10_and_curve():
    """docs/results/darc.md, "ALFWorld: Tables 10 and 14 and Figure 3 (the noisy instrument)": success per 100 steps
    5.18 / 15.05 / 15.11; the diagnosed policy solves its 45 within 10 steps, base needs 30 for its 41."""
    cells = split_by_harness(load_records(RUN))
    base, diagnosed, full = (cells[name] for name in ("base", "darc:runs/darc-alf-noisy-v2/av/policy.json",
                                                      "darc:runs/darc-alf-noisy-v2/full/policy.json"))
    assert [round(success_per_100_steps(c), 2) for c in (base, diagnosed, full)] == [5.18, 15.05, 15.11]
    assert round(solved_within(diagnosed)["10"] * 50) == 45 and round(solved_within(base)["20"] * 50) == 31
    assert round(solved_within(base)["30"] * 50) == 41


def _graded(folder: Path, mode: str | None, replies: list[tuple[str, str, str]]) -> list[EpisodeRecord]:
    """A pipeline folder diagnosed by the instrument: diagnosis.json naming `mode`, and instrument.json grading one
    reply per failed episode (episode id, the mode named, the injected mode; "none" for none)."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "diagnosis.json").write_text(json.dumps({"mode": mode}))
    grades = {episode: {"correct": named == truth, "truth": {"mode": truth, "injected_mode": truth},
                        "answer": {"mode": named, "why": "-"}} for episode, named, truth in replies}
    (folder / "instrument.json").write_text(json.dumps({"accuracy": 0.7, "episodes": grades}))
    return [read_record({"harness": "darc-profile:sentry", "task_id": episode, "status": "lost", "won": False,
                         "steps": 5, "key": episode, "episode_id": episode}) for episode, _, _ in replies]


def test_the_instrument_diagnoser_columns_read_its_grades(tmp_path):
    """`darc_diagnoser_right` (per episode), `darc_family_agrees` (the family's mode against the injected majority)
    and `darc_families_resampled` (families of 11 resampled from the folder's graded episodes)."""
    from playground.plugins.darc.llm_diagnosis import majority

    column = {f.name: f for f in FIGURES}
    replies = [("e1", "action_validity", "action_validity"), ("e2", "none", "action_validity"),
               ("e3", "procedure_breadth", "none"), ("e4", "action_validity", "action_validity")]
    records = _graded(tmp_path / "a", "action_validity", replies)
    value = {name: column[name].value(records, None, tmp_path / "a")
             for name in ("darc_diagnoser_right", "darc_family_agrees", "darc_families_resampled")}
    assert value["darc_diagnoser_right"] == 0.5 and value["darc_family_agrees"] == 1.0
    assert value["darc_families_resampled"] == 1.0  # 4 episodes: every family is the whole folder, and agrees
    assert column["darc_diagnoser_right"].value(records[:1], None, tmp_path / "a") == 1.0  # the cell's own episodes
    wrong = _graded(tmp_path / "b", "procedure_breadth", replies)
    assert column["darc_family_agrees"].value(wrong, None, tmp_path / "b") == 0.0
    assert column["darc_diagnoser_right"].value(records, None, tmp_path) is None  # no instrument.json: not graded
    assert majority(["a", "b", None, None]) is None and majority(["a", "a", "b", None, None, None]) == "a"


def test_the_committed_darc_instrument_study_gives_the_published_agreement():
    """docs/methods/darc.md, "The diagnoser against judge quality": over the four profiles' 69 failed episodes the
    instrument-diagnoser's replies name the injected mode 36 / 44 / 59 / 69 times at 0.5 / 0.7 / 0.86 / 1, and the
    family's mode is the injected majority in 3 / 3 / 4 / 4 of the 4 profiles."""
    from playground.core.study_file import load_study
    from playground.host.manager import get_host
    from playground.run.study import study_table

    host = get_host()
    study = load_study(host.studies.get("darc-instrument").path)
    run = RUN.parent.parent / "darc-instrument"
    cells = {c.grid: c for c in study_table(study, run, {f.name: f for f in host.figures})}
    failed = {seed: cells[f"s{seed}"].episodes - cells[f"s{seed}"].wins for seed in range(4)}
    assert sum(failed.values()) == 69
    for accuracy, right, agreeing in (("0.5", 36, 3), ("0.7", 44, 3), ("0.86", 59, 4), ("1.0", 69, 4)):
        rows = [cells[f"s{seed}-acc{accuracy}"].figures for seed in range(4)]
        assert round(sum(row["darc_diagnoser_right"] * failed[seed] for seed, row in enumerate(rows))) == right
        assert sum(row["darc_family_agrees"] for row in rows) == agreeing
