"""The held-out protocol as a study (`playbook_from`): a grid grows a playbook, a later grid's harnesses each start
from their own copy of it on disjoint tasks; Sentry's Table 4 ships as `sentry-table4-heldout`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.cli.study import find_study
from playground.core.study_file import StudyError, load_study
from playground.host.manager import get_host
from playground.plugins.playbook.store import Playbook
from playground.run.config import episode_seed
from playground.run.rundir import load_records
from playground.run.study import run_study, study_table
from tests.conftest import cli

STRESSED = {"invalid": 0.15, "repeat": 0.15, "stall": 0.15, "stop": 0.08, "drift": 0.08}
CONDITIONS = ["sentry", "sentry-retrieval-off", "sentry-frozen", "sentry-frozen-persistent"]


def study_file(tmp_path: Path, episodes: int = 6, init_split: str = "train", env: str = "tiny",
               extra: str = "") -> Path:
    """Sentry's held-out study on `env` with the stressed `noisy` instrument (so the init grid stores lessons)."""
    options = ", ".join(f"{key} = {value}" for key, value in STRESSED.items())
    grid = f'env = "{env}"\nepisodes = {episodes}\nmax_steps = 30\nagent = "noisy"\nagent_options = {{ {options} }}\n'
    path = tmp_path / "heldout.toml"
    path.write_text(f'name = "heldout"\ntitle = "held-out"\n\n[[grids]]\nname = "init"\nsplit = "{init_split}"\n'
                    f'{grid}harnesses = ["sentry"]\n\n[[grids]]\nname = "eval"\nsplit = "test"\n{grid}'
                    f'harnesses = {json.dumps(CONDITIONS)}\nplaybook_from = "init/sentry"\n{extra}')
    return path


def lessons(path: Path | str) -> list[tuple]:
    with Playbook(path, read_only=True) as playbook:
        return [(lesson.id, lesson.failure_type, lesson.labels, lesson.trigger, lesson.principle)
                for lesson in playbook.all()]


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """A held-out study on tiny with six tasks per grid."""
    tmp_path = tmp_path_factory.mktemp("heldout")
    study = load_study(study_file(tmp_path))
    out = tmp_path / "out"
    run_study(get_host(), study, out)
    return out, study


def test_each_condition_gets_its_own_copy_frozen_ones_unchanged_evolving_grows(tiny_study):
    out, _ = tiny_study
    init = lessons(out / "init" / "playbooks" / "sentry.sqlite")
    assert init, "the init grid should have stored lessons (stressed noisy rates)"
    copies = {name: out / "eval" / "playbooks" / f"{name}.sqlite" for name in CONDITIONS}
    for name in ("sentry-frozen", "sentry-frozen-persistent"):
        assert lessons(copies[name]) == init
    evolving = lessons(copies["sentry"])
    assert len(evolving) > len(init) and evolving[:len(init)] == init
    # each episode wrote (and read) only its condition's copy
    records = load_records(out / "eval")
    frozen_shown = 0
    for record in records:
        trace = [json.loads(line) for line in (out / "eval" / str(record.trace)).read_text().splitlines()]
        written = {Path(e["lesson"]["playbook"]).name for e in trace if e["type"] == "verification" and e["lesson"]}
        assert written <= {f"{record.harness}.sqlite"}
        shown = [i for e in trace if e["type"] == "intervention" for i in e["details"].get("lessons", [])]
        if record.harness == "sentry-retrieval-off":
            assert not shown
        elif record.harness != "sentry":
            assert set(shown) <= {lesson[0] for lesson in init}
            frozen_shown += len(shown) if record.harness == "sentry-frozen" else 0
    assert frozen_shown > 0, "the frozen condition should retrieve lessons of the init playbook"


def test_every_condition_plays_each_task_with_the_same_seed_and_the_table_pairs_them(tiny_study):
    out, study = tiny_study
    init_tasks = {r.task_id for r in load_records(out / "init")}
    records = load_records(out / "eval")
    assert len(records) == 4 * 6 and not init_tasks & {r.task_id for r in records}
    for task in {r.task_id for r in records}:
        seeds = {r.harness: r.seed for r in records if r.task_id == task}
        assert set(seeds) == set(CONDITIONS) and set(seeds.values()) == {episode_seed(0, task)}
    cells = [cell for cell in study_table(study, out) if cell.grid == "eval"]
    assert [cell.harness for cell in cells] == CONDITIONS
    assert [cell.versus for cell in cells] == [None, "sentry", "sentry", "sentry"]  # paired with evolving
    assert all(cell.episodes == 6 and cell.reward is not None for cell in cells)


def test_overlapping_tasks_are_refused_before_the_grid_is_written(tmp_path):
    study = load_study(study_file(tmp_path, episodes=3, init_split="test"))
    with pytest.raises(StudyError, match=r"share 3 task\(s\).*tiny-20000.*disjoint"):
        run_study(get_host(), study, tmp_path / "out")
    assert not (tmp_path / "out" / "eval").exists()


def test_a_shared_playbook_is_refused(tmp_path):
    study = load_study(study_file(tmp_path, episodes=2))
    with pytest.raises(StudyError, match="shared --playbook would mix"):
        run_study(get_host(), study, tmp_path / "out", playbook=str(tmp_path / "one.sqlite"))


def test_the_eval_grid_alone_waits_for_its_source(tmp_path):
    study = load_study(study_file(tmp_path, episodes=2))
    with pytest.raises(StudyError, match="run grid 'init' first"):
        run_study(get_host(), study, tmp_path / "out", grids=["eval"])


def test_playbook_from_must_name_an_earlier_grids_harness(tmp_path):
    path = study_file(tmp_path, episodes=2)
    path.write_text(path.read_text().replace('playbook_from = "init/sentry"', 'playbook_from = "init/base"'))
    with pytest.raises(StudyError, match="playbook_from 'init/base' names no harness of an earlier grid"):
        load_study(path)


def test_a_rerun_plays_nothing_new_and_a_cut_short_grid_resumes_with_the_copies_it_had(capsys, tmp_path):
    path, out = study_file(tmp_path, episodes=3), tmp_path / "out"
    code, _, err = cli(capsys, "study", "run", str(path), "--out", str(out))
    assert code == 0, err
    files = sorted(p for p in out.rglob("*") if p.is_file() and not p.name.endswith("-shm"))
    before = {p: p.read_bytes() for p in files if p.name != "study.json"}
    code, stdout, err = cli(capsys, "study", "run", str(path), "--out", str(out))
    assert code == 0, err
    assert [str(p.relative_to(out)) for p, data in before.items() if p.read_bytes() != data] == []
    assert "sentry-frozen-persistent" in stdout  # the table
    episodes = out / "eval" / "episodes.jsonl"
    lines = episodes.read_text().splitlines(keepends=True)
    dropped = [json.loads(line)["key"] for line in lines[-2:]]
    episodes.write_text("".join(lines[:-2]))
    evolving = out / "eval" / "playbooks" / "sentry.sqlite"
    with Playbook(evolving) as playbook:  # a mark the copy would lose if it were made again
        playbook.add("progress", ["planning_stall"], "MARK", "a lesson only this copy has")
    code, _, err = cli(capsys, "study", "run", str(path), "--out", str(out))
    assert code == 0, err
    records = load_records(out / "eval")
    assert len(records) == 12 and [r.key for r in records[-2:]] == dropped
    assert any(lesson[3] == "MARK" for lesson in lessons(evolving))


def test_sentry_table4_ships_as_a_study_with_the_papers_rewards(capsys):
    code, stdout, err = cli(capsys, "study", "list")
    assert code == 0, err
    assert "sentry-table4-heldout" in stdout
    study, _ = find_study(get_host(), "sentry-table4-heldout")
    assert [grid.name for grid in study.grids] == ["init", "eval"]
    assert study.grids[1].playbook_from == "init/sentry" and study.grids[1].env == "webshop:generated"
    assert study.paper_number("reward", "eval", "sentry") == 0.495
    assert study.paper_number("reward", "eval", "sentry-retrieval-off") == 0.251
