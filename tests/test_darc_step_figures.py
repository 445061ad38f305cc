"""DARC's Table 10 and Figure 3 as study columns (`plugins/darc/figures.py`): success per 100 env steps and the share
solved within each step budget, on hand-made records and on the committed run docs/results.md quotes."""

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
    """docs/results.md, "ALFWorld: Tables 10 and 14 and Figure 3 (the noisy instrument)": success per 100 steps
    5.18 / 15.05 / 15.11; the diagnosed policy solves its 45 within 10 steps, base needs 30 for its 41."""
    cells = split_by_harness(load_records(RUN))
    base, diagnosed, full = (cells[name] for name in ("base", "darc:runs/darc-alf-noisy-v2/av/policy.json",
                                                      "darc:runs/darc-alf-noisy-v2/full/policy.json"))
    assert [round(success_per_100_steps(c), 2) for c in (base, diagnosed, full)] == [5.18, 15.05, 15.11]
    assert round(solved_within(diagnosed)["10"] * 50) == 45 and round(solved_within(base)["20"] * 50) == 31
    assert round(solved_within(base)["30"] * 50) == 41
