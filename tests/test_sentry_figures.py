"""Sentry's table as study figures: `playground study table RUN --reference sentry` re-derives every figure the
retired `sentry table` published for the committed run docs/runs/sentry-paper-easy-v2 (its `table.json`)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from playground.cli.study import host_figures, run_as_study
from playground.host.manager import get_host
from playground.run.study import study_table

RUN = Path(__file__).resolve().parents[1] / "docs" / "runs" / "sentry-paper-easy-v2"


def _cells(run: Path) -> dict:
    study = run_as_study(run, "sentry")
    return {cell.harness: cell for cell in study_table(study, run.parent, host_figures(get_host()))}


@pytest.fixture(scope="module")
def published() -> dict:
    return {row["harness"]: row for row in json.loads((RUN / "table.json").read_text())}


def test_the_committed_records_give_the_published_figures(published):
    cells = _cells(RUN)
    assert set(cells) == set(published)
    for harness, row in published.items():
        cell, n = cells[harness], row["episodes"]
        assert (cell.episodes, cell.wins) == (n, row["won"])
        assert cell.p == pytest.approx(row["p"]) if harness != "sentry" else cell.versus is None
        assert cell.resolved == (pytest.approx(row["resolved"] / row["verdicts"]) if row["verdicts"] else None)
        assert cell.figures["soft_repairs"] == pytest.approx(row["soft_repairs"] / n)
        assert cell.figures["agent_tokens"] == pytest.approx(row["agent_tokens"] / n)
        assert cell.figures["judge_tokens"] == pytest.approx(row["judge_tokens"] / n)
    # the traces are packed (traces.tar.gz): the declines need them, so none is claimed
    assert all(cell.figures.get("need_check_declined") is None for cell in cells.values())


def test_with_its_traces_unpacked_the_declines_equal_the_published(published, tmp_path):
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run)
    with tarfile.open(run / "traces.tar.gz") as packed:
        packed.extractall(run, filter="data")
    cells = _cells(run)
    for harness, row in published.items():
        assert cells[harness].figures["need_check_declined"] == pytest.approx(row["declined"] / row["episodes"]) \
            or (row["declined"] == 0 and not cells[harness].figures["need_check_declined"])
