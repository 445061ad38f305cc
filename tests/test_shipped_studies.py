"""Every study the plugins ship runs end to end at smoke size, and `plan` predicts its model calls.

Each shipped study (Sentry's, DARC's, DART's and AED's paper tables and instrument sweeps) is played at its smoke
size (`[smoke]`: 2 tasks, a few steps; a stand-in env for data that needs a download) by the `noisy` instrument
where the study names a model agent (a grid whose agent is part of the design keeps it). Before that, a pilot
plays the same study on the same tasks with a step budget one shorter, in another directory; `plan` then
estimates the smoke run's model calls from the pilot's rates (per cell, per step, scaled to the budget), and the
estimate must be within 20% of what the smoke run measured (both zero where no cell calls a model). The table
must have every declared column, a row per cell, and the paper's figure wherever the study gives one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.cli.main import main
from playground.core.study_file import Study, load_study
from playground.host.manager import Host
from playground.run.rundir import load_records
from playground.run.pipelines import plan_pipelines
from playground.run.study import plan, run_study, sized, study_columns, study_table, table_rows, with_agent

MODEL_FREE = {"noisy", "expert", "guard-top1", "random"}  # the scripted agents the studies name
SHIPPED = ["aed-matched-replay", "darc-instrument", "darc-table10", "darc-table13", "darc-table14", "darc-table15",
           "darc-table5", "darc-table6", "darc-table7", "darc-table9", "dart-bench", "dart-instrument",
           "sentry-a64-retrieval",
           "sentry-instrument-alf", "sentry-instrument-detectors", "sentry-instrument-tw",
           "sentry-instrument-tw-budget", "sentry-main", "sentry-paired-forks", "sentry-table3-ablations",
           "sentry-table4-heldout",
           "stack-workflow"]
PAPER_TABLES = [name for name in SHIPPED if "instrument" not in name and name != "stack-workflow"]


@pytest.fixture(scope="module")
def host():
    return Host().load()


def as_played(study: Study) -> Study:
    """The study as CI plays it: the `noisy` instrument in place of a model agent."""
    if all(grid.agent in MODEL_FREE or grid.keep_agent for grid in study.grids):
        return study
    return with_agent(study, "noisy", {"judge_accuracy": 0.86})


def shorter(study: Study) -> Study:
    """The pilot: the same smoke tasks, a step budget one shorter (rates per step, scaled by plan)."""
    pilot = study.model_copy(update={"smoke": study.smoke.model_copy(
        update={"max_steps": max(1, study.smoke.max_steps - 1)})})
    pilot._here = study.here
    return pilot


def test_the_shipped_studies_are_every_paper_table_the_project_runs(host):
    assert host.studies.names() == SHIPPED


def test_study_list_shows_every_shipped_table_with_its_paper_reference(host, capsys):
    assert main(["study", "list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert sorted(lines) == SHIPPED
    for name in PAPER_TABLES:
        study = load_study(host.studies.get(name).path)
        assert study.paper and f"paper: {study.paper}" in lines[name], name


@pytest.mark.parametrize("name", PAPER_TABLES)
def test_a_paper_table_names_its_table_and_says_its_kind_in_its_header(host, name):
    path = Path(host.studies.get(name).path)
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    study = load_study(path)
    assert study.kind in ("instrument", "real-model", "machinery")
    assert any("Paper:" in line for line in header) and any("figures" in line for line in header)
    if study.kind == "real-model":
        assert any("--agent llm --llm-base-url URL" in line for line in header)


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_study_runs_at_smoke_size_and_plan_predicts_its_calls(host, tmp_path, name, capsys):
    study = as_played(load_study(host.studies.get(name).path))
    # plan from a pilot run of the same tasks at a shorter budget
    run_study(host, shorter(study), tmp_path / "pilot", smoke=True)
    rows = plan(study, tmp_path / "smoke", smoke=True, rates_from=tmp_path / "pilot")
    assert all(row.calls is not None and row.finished == 0 for row in rows), rows
    steps = plan_pipelines([(p, sized(study.grid(p.grid), study.smoke)) for p in study.pipelines],
                           tmp_path / "smoke", True, tmp_path / "pilot")
    assert all(step.calls is not None for step in steps), steps
    predicted = sum(row.calls for row in rows) + sum(step.calls for step in steps)

    run_study(host, study, tmp_path / "smoke", smoke=True)
    measured = sum(record.model_calls for grid in study.grids
                   for record in load_records(tmp_path / "smoke" / grid.name))
    measured += sum(done["model_calls"] for p in study.pipelines
                    for done in json.loads((tmp_path / "smoke" / p.name / "pipeline.json").read_text())["done"])
    with capsys.disabled():
        print(f"\nplan/measured model calls at smoke size, {name}: {predicted:.0f}/{measured}")
    if measured == 0:
        assert predicted == 0
    else:
        assert abs(predicted / measured - 1) <= 0.20, (name, predicted, measured)
    assert [row.finished for row in plan(study, tmp_path / "smoke", smoke=True)] == [row.episodes for row in rows]

    cells = study_table(study, tmp_path / "smoke", {figure.name: figure for figure in host.figures})
    folders = study.folders()
    assert [(c.grid, c.harness) for c in cells] == [(name, h) for name, _, shown in folders for h in shown]
    sizes = {name: min(g.episodes, study.smoke.episodes) * min(g.trials, study.smoke.trials) for name, g, _ in folders}
    assert all(cell.episodes == sizes[cell.grid] for cell in cells)
    columns = study_columns(study, cells)
    rows = table_rows(study, cells)
    assert all(list(row) == columns for row in rows)
    for metric, figures in study.paper_metric_items():
        assert f"paper {metric}" in columns
        for key, value in figures.items():
            marked = [row for row in rows if key in (row["harness"], f"{row['grid']}/{row['harness']}")]
            assert marked and all(row[f"paper {metric}"] == value for row in marked), (metric, key)

    # the CLI reads the same directory: table as JSON, and plan
    capsys.readouterr()
    assert main(["study", "table", name, "--out", str(tmp_path / "smoke"), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(cells)
    assert main(["study", "plan", name, "--smoke", "--out", str(tmp_path / "smoke")]) == 0
    assert name in capsys.readouterr().out


def test_every_shipped_study_and_every_file_it_names_ship_as_package_data(host):
    """A non-editable install carries the study files and the files their `{here}` harnesses read (a policy)."""
    import tomllib
    from fnmatch import fnmatch

    root = Path(__file__).resolve().parents[1]
    shipped = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for name in SHIPPED:
        spec = host.studies.get(name)
        study = load_study(spec.path)
        package = root / "plugins" / spec.plugin
        files = [harness.partition(":")[2] for grid in study.grids for harness in grid.runnable(study.here)]
        named = [Path(spec.path)] + [Path(file) for file in files if file.startswith(study.here)]
        for path in named:
            assert path.is_file(), path
            rel = path.relative_to(package).as_posix()
            assert any(fnmatch(rel, pattern) for pattern in shipped[f"playground.plugins.{spec.plugin}"]), (name, rel)
