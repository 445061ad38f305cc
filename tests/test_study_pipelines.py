"""A study's pipelines (`[[pipelines]]`, `playground.run.pipelines`): plugin steps run in order over a copy of a
grid's finished run, each done once and recorded, resumed after a failure without redoing what finished, refused
where the study changed under a folder, and tabulated as rows of their own with the figures their files give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from playground.api import Figure, PipelineStep, hookimpl
from playground.cli.main import main
from playground.core.events import HeaderEvent
from playground.core.study_file import StudyError, load_study
from playground.host.manager import Host
from playground.run.pipelines import plan_pipelines, run_pipelines
from playground.run.study import run_study, sized, study_table
from playground.run.traces import TraceWriter

STUDY = """
name = "tiny-pipelines"
title = "a grid and two pipelines over it"
kind = "machinery"

[[grids]]
name = "played"
env = "tiny"
episodes = 3
agent = "noisy"
agent_options = { repeat = 0.5 }
harnesses = ["base"]

[[pipelines]]
name = "counted"
grid = "played"
steps = [{ step = "test.count", params = { weight = 2 } }, { step = "test.count", params = { weight = 3 } }]

[[pipelines]]
name = "other"
grid = "played"
steps = [{ step = "test.count", params = { weight = 1 }, smoke_params = { weight = 5 } }]
"""


class CountParams(BaseModel):
    """The test step's parameters."""

    model_config = ConfigDict(extra="forbid")
    weight: int
    fail: bool = False
    ask: str | None = None  # a model endpoint to ask one structured question per episode (a diagnoser's calls)


def count(host, run_dir: Path, params: CountParams) -> None:
    """Log a call, then add `weight` times the episodes the copy holds to count.json (or fail on request)."""
    with (run_dir / "calls.log").open("a") as log:
        log.write(f"{params.weight}\n")
    if params.fail:
        raise RuntimeError("asked to fail")
    episodes = len((run_dir / "episodes.jsonl").read_text().splitlines())
    if params.ask:
        from playground.host_api import HTTPChatModel, ask_structured

        model = HTTPChatModel(params.ask, "judge")
        for _ in range(episodes):
            ask_structured(model, "test.judge", "Judge.", "Is it fine?", {"type": "object", "properties": {
                "fine": {"type": "boolean"}}, "required": ["fine"]})
    total = json.loads((run_dir / "count.json").read_text())["total"] if (run_dir / "count.json").exists() else 0
    (run_dir / "count.json").write_text(json.dumps({"total": total + params.weight * episodes}))


def counted(folder: Path, records) -> float | None:
    path = folder / "count.json"
    return float(json.loads(path.read_text())["total"]) / len(records) if path.is_file() else None


def counted_harness(name: str, rest: str):
    """`counted:FILE`: base, for a FILE that exists (what a pipeline wrote)."""
    from playground.host_api import HarnessSpec

    if not Path(rest).is_file():
        raise ValueError(f"{name!r}: no file {rest}")
    return HarnessSpec(name, (), {}, "base, once FILE exists", "counting")


class CountingPlugin:
    @hookimpl
    def register_pipeline_steps(self, register):
        register(PipelineStep("test.count", "weights times episodes", count, CountParams))

    @hookimpl
    def register_harness_loaders(self, register):
        register("counted:", counted_harness)

    @hookimpl
    def register_figures(self, register):
        register(Figure("test_count", "what test.count added up", of_folder=counted))


@pytest.fixture(scope="module")
def host():
    return Host().load(extra={"counting": CountingPlugin()})


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def calls(folder: Path) -> list[str]:
    return (folder / "calls.log").read_text().split()


def test_pipelines_run_over_copies_once_and_are_rows_of_the_table(host, tmp_path):
    study = load_study(write(tmp_path, STUDY))
    out = tmp_path / "out"
    run_study(host, study, out)
    assert not (out / "played" / "count.json").exists()  # the grid's own run is left as it played
    assert calls(out / "counted") == ["2", "3"] and calls(out / "other") == ["1"]
    record = json.loads((out / "counted" / "pipeline.json").read_text())
    assert record["grid"] == "played" and record["episodes"] == 3
    assert [(s["step"], s["params"]) for s in record["done"]] == [("test.count", {"weight": 2}),
                                                                   ("test.count", {"weight": 3})]
    cells = study_table(study, out, {f.name: f for f in host.figures})
    assert [(c.grid, c.harness, c.episodes) for c in cells] == [("played", "base", 3), ("counted", "base", 3),
                                                                 ("other", "base", 3)]
    assert [c.figures.get("test_count") for c in cells] == [None, 5.0, 1.0]  # per episode of the cell
    assert cells[0].wins == cells[1].wins == cells[2].wins  # the copies hold the grid's episodes
    # the finished traces are hard links to the grid's (never written again); the other files are copies
    traces = sorted((out / "played" / "traces").rglob("*.jsonl"))
    assert len(traces) == 3
    for trace in traces:
        copy = out / "counted" / trace.relative_to(out / "played")
        assert copy.stat().st_ino == trace.stat().st_ino and copy.read_text() == trace.read_text()
    assert (out / "counted" / "episodes.jsonl").stat().st_ino != (out / "played" / "episodes.jsonl").stat().st_ino
    kept = (out / "counted" / traces[0].relative_to(out / "played")).read_text()
    TraceWriter(traces[0], HeaderEvent(env="tiny", task_id="t", seed=0)).close()  # the grid's trace played afresh
    assert (out / "counted" / traces[0].relative_to(out / "played")).read_text() == kept != traces[0].read_text()
    run_study(host, study, out)  # resumed: no step runs twice
    assert calls(out / "counted") == ["2", "3"] and calls(out / "other") == ["1"]


def test_smoke_params_apply_under_smoke_and_plan_counts_the_steps_left(host, tmp_path):
    study = load_study(write(tmp_path, STUDY))
    pipelines = [(p, sized(study.grid(p.grid), study.smoke)) for p in study.pipelines]
    before = plan_pipelines(pipelines, tmp_path / "smoke", smoke=True)
    assert [(r.pipeline, r.steps, r.done, r.seconds) for r in before] == [("counted", 2, 0, None),
                                                                         ("other", 1, 0, None)]
    run_study(host, study, tmp_path / "smoke", smoke=True)
    assert calls(tmp_path / "smoke" / "other") == ["5"]
    after = plan_pipelines(pipelines, tmp_path / "again", smoke=True, rates_from=tmp_path / "smoke")
    assert [(r.done, r.seconds is not None) for r in after] == [(0, True), (0, True)]
    assert [r.done for r in plan_pipelines(pipelines, tmp_path / "smoke", smoke=True)] == [2, 1]


def test_a_failed_step_leaves_the_other_pipelines_to_run_and_resumes_from_itself(host, tmp_path):
    failing = STUDY.replace("params = { weight = 3 }", "params = { weight = 3, fail = true }")
    out = tmp_path / "out"
    with pytest.raises(StudyError, match="pipeline 'counted': RuntimeError: asked to fail"):
        run_study(host, load_study(write(tmp_path, failing)), out)
    assert calls(out / "other") == ["1"] and calls(out / "counted") == ["2", "3"]
    assert len(json.loads((out / "counted" / "pipeline.json").read_text())["done"]) == 1
    with pytest.raises(StudyError, match="step 1: .* ran test.count with .* remove .* to run the pipeline afresh"):
        run_study(host, load_study(write(tmp_path, STUDY.replace("weight = 2", "weight = 7"))), out)
    run_study(host, load_study(write(tmp_path, STUDY)), out)  # fixed: only the failed step runs again
    assert calls(out / "counted") == ["2", "3", "3"] and calls(out / "other") == ["1"]


@pytest.mark.parametrize("change, words", [
    (('step = "test.count", params = { weight = 1 }', 'step = "test.nothing", params = { weight = 1 }'),
     "pipeline 'other', step 1: no loaded plugin registers the step 'test.nothing'"),
    (("weight = 1 }", "weight = 1, colour = 2 }"), "pipeline 'other', step 1 (test.count): params.colour: Extra"),
])
def test_a_step_or_params_no_plugin_takes_is_refused_before_anything_runs(host, tmp_path, change, words):
    study = load_study(write(tmp_path, STUDY.replace(*change)))
    with pytest.raises(StudyError, match=words.replace("(", r"\(").replace(")", r"\)")):
        run_study(host, study, tmp_path / "out")
    assert not (tmp_path / "out" / "counted").exists()


def test_a_pipeline_waits_for_its_grid_to_finish(host, tmp_path):
    study = load_study(write(tmp_path, STUDY))
    pipeline = study.pipelines[0]
    with pytest.raises(StudyError, match="grid 'played', which has 3 episode\\(s\\) left to play"):
        run_pipelines(host, [(pipeline, study.grid("played"))], tmp_path / "out", smoke=False)


@pytest.mark.parametrize("change, words", [
    (('grid = "played"\nsteps = [{ step = "test.count", params = { weight = 1 }',
      'grid = "nowhere"\nsteps = [{ step = "test.count", params = { weight = 1 }'),
     "pipeline 'other' names no grid 'nowhere'"),
    (('name = "other"', 'name = "played"'), "pipeline 'played': a grid or another pipeline has that name"),
    (('steps = [{ step = "test.count", params = { weight = 1 }, smoke_params = { weight = 5 } }]', "steps = []"),
     "pipelines.1.steps: List should have at least 1 item"),
])
def test_a_bad_pipeline_is_refused_naming_the_file_and_the_place(tmp_path, change, words):
    path = write(tmp_path, STUDY.replace(*change))
    with pytest.raises(StudyError) as raised:
        load_study(path)
    assert str(path) in str(raised.value) and words in str(raised.value)


def test_study_plan_prints_the_pipelines_after_the_grids(tmp_path, capsys):
    path = write(tmp_path, STUDY)
    capsys.readouterr()
    assert main(["study", "plan", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "then the pipelines" in out and "counted" in out and "other" in out


LATER = STUDY + """
[[grids]]
name = "later"
env = "tiny"
episodes = 2
agent = "noisy"
harnesses = ["base", "counted:{out}/counted/count.json"]
"""


def test_a_later_grid_deploys_what_a_pipeline_wrote_under_out(host, tmp_path):
    study = load_study(write(tmp_path, LATER))
    out = tmp_path / "out"
    run_study(host, study, out)
    recorded = json.loads((out / "later" / "config.json").read_text())["harnesses"]
    assert recorded == ["base", f"counted:{out}/counted/count.json"]
    cells = study_table(study, out)
    assert [(c.harness, c.episodes) for c in cells if c.grid == "later"] == [
        ("base", 2), ("counted:{out}/counted/count.json", 2)]
    moved = tmp_path / "moved"
    out.rename(moved)  # the table still finds the cells: the names the runs recorded, in the declared order
    assert [c.episodes for c in study_table(study, moved)] == [c.episodes for c in cells]


def test_a_grid_whose_pipeline_failed_is_not_played_and_the_failure_is_named(host, tmp_path):
    failing = LATER.replace("params = { weight = 3 }", "params = { weight = 3, fail = true }")
    with pytest.raises(StudyError, match="grid 'later' not played: it deploys what 'counted' was to make"):
        run_study(host, load_study(write(tmp_path, failing)), tmp_path / "out")
    assert not (tmp_path / "out" / "later").exists() and calls(tmp_path / "out" / "other") == ["1"]


@pytest.mark.parametrize("text, words", [
    (STUDY.replace('[[grids]]', '[[grids]]\nname = "first"\nenv = "tiny"\nepisodes = 1\nharnesses = '
                                 '["counted:{out}/counted/count.json"]\n\n[[grids]]', 1),
     "grid 'first' names {out}/counted, which no grid above it or pipeline over one makes"),
    (STUDY.replace("params = { weight = 1 }", 'params = { weight = 1, note = "{out}/nowhere/x" }'),
     "pipeline 'other' names {out}/nowhere, which is not made before it"),
])
def test_what_is_named_under_out_must_be_made_before_it(tmp_path, text, words):
    path = write(tmp_path, text)
    with pytest.raises(StudyError) as raised:
        load_study(path)
    assert words in str(raised.value)


def test_a_step_s_model_calls_are_recorded_and_planned(host, tmp_path):
    """The calls a step makes to a model (a diagnoser's, on a real HTTP client against a server on 127.0.0.1) are
    recorded in pipeline.json, and `study plan` scales them per copied episode to a bigger grid."""
    from playground.testing.openai_server import ScriptedChatServer

    with ScriptedChatServer(default='{"fine": true}') as server:
        text = STUDY.replace("params = { weight = 1 }", f'params = {{ weight = 1, ask = "{server.base_url}" }}')
        study = load_study(write(tmp_path, text))
        run_study(host, study, tmp_path / "small")
        asked = len(server.requests)
    done = json.loads((tmp_path / "small" / "other" / "pipeline.json").read_text())["done"]
    assert asked == 3 and [d["model_calls"] for d in done] == [3] and done[0]["tokens"] > 0
    assert [d["model_calls"] for d in json.loads((tmp_path / "small" / "counted" / "pipeline.json").read_text())[
        "done"]] == [0, 0]
    bigger = load_study(write(tmp_path, text.replace("episodes = 3", "episodes = 6")))
    rows = {row.pipeline: row for row in plan_pipelines([(p, bigger.grid(p.grid)) for p in bigger.pipelines],
                                                          tmp_path / "big", False, tmp_path / "small")}
    assert (rows["other"].calls, rows["other"].tokens) == (6, 2 * done[0]["tokens"])
    assert rows["counted"].calls == 0
