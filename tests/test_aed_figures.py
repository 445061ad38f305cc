"""AED's study columns (`plugins/aed/figures.py`) re-derive the published matched-replay table (docs/methods/aed.md,
"the instrument as the diagnoser") from its committed run files: the same pairs, pass rates, paired interval,
p-value, grades, yield and split by the instrument's reply, at every diagnoser accuracy."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from playground.plugins.aed.figures import figures_of
from playground.run.rundir import load_records

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "docs" / "runs" / "instrument-aed"


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("instrument-aed")
    with tarfile.open(RUN / "traces.tar.gz") as tar:
        tar.extractall(folder, filter="data")
    return folder / "traces"


@pytest.mark.parametrize("cell", json.loads((RUN / "table.json").read_text())["cells"],
                         ids=lambda cell: f"accuracy {cell['accuracy']:g}")
def test_the_columns_equal_the_published_table(traces, tmp_path, cell):
    folder = tmp_path / "copy"  # laid out as a study's pipeline folder: the run's files, then aed/
    (folder / "aed").mkdir(parents=True)
    for name in ("config.json", "episodes.jsonl"):
        shutil.copy(RUN / name, folder / name)
    (folder / "traces").symlink_to(traces)
    for name in ("diagnose.json", "diagnoses.jsonl", "rejected.jsonl", "replays.jsonl", "instrument.json"):
        shutil.copy(RUN / f"acc{cell['accuracy']:g}" / name, folder / "aed" / name)

    got = figures_of(folder, load_records(folder))
    assert got["aed_pairs_replayed"] == cell["replayed"]
    assert got["aed_grounded_yield"] == pytest.approx(cell["grounded_yield"])
    assert got["aed_replies_right"] == pytest.approx(cell["right"] / cell["graded"])
    for name in ("correction_pass_rate", "retry_pass_rate", "difference"):
        assert got[f"aed_{name}"] == pytest.approx(cell[name]), name
    assert [got["aed_difference_ci_low"], got["aed_difference_ci_high"]] == pytest.approx(cell["difference_ci95"])
    assert got["aed_difference_p"] == pytest.approx(cell["p_value"])
    assert got["aed_grades"] == {grade: float(n) for grade, n in cell["grades"].items()}
    for reply in ("right", "wrong"):
        published = cell["by_reply"][reply]
        assert got["aed_pairs_by_reply"][reply] == published["pairs"]
        assert got["aed_correction_by_reply"][reply] == pytest.approx(published["correction_pass_rate"])
        assert got["aed_retry_by_reply"][reply] == pytest.approx(published["retry_pass_rate"])
    assert got["aed_oracle_continuation"] == 1.0  # `noisy` continued: it follows the expert plan
    assert got["aed_selected_pass_rate"] is None  # one proposal per pair: no search


def test_a_folder_without_a_diagnosis_has_no_aed_figures(tmp_path):
    assert figures_of(tmp_path, []) == {}


def test_the_committed_study_run_gives_the_documented_rows():
    """docs/methods/aed.md, "Through the study": the study's own run, tabulated from its committed files."""
    from playground.core.study_file import load_study
    from playground.host.manager import get_host
    from playground.run.study import study_table

    host = get_host()
    study = load_study(host.studies.get("aed-matched-replay").path)
    cells = {c.grid: c.figures for c in study_table(study, ROOT / "docs" / "runs" / "aed-matched-replay",
                                                    {f.name: f for f in host.figures})}
    rows = [(cells[g]["aed_pairs_replayed"], round(cells[g]["aed_correction_pass_rate"], 3),
             round(cells[g]["aed_retry_pass_rate"], 3), cells[g]["aed_grades[E2]"])
            for g in ("acc0.5", "acc0.7", "acc0.86", "acc1")]
    assert rows == [(75, 0.587, 0.433, 7), (87, 0.672, 0.494, 8), (101, 0.713, 0.52, 10), (118, 0.712, 0.5, 14)]
