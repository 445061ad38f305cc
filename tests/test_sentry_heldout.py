"""`playground sentry heldout`: init playbook on one split, four conditions on a disjoint one (Table 4's shape)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.plugins.playbook.store import Playbook
from playground.plugins.sentry.heldout import CONDITIONS
from playground.run.rundir import load_records
from playground.run.config import episode_seed
from tests.conftest import cli

STRESSED = ("invalid=0.15", "repeat=0.15", "stall=0.15", "stop=0.08", "drift=0.08")
LABELS = [c.label for c in CONDITIONS]


def heldout(capsys, out: Path, *extra: str, env: str = "tiny", episodes: int = 5) -> tuple[int, str, str]:
    options = [arg for rate in STRESSED for arg in ("--agent-option", rate)]
    return cli(capsys, "sentry", "heldout", "--env", env, "--agent", "noisy", "--episodes", str(episodes),
               "--max-steps", "30", "--out", str(out), "--quiet", *options, *extra)


def lessons(path: Path | str) -> list[tuple]:
    with Playbook(path, read_only=True) as playbook:
        return [(lesson.id, lesson.failure_type, lesson.labels, lesson.trigger, lesson.principle)
                for lesson in playbook.all()]


def table_rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if any(line.startswith(label + " ") for label in LABELS)]


@pytest.fixture
def tiny_run(capsys, tmp_path):
    """A held-out run on tiny with six tasks per phase."""
    out = tmp_path / "tiny"
    code, stdout, stderr = heldout(capsys, out, episodes=6)
    assert code == 0, stderr
    return out, stdout, json.loads((out / "heldout.json").read_text())


def test_the_table_has_one_row_per_condition_and_heldout_json_the_same(tiny_run):
    out, stdout, result = tiny_run
    rows = table_rows(stdout)
    assert len(rows) == 4 and [row.split("  ")[0].strip() for row in rows] == LABELS
    assert "Δ success vs evolving" in stdout and "(reference)" in rows[-1]
    assert [row["harness"] for row in result["conditions"]] == [c.harness for c in CONDITIONS]
    assert result["init"]["split"] == "train" and result["eval"]["split"] == "test"
    assert not set(result["init"]["tasks"]) & set(result["eval"]["tasks"])
    for row in result["conditions"]:
        assert row["episodes"] == 6 and row["errors"] == 0 and row["mean_score"] is not None  # tiny reports a score
        assert (row["vs_reference"] is None) == (row["condition"] == "evolving")
        if row["vs_reference"]:
            assert {"success", "score"} <= set(row["vs_reference"]) and row["vs_reference"]["pairs"] == 6


def test_each_condition_gets_its_own_copy_frozen_ones_unchanged_evolving_grows(tiny_run):
    out, _, result = tiny_run
    init = lessons(out / "init" / "playbooks" / "sentry.sqlite")
    assert init, "the init phase should have stored lessons (stressed noisy rates)"
    rows = {row["condition"]: row for row in result["conditions"]}
    paths = {Path(row["playbook"]).resolve() for row in rows.values()}
    assert len(paths) == 4 and all(p.parent == (out / "eval" / "playbooks").resolve() for p in paths)
    for name in ("frozen", "frozen-persistent"):
        assert lessons(rows[name]["playbook"]) == init
        assert rows[name]["lessons_start"] == rows[name]["lessons_end"] == len(init)
    evolving = lessons(rows["evolving"]["playbook"])
    assert len(evolving) > len(init) and evolving[:len(init)] == init
    assert rows["evolving"]["lessons_end"] == len(evolving)
    # each episode wrote (and read) only its condition's copy
    records = load_records(out / "eval")
    for record in records:
        trace = [json.loads(line) for line in (out / "eval" / str(record.trace)).read_text().splitlines()]
        written = {Path(e["lesson"]["playbook"]).name for e in trace if e["type"] == "verification" and e["lesson"]}
        assert written <= {f"{record.harness}.sqlite"}
        shown = [i for e in trace if e["type"] == "intervention" for i in e["details"].get("lessons", [])]
        if record.harness == "sentry-retrieval-off":
            assert not shown
        elif record.harness != "sentry":
            assert set(shown) <= {lesson[0] for lesson in init}
    frozen_shown = sum(len(e["details"].get("lessons", [])) for r in records if r.harness == "sentry-frozen"
                       for e in map(json.loads, (out / "eval" / str(r.trace)).read_text().splitlines())
                       if e["type"] == "intervention")
    assert frozen_shown > 0, "the frozen condition should retrieve lessons of the init playbook"


def test_every_condition_plays_each_task_with_the_same_seed(tiny_run):
    out, _, result = tiny_run
    records = load_records(out / "eval")
    assert len(records) == 4 * 6
    for task in result["eval"]["tasks"]:
        seeds = {r.harness: r.seed for r in records if r.task_id == task}
        assert set(seeds) == {c.harness for c in CONDITIONS}
        assert set(seeds.values()) == {episode_seed(0, task)} == {result["seeds"][task]}
    headers = [json.loads((out / "eval" / str(r.trace)).read_text().splitlines()[0]) for r in records]
    assert {(h["task_id"], h["seed"]) for h in headers} == {(t, episode_seed(0, t)) for t in result["eval"]["tasks"]}


def test_overlapping_splits_are_refused_before_anything_is_written(capsys, tmp_path):
    out = tmp_path / "h"
    code, _, err = heldout(capsys, out, "--init-split", "test")
    assert code == 2 and "share 5 task(s)" in err and "tiny-20000" in err and "disjoint" in err
    assert not out.exists()


def test_a_param_that_would_erase_the_conditions_is_refused(capsys, tmp_path):
    code, _, err = heldout(capsys, tmp_path / "h", "--param", "update_playbook=true")
    assert code == 2 and "update_playbook" in err and "conditions apart" in err
    assert not (tmp_path / "h").exists()


def test_a_rerun_of_a_finished_run_plays_nothing_new(capsys, tmp_path):
    out = tmp_path / "h"
    assert heldout(capsys, out, episodes=3)[0] == 0
    files = sorted(p for p in out.rglob("*") if p.is_file() and not p.name.endswith("-shm"))
    before = {p: p.read_bytes() for p in files}
    code, stdout, err = heldout(capsys, out, episodes=3)
    assert code == 0, err
    assert sorted(p for p in out.rglob("*") if p.is_file() and not p.name.endswith("-shm")) == files
    changed = [str(p.relative_to(out)) for p, data in before.items() if p.read_bytes() != data]
    assert changed == [], "a rerun of a finished held-out run changed files"
    assert len(table_rows(stdout)) == 4


def test_a_run_cut_short_in_the_eval_phase_resumes_with_the_copies_it_had(capsys, tmp_path):
    out = tmp_path / "h"
    assert heldout(capsys, out, episodes=3)[0] == 0
    episodes = out / "eval" / "episodes.jsonl"
    lines = episodes.read_text().splitlines(keepends=True)
    kept = lines[:-2]
    dropped = [json.loads(line)["key"] for line in lines[-2:]]
    episodes.write_text("".join(kept))
    evolving = out / "eval" / "playbooks" / "sentry.sqlite"
    with Playbook(evolving) as playbook:  # a mark the copy would lose if it were made again
        playbook.add("progress", ["planning_stall"], "MARK", "a lesson only this copy has")
    code, _, err = heldout(capsys, out, episodes=3)
    assert code == 0, err
    records = load_records(out / "eval")
    assert len(records) == 12 and [r.key for r in records[len(kept):]] == dropped
    assert any(lesson[3] == "MARK" for lesson in lessons(evolving))


@pytest.mark.parametrize("reference", ["retrieval-off"])
def test_the_reference_condition_can_be_chosen(capsys, tmp_path, reference):
    code, stdout, err = heldout(capsys, tmp_path / "h", "--reference", reference, episodes=2)
    assert code == 0, err
    assert f"Δ success vs {reference}" in stdout
    result = json.loads((tmp_path / "h" / "heldout.json").read_text())
    assert result["reference"] == reference
    assert [row["vs_reference"] is None for row in result["conditions"]] == [True, False, False, False]


def test_webshop_generated_reports_the_mean_reward(capsys, tmp_path):
    code, stdout, err = heldout(capsys, tmp_path / "h", env="webshop", episodes=3)
    assert code == 0, err
    assert len(table_rows(stdout)) == 4 and "Δ score vs evolving" in stdout
    result = json.loads((tmp_path / "h" / "heldout.json").read_text())
    assert result["env"] == "webshop:generated"
    assert result["init"]["tasks"] == ["generated-0", "generated-1", "generated-2"]
    assert result["eval"]["tasks"] == ["generated-20000", "generated-20001", "generated-20002"]
    assert all(row["mean_score"] is not None and row["episodes"] == 3 for row in result["conditions"])


@pytest.mark.slow
def test_webshop_generated_at_twenty_tasks(capsys, tmp_path):
    out = tmp_path / "h"
    code, stdout, err = heldout(capsys, out, env="webshop", episodes=20)
    assert code == 0, err
    assert len(table_rows(stdout)) == 4
    result = json.loads((out / "heldout.json").read_text())
    rows = {row["condition"]: row for row in result["conditions"]}
    assert all(row["episodes"] == 20 and row["errors"] == 0 for row in rows.values())
    init = lessons(out / "init" / "playbooks" / "sentry.sqlite")
    assert init and all(lessons(rows[name]["playbook"]) == init for name in ("frozen", "frozen-persistent"))
    assert rows["evolving"]["lessons_end"] > len(init)
    records = load_records(out / "eval")
    assert len({(r.task_id, r.seed) for r in records}) == 20
