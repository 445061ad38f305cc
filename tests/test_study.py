"""Studies as data (`playground study`, `playground.run.study`, `playground.core.study_file`): study files are
validated with clear errors, every shipped study runs end to end at smoke size, `plan` counts what is left, and
the published instrument tables re-derive equal through the study layer from their committed run files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.cli.main import main
from playground.core.study_file import StudyError, load_study
from playground.host.manager import Host
from playground.run.study import plan, run_study, study_table

ROOT = Path(__file__).resolve().parents[1]
STUDY = """
name = "tiny-two"
title = "two harnesses on the tiny env"
kind = "machinery"

[[grids]]
name = "noisy"
env = "tiny"
episodes = 3
agent = "noisy"
agent_options = { repeat = 0.5 }
harnesses = ["base", "sentry"]

[smoke]
episodes = 2
max_steps = 5
"""


@pytest.fixture(scope="module")
def host():
    return Host().load()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, words", [
    ("name = ", "is not valid TOML"),
    (STUDY.replace('kind = "machinery"', 'kind = "machinery"\ncolour = "red"'), "colour: Extra inputs are not permitted"),
    (STUDY.replace('["base", "sentry"]', '["base", "base"]'), "grids.0.harnesses: Value error, a harness is listed twice"),
    (STUDY.replace("episodes = 3", "episodes = 0"), "grids.0.episodes: Input should be greater than or equal to 1"),
    (STUDY.replace('kind = "machinery"', 'kind = "guess"'), "kind: String should match pattern"),
    (STUDY.replace("[[grids]]", "[grid_defaults]\nname = \"x\"\n\n[[grids]]"),
     "grid_defaults: name belongs to each grid"),
    (STUDY.replace("[[grids]]", "[grid_defaults]\nmax_step = 5\n\n[[grids]]"),
     "grid_defaults: unknown grid field(s) max_step; choose from env, split,"),
    (STUDY.replace("[[grids]]", "[grid_defaults]\nmax_steps = 0\n\n[[grids]]"),
     "grids.0.max_steps: Input should be greater than or equal to 1"),
])
def test_a_bad_study_file_is_refused_naming_the_file_and_the_place(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(StudyError) as raised:
        load_study(path)
    assert str(path) in str(raised.value) and words in str(raised.value)


SHORT = """
name = "short"
title = "grid defaults"

[grid_defaults]
env = "tiny"
max_steps = 7
agent_options = { stall = 0.1 }
params = { window = 2 }

[[grids]]
name = "first"
episodes = 3
agent_options = { repeat = 0.5 }
harnesses = ["base", "sentry"]

[[grids]]
name = "other"
episodes = 1
max_steps = 9
harnesses = ["base"]
"""

LONG = """
name = "short"
title = "grid defaults"

[[grids]]
name = "first"
env = "tiny"
episodes = 3
max_steps = 7
agent_options = { repeat = 0.5 }
params = { window = 2 }
harnesses = ["base", "sentry"]

[[grids]]
name = "other"
env = "tiny"
episodes = 1
max_steps = 9
agent_options = { stall = 0.1 }
params = { window = 2 }
harnesses = ["base"]
"""


def test_grid_defaults_fill_what_a_grid_leaves_out_and_the_grid_wins(tmp_path):
    study = load_study(write(tmp_path, SHORT))
    first, other = study.grids
    # a key the grid sets replaces the default whole (agent_options is the grid's own, not merged)
    assert (first.env, first.max_steps, first.agent_options, first.params) == ("tiny", 7, {"repeat": 0.5},
                                                                               {"window": 2})
    assert (other.env, other.max_steps, other.agent_options, other.params) == ("tiny", 9, {"stall": 0.1},
                                                                               {"window": 2})
    # the study written out in full is the same study; study.json holds the grids whole, not the defaults
    assert study.model_dump() == load_study(write(tmp_path, LONG)).model_dump()
    assert "grid_defaults" not in study.model_dump()


def test_a_study_runs_resumes_and_tabulates(host, tmp_path):
    study = load_study(write(tmp_path, STUDY))
    out = tmp_path / "out"
    assert [(r.episodes, r.finished, r.calls) for r in plan(study, out)] == [(6, 0, None)]
    run_study(host, study, out)
    assert [(r.episodes, r.finished, r.calls) for r in plan(study, out)] == [(6, 6, 0.0)]
    records = [json.loads(line) for line in (out / "noisy" / "episodes.jsonl").read_text().splitlines()]
    cells = study_table(study, out)
    assert [(c.grid, c.harness, c.episodes) for c in cells] == [("noisy", "base", 3), ("noisy", "sentry", 3)]
    for cell in cells:
        mine = [r for r in records if r["harness"] == cell.harness]
        assert cell.wins == sum(r["won"] for r in mine)
        assert cell.steps == sum(r["steps"] for r in mine) / 3
    assert cells[0].versus is None and cells[1].versus == "base" and cells[1].p is not None
    run_study(host, study, out)  # resumed: nothing played twice
    assert len((out / "noisy" / "episodes.jsonl").read_text().splitlines()) == 6


def test_a_keyed_figure_gets_a_column_per_key_and_a_table_of_its_own(host, tmp_path, capsys, monkeypatch):
    """A figure that returns {key: value} has a column `NAME[KEY]` per key some cell has (None in the others, and
    no column of its bare name); the terminal prints it as a table of its own, a column per key."""
    from playground.cli.study import print_table
    from playground.core.figures import Figure

    def steps_by_outcome(records, events):  # keyed where the cell won something, None elsewhere
        won = [r.steps for r in records if r.won]
        return {"won": sum(won) / len(won), "lost": None} if won else None

    study = load_study(write(tmp_path, STUDY.replace("episodes = 3", "episodes = 6").replace(
        'kind = "machinery"', 'kind = "machinery"\nfigures = ["steps_by_outcome", "keyed_nowhere"]')))
    out = tmp_path / "out"
    run_study(host, study, out)
    figures = {"steps_by_outcome": Figure("steps_by_outcome", "steps of won and lost episodes", steps_by_outcome),
               "keyed_nowhere": Figure("keyed_nowhere", "never keyed", lambda records, events: 1.5)}
    cells = study_table(study, out, figures)
    assert all(list(c.figures) == ["steps_by_outcome[won]", "steps_by_outcome[lost]", "keyed_nowhere"]
               for c in cells)
    assert any(c.figures["steps_by_outcome[won]"] for c in cells)
    monkeypatch.setattr(host.figures, "get", lambda name: figures.get(name))
    monkeypatch.setattr("playground.cli.study.get_host", lambda: host)
    print_table(study, cells)
    printed = capsys.readouterr().out
    assert "┃ harness ┃   won ┃ lost ┃" in printed  # its own table, a column per key
    assert "steps_by_outcome: steps of won and lost episodes" in printed  # and its line below
    assert printed.count("keyed_nowhere") == 2  # its column in the main table, and its line below


def test_the_table_as_a_page_with_its_charts(tmp_path, capsys):
    """`study table --html FILE`: the table's every column and cell, the success chart, a curve per keyed figure
    with numeric keys (DARC's solved_within on its committed run); an existing page needs --force, and a run's own
    files are refused with it."""
    run = ROOT / "docs" / "runs" / "darc-alf-noisy-v2" / "test"
    page = tmp_path / "table.html"
    assert main(["study", "table", str(run), "--html", str(page)]) == 0
    html = page.read_text()
    assert "<th>success_per_100_steps</th>" in html and "<th>solved_within[10]</th>" in html
    assert "<td>15.05</td>" in html and "<td>5.18</td>" in html  # Table 10's published figures
    assert "<title>base: 82% [69%, 90%]</title>" in html  # the success chart: 41 of 50, Wilson interval
    assert "<h3>solved_within</h3>" in html and "<title>base: 82% at 50</title>" in html  # its curve
    capsys.readouterr()
    assert main(["study", "table", str(run), "--html", str(page)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["study", "table", str(run), "--html", str(page), "--force"]) == 0
    assert main(["study", "table", str(run), "--html", str(run / "summary.json"), "--force"]) == 2
    assert "own files" in capsys.readouterr().err


def test_the_cli_lists_plans_runs_and_prints_tables(tmp_path, capsys):
    path = write(tmp_path, STUDY)
    out = tmp_path / "out"
    assert main(["study", "list"]) == 0
    assert "stack-workflow" in capsys.readouterr().out
    assert main(["study", "run", str(path), "--smoke", "--out", str(out)]) == 0
    assert "tiny-two" in capsys.readouterr().out
    assert main(["study", "table", str(path), "--out", str(out), "--json"]) == 0
    cells = json.loads(capsys.readouterr().out)
    assert [c["harness"] for c in cells] == ["base", "sentry"] and all(c["episodes"] == 2 for c in cells)
    assert main(["study", "table", str(path), "--out", str(out), "--csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("grid,harness,episodes,wins")
    assert main(["study", "plan", "nope"]) != 0
    assert "no study 'nope'" in capsys.readouterr().err


def test_a_study_plays_where_it_is_told_with_one_playbook(tmp_path, capsys):
    """`study run` takes `playground run`'s placement: worker processes here (or Ray), and one playbook for every
    grid (a file here; a postgresql:// URL on a cluster)."""
    path = write(tmp_path, STUDY)
    out, book = tmp_path / "out", tmp_path / "shared.sqlite"
    assert main(["study", "run", str(path), "--smoke", "--out", str(out), "--workers", "2",
                 "--playbook", str(book)]) == 0
    config = json.loads((out / "noisy" / "config.json").read_text())
    assert config["playbook"] == str(book) and book.is_file()
    assert len((out / "noisy" / "episodes.jsonl").read_text().splitlines()) == 4
    assert not (out / "noisy" / "playbooks").exists()  # sentry grew the shared playbook, not its own


def shipped(host) -> list[str]:
    return host.studies.names()


# every shipped study at smoke size, its table's columns and plan's estimate: tests/test_shipped_studies.py


def test_the_shipped_studies_are_these(host):
    from tests.test_shipped_studies import SHIPPED

    assert shipped(host) == SHIPPED


@pytest.mark.parametrize("name, folder", [("sentry-instrument-tw", "instrument-sentry-tw"),
                                          ("sentry-instrument-tw-budget", "instrument-sentry-tw-budget"),
                                          ("sentry-instrument-alf", "instrument-sentry-alf")])
def test_the_published_instrument_tables_re_derive_equal_through_the_study_layer(host, name, folder):
    """docs/results/instrument.md's instrument sweeps: wins, episodes and McNemar p of every cell from the committed
    run files, as the sweep script published them (table.json)."""
    study = load_study(host.studies.get(name).path)
    published = json.loads((ROOT / "docs" / "runs" / folder / "table.json").read_text())
    old = {(cell["cell"], harness): entry for cell in published["cells"] for harness, entry in cell["harnesses"].items()}
    cells = study_table(study, ROOT / "docs" / "runs" / folder)
    assert len(cells) == len(old)
    for cell in cells:
        entry = old[(cell.grid, cell.harness)]
        assert (cell.wins, cell.episodes) == (entry["won"], entry["episodes"])
        assert (cell.p if cell.p is not None else 1.0) == pytest.approx(entry["p"])


@pytest.mark.parametrize("extra, words", [
    ('[paper_figures.speed]\nbase = 1.0\n', "paper_figures: Value error, unknown metric speed"),
    ('[paper_figures.steps]\n"noisy/nope" = 1.0\n', "the paper's steps names no cell of the study: noisy/nope"),
    ('[smoke.stand_ins.nope]\nenv = "tiny"\n', "smoke.stand_ins names no grid: nope"),
])
def test_paper_figures_and_stand_ins_must_name_what_the_study_has(tmp_path, extra, words):
    with pytest.raises(StudyError) as raised:
        load_study(write(tmp_path, STUDY + "\n" + extra))
    assert words in str(raised.value)


def test_here_paper_figures_stand_ins_and_a_kept_agent(host, tmp_path):
    """`{here}` is the study file's folder in a harness name (the table shows the name as declared); a paper column
    per declared metric; a stand-in env at smoke size; `--agent` leaves a kept agent alone."""
    from playground.run.study import sized, with_agent

    text = STUDY.replace('harnesses = ["base", "sentry"]', 'harnesses = ["base", "reflexion:{here}"]') + """
[paper_figures.steps]
"noisy/base" = 4.5
"""
    study = load_study(write(tmp_path, text))
    assert study.grids[0].runnable(study.here) == ["base", f"reflexion:{tmp_path.resolve()}"]
    assert study.paper_number("steps", "noisy", "base") == 4.5 and study.paper_number("steps", "noisy", "x") is None
    kept = study.model_copy(update={"grids": [study.grids[0].model_copy(update={"keep_agent": True})]})
    assert with_agent(kept, "random").grids[0].agent == "noisy"
    assert with_agent(study, "random").grids[0].agent == "random" and with_agent(study, "random").here == study.here
    smoke = type(study.smoke).model_validate({**study.smoke.model_dump(),
                                              "stand_ins": {"noisy": {"env": "tiny:default", "params": {}}}})
    assert sized(study.grids[0], smoke).env == "tiny:default" and sized(study.grids[0], smoke).params == {}


def test_plan_borrows_per_harness_rates_scaled_to_the_budget_and_reads_an_earlier_run(host, tmp_path):
    """A cell not yet played takes the same harness's rates from the study's other grid (per step, scaled to its
    budget); `rates_from` plans a fresh directory from an earlier run at another budget."""
    two = STUDY.replace("[smoke]", """[[grids]]
name = "later"
env = "tiny"
episodes = 3
max_steps = 6
agent = "noisy"
agent_options = { repeat = 0.5 }
harnesses = ["sentry", "base"]

[smoke]""")
    study = load_study(write(tmp_path, two))
    out = tmp_path / "out"
    run_study(host, study, out, grids=["noisy"])
    first, later = plan(study, out)
    assert (first.finished, first.calls, later.finished, later.borrowed) == (6, 0.0, 0, True)
    assert later.calls == 0.0  # `noisy` answers no judge here: rules, no model calls
    fresh = plan(study, tmp_path / "fresh", rates_from=out)
    assert [row.finished for row in fresh] == [0, 0] and fresh[0].calls == 0.0 and fresh[0].seconds is not None


def test_the_terminal_and_html_tables_show_a_value_one_way():
    """`shown_value`: shares as percentages (diff signed), p to two significant digits, tokens and big counts whole."""
    from playground.core.figures import shown_value

    assert [shown_value("success", 0.456), shown_value("paper success", 0.5), shown_value("diff", 0.1)] == [
        "46%", "50%", "+10%"]
    assert [shown_value("p", 0.000123), shown_value("tokens", 1234.4), shown_value("steps", 12.345)] == [
        "0.00012", "1,234", "12.35"]
    assert [shown_value("lesson_precision", 0.25, share=True), shown_value("aed_pairs", 2500.0)] == ["25%", "2,500"]
    assert shown_value("steps", None) == "-"
