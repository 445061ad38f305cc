"""Repeated trials (`playground run --trials N`): derived seeds, exact resume, pass^k, flip rates, noise floor."""

from __future__ import annotations

import json
import math

import pytest

from playground.core.records import new_record
from playground.run.trials import flip_rate, noise_floor, outcomes_by_task, pass_hat_k, trial_fields
from tests.conftest import cli

NOISY = ("--env", "tiny", "--agent", "noisy", "--agent-option", "stop=0.3", "--agent-option", "invalid=0.2")


def run(capsys, out, *extra):
    return cli(capsys, "run", *NOISY, "--harness", "base", "--episodes", "4", "--out", str(out), "--quiet", *extra)


def records(out):
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_three_trials_give_three_records_per_task_with_distinct_derived_seeds(capsys, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = run(capsys, out, "--trials", "3")
    assert code == 0, err
    found = records(out)
    assert len(found) == 12
    by_task = {}
    for record in found:
        by_task.setdefault(record["task_id"], []).append(record)
    assert len(by_task) == 4
    for task, rs in by_task.items():
        assert sorted(r["trial"] for r in rs) == [1, 2, 3]
        assert len({r["seed"] for r in rs}) == 3, f"{task}: trials share a seed"
        assert len({r["key"] for r in rs}) == 3 and len({r["episode_id"] for r in rs}) == 3
        for r in rs:
            assert (out / r["trace"]).is_file()
            header = json.loads((out / r["trace"]).read_text().splitlines()[0])
            assert header["trial"] == r["trial"] and header["seed"] == r["seed"]
    summary = json.loads((out / "summary.json").read_text())
    base = summary["harnesses"]["base"]
    assert summary["tasks"] == 4 and base["episodes"] == 12 and base["trials"] == 3
    assert set(base["pass_k"]) == {"1", "2", "3"} and base["pass_k"]["1"] == pytest.approx(base["success_rate"])
    assert set(base["flip_rates"]) == set(by_task)
    assert "pass^k" in stdout and "noise" in stdout


def test_trial_one_keeps_the_seed_and_key_of_a_run_without_trials(capsys, tmp_path):
    assert run(capsys, tmp_path / "one")[0] == 0
    assert run(capsys, tmp_path / "three", "--trials", "3")[0] == 0
    single = {r["task_id"]: r for r in records(tmp_path / "one")}
    for r in records(tmp_path / "three"):
        if r["trial"] == 1:
            assert (r["seed"], r["key"], r["trace"]) == (single[r["task_id"]]["seed"], single[r["task_id"]]["key"],
                                                         single[r["task_id"]]["trace"])


def test_resume_with_trials_plays_nothing_new(capsys, tmp_path):
    out = tmp_path / "run"
    assert run(capsys, out, "--trials", "3")[0] == 0
    before = (out / "episodes.jsonl").read_bytes()
    summary = (out / "summary.json").read_bytes()
    lock = (out / "lock.json").read_bytes()
    code, _, err = run(capsys, out, "--trials", "3")
    assert code == 0, err
    assert (out / "episodes.jsonl").read_bytes() == before
    assert (out / "summary.json").read_bytes() == summary
    assert (out / "lock.json").read_bytes() == lock


def test_more_trials_later_play_only_the_new_ones(capsys, tmp_path):
    out = tmp_path / "run"
    assert run(capsys, out, "--trials", "2")[0] == 0
    first = records(out)
    assert run(capsys, out, "--trials", "3")[0] == 0
    after = records(out)
    assert after[:len(first)] == first
    assert sorted(r["trial"] for r in after[len(first):]) == [3] * 4
    assert json.loads((out / "config.json").read_text())["trials"] == 3


def hand_built():
    # task a: 2 of 3 trials won, b: all, c: none
    outcomes = {"a": [True, False, True], "b": [True, True, True], "c": [False, False, False]}
    recs = [new_record(harness="h", task_id=task, trial=i + 1, won=won, status="won" if won else "lost")
            for task, o in outcomes.items() for i, won in enumerate(o)]
    return outcomes, recs


def test_pass_hat_k_and_flip_rate_on_a_hand_built_case():
    outcomes, recs = hand_built()
    assert outcomes_by_task(list(reversed(recs))) == outcomes  # trial order, whatever the record order
    assert pass_hat_k(outcomes, 1) == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert pass_hat_k(outcomes, 2) == pytest.approx((1 / 3 + 1 + 0) / 3)   # C(2,2)/C(3,2) for a
    assert pass_hat_k(outcomes, 3) == pytest.approx(1 / 3)
    assert pass_hat_k(outcomes, 4) is None
    assert flip_rate(outcomes["a"]) == pytest.approx(2 / 3)  # 2 of its 3 pairs differ
    assert flip_rate(outcomes["b"]) == flip_rate(outcomes["c"]) == 0
    assert flip_rate([True]) is None
    fields = trial_fields(recs)
    assert fields["trials"] == 3 and fields["flipping_tasks"] == 1
    assert fields["flip_rate"] == pytest.approx(2 / 9)
    assert fields["pass_k"]["2"] == pytest.approx(4 / 9)


def test_noise_floor_is_zero_when_trials_agree_and_grows_with_flips():
    steady = {f"t{i}": [i % 2 == 0] * 4 for i in range(20)}
    assert noise_floor(steady)["noise_floor"] == 0.0
    flipping = {f"t{i}": [True, False, True, False] if i % 2 else [False, True, False, True] for i in range(20)}
    noisy = noise_floor(flipping)
    assert noisy["half_split_difference"] == 0.0 and noisy["noise_floor"] > 0.2
    # two trials: the half-split difference of a mean of 1 vs 1 is rescaled to runs of 2 trials each (1/sqrt(2))
    pairs = {f"t{i}": [i % 3 == 0, i % 2 == 0] for i in range(30)}
    diffs = [float(a) - float(b) for a, b in pairs.values()]
    assert noise_floor(pairs)["half_split_difference"] == pytest.approx(sum(diffs) / len(diffs))
    assert noise_floor({"t": [True]}) is None


def test_compare_says_whether_a_difference_exceeds_the_noise(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli(capsys, "run", *NOISY, "--harness", "base", "--harness", "sentry", "--episodes", "6",
                       "--trials", "2", "--out", str(out), "--quiet")
    assert code == 0, err
    code, stdout, err = cli(capsys, "compare", str(out), str(out), "--harness-a", "base", "--harness-b", "sentry",
                            "--resamples", "200")
    assert code == 0, err
    assert "noise floor (success, from half-split trials)" in stdout
    assert ("exceeds it" in stdout) != ("is within it" in stdout)
    assert "resampling 6 groups of 'task_id'" in stdout  # trials of a task are resampled together
    assert "warning" not in err  # one run: one lock
    code, stdout, _ = cli(capsys, "compare", str(out), str(out), "--harness-a", "base", "--harness-b", "sentry",
                          "--resamples", "200", "--json")
    noise = json.loads(stdout)["noise"]
    assert noise["noise_floor"] >= 0 and isinstance(noise["exceeds"], bool)
    assert math.isfinite(noise["noise_floor"])


def test_compare_without_trials_says_the_noise_is_unknown(capsys, tmp_path):
    out = tmp_path / "run"
    assert cli(capsys, "run", *NOISY, "--harness", "base", "--harness", "sentry", "--episodes", "3",
               "--out", str(out), "--quiet")[0] == 0
    code, stdout, _ = cli(capsys, "compare", str(out), str(out), "--harness-a", "base", "--harness-b", "sentry",
                          "--resamples", "200")
    assert code == 0 and "noise floor: unknown" in stdout and "--trials 2" in stdout


def test_zero_trials_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path / "run", "--trials", "0")
    assert code == 2 and "--trials" in err
    assert not (tmp_path / "run").exists()
