"""Issue 56, item 9: a run grows with `--episodes` (the new tasks are played, the finished ones kept), and a run
directory's refusals name a few ids and a count, never the whole task list."""

from __future__ import annotations

import json

import pytest

from playground.run.rundir import RunDir, RunDirError
from tests.conftest import cli

RUN = ["run", "--env", "tiny", "--agent", "noisy", "--harness", "base", "--quiet"]


def _records(out):
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_episodes_grows_a_run_keeping_the_finished_episodes(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli(capsys, *RUN, "--harness", "guard-only", "--episodes", "3", "--out", str(out))
    assert code == 0, err
    before = _records(out)
    traces = {r["key"]: (out / r["trace"]).read_bytes() for r in before}
    code, _, err = cli(capsys, *RUN, "--harness", "guard-only", "--episodes", "5", "--out", str(out))
    assert code == 0, err
    after = _records(out)
    assert after[:6] == before  # the finished episodes are kept, not played again
    assert {r["key"]: (out / r["trace"]).read_bytes() for r in before} == traces
    assert sorted(r["key"] for r in after[6:]) == sorted(f"{h}/tiny-2000{i}" for h in ("base", "guard-only")
                                                         for i in (3, 4))
    assert len({r["episode_id"].split(":")[0] for r in after}) == 1  # one run id
    config = json.loads((out / "config.json").read_text())
    assert config["tasks"] == [f"tiny-2000{i}" for i in range(5)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 5 and summary["harnesses"]["base"]["episodes"] == 5
    assert json.loads((out / "lock.json").read_text())["tasks"]["count"] == 5

    # the earlier, shorter command still resumes the grown run (as fewer --trials or harnesses do): nothing is played
    code, _, err = cli(capsys, *RUN, "--episodes", "3", "--out", str(out))
    assert code == 0, err
    assert _records(out) == after
    assert json.loads((out / "config.json").read_text())["tasks"] == config["tasks"]


@pytest.mark.parametrize("change, key", [(["--seed", "7"], "seed"), (["--split", "dev"], "split"),
                                         (["--max-steps", "9"], "max_steps"),
                                         (["--agent-option", "repeat=0.5"], "agent_options")])
def test_growing_with_other_settings_is_still_refused(capsys, tmp_path, change, key):
    out = tmp_path / "run"
    code, _, err = cli(capsys, *RUN, "--episodes", "2", "--out", str(out))
    assert code == 0, err
    before = (out / "episodes.jsonl").read_bytes()
    code, _, err = cli(capsys, *RUN, "--episodes", "4", "--out", str(out), *change)
    assert code == 2 and "use another --out" in err and "Traceback" not in err, err
    assert f"a different {key} " in err, err  # the setting that changed, not the grown task list
    assert (out / "episodes.jsonl").read_bytes() == before


def test_a_task_list_that_does_not_begin_with_the_recorded_one_is_refused_in_a_few_ids(tmp_path):
    base = {"env": "tiny", "task_set": "default", "split": "test", "agent": "noisy", "harnesses": ["base"]}
    tasks = [f"task-{i:05d}-{'x' * 40}" for i in range(5000)]
    RunDir(tmp_path, {**base, "tasks": tasks}).close()
    for other in (tasks[::-1], tasks[1:], [*tasks[:10], "other", *tasks[11:]]):
        with pytest.raises(RunDirError) as caught:
            RunDir(tmp_path, {**base, "tasks": other})
        message = str(caught.value)
        assert len(message) < 1000, message
        assert sum(task in message for task in tasks) <= 6 and "use another --out" in message
    message = str(caught.value)
    assert "1 differ" in message and "task-00010" in message and "'other'" in message
    assert json.loads((tmp_path / "config.json").read_text())["tasks"] == tasks  # refused: the config is kept


@pytest.mark.parametrize("key", ["params", "agent_options", "split"])
def test_an_identity_refusal_never_prints_a_whole_value(tmp_path, key):
    base = {"env": "tiny", "task_set": "default", "split": "test", "agent": "noisy", "harnesses": ["base"],
            "tasks": ["a"], "params": {}, "agent_options": {}}
    big = {f"name-{i}": "v" * 50 for i in range(2000)} if key != "split" else "s" * 100_000
    RunDir(tmp_path, base).close()
    with pytest.raises(RunDirError, match=f"different {key}") as caught:
        RunDir(tmp_path, {**base, key: big})
    assert len(str(caught.value)) < 600, str(caught.value)


def test_growing_says_so_and_warns_of_no_lock_difference_in_tasks(capsys, tmp_path):
    out = tmp_path / "run"
    run = ["run", "--env", "tiny", "--agent", "noisy", "--harness", "base", "--out", str(out)]
    code, _, err = cli(capsys, *run, "--episodes", "2")
    assert code == 0, err
    code, _, err = cli(capsys, *run, "--episodes", "4")
    assert code == 0, err
    assert "the run grows from 2 to 4 tasks" in err and "tasks.count" not in err and "tasks.sha256" not in err, err
