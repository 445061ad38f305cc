"""DARC's Table 10 and Figure 3 shapes: step efficiency and solved episodes by step budget."""

from __future__ import annotations

import json

import pytest

from playground.host_api import EpisodeRecord, read_record
from playground.plugins.darc.efficiency import efficiency, table
from tests.conftest import cli


def _record(harness: str, task: str, won: bool, steps: int, invalid: int = 0) -> EpisodeRecord:
    return read_record({"harness": harness, "task_id": task, "status": "won" if won else "lost", "won": won,
                        "steps": steps, "invalid_actions": invalid, "key": f"{harness}/{task}"})


RECORDS = [_record("base", "a", True, 6, 2), _record("base", "b", False, 10, 4), _record("base", "c", True, 9),
           _record("darc", "a", True, 3), _record("darc", "b", True, 8, 1), _record("darc", "c", False, 10)]


def test_figures_per_harness_and_solved_within_each_budget():
    base, darc = efficiency(RECORDS)
    assert (base.episodes, base.solved, base.env_steps, base.invalid_actions) == (3, 2, 25, 6)
    assert base.invalid_per_episode == 2.0 and base.success_per_100_steps == pytest.approx(8.0)
    assert darc.success_per_100_steps == pytest.approx(100 * 2 / 21)
    assert len(base.solved_within) == len(darc.solved_within) == 10  # budgets 1..the longest episode
    assert [base.solved_within[b - 1] for b in (5, 6, 8, 9, 10)] == [0, 1, 1, 2, 2]
    assert [darc.solved_within[b - 1] for b in (2, 3, 7, 8, 10)] == [0, 1, 1, 2, 2]
    text = table([base, darc], [5, 9])
    assert text.splitlines()[0].split()[-2:] == ["solved<=5", "solved<=9"]
    assert text.splitlines()[1].split()[-2:] == ["0", "2"]


def test_a_harness_not_in_the_run_and_a_bad_step_count_are_named():
    with pytest.raises(ValueError, match="harness 'ace' is not in the run; it has: base, darc"):
        efficiency(RECORDS, ["ace"])
    with pytest.raises(ValueError, match="harness base, task 'x': 'steps' must be a whole number"):
        efficiency([_record("base", "x", True, -1)])


def test_the_command_prints_the_table_and_draws_the_curve(capsys, tmp_path):
    run = tmp_path / "run"
    code, _out, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--harness", "base", "--harness",
                          "sentry", "--episodes", "6", "--quiet", "--out", str(run))
    assert code == 0, err
    code, out, err = cli(capsys, "darc", "efficiency", str(run), "--budgets", "2,40", "--plot",
                         str(tmp_path / "fig3.png"))
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["base", "sentry"]
    assert (tmp_path / "fig3.png").read_bytes()[:4] == b"\x89PNG"
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    code, out, _ = cli(capsys, "darc", "efficiency", str(run), "--harness", "sentry", "--json")
    (sentry,) = json.loads(out)
    assert sentry["solved"] == sum(r["won"] for r in records if r["harness"] == "sentry")
    assert sentry["env_steps"] == sum(r["steps"] for r in records if r["harness"] == "sentry")
    code, _, err = cli(capsys, "darc", "efficiency", str(run), "--budgets", "ten")
    assert code != 0 and "--budgets" in err
    code, _, err = cli(capsys, "darc", "efficiency", str(tmp_path), "--plot", str(tmp_path / "x.png"))
    assert code != 0 and "not a run directory" in err
    code, _, err = cli(capsys, "darc", "efficiency", str(run), "--plot", str(tmp_path / "fig3.png"))
    assert code != 0 and "fig3.png" in err
