"""format-guard: format-precision detection with evidence, the exact-format re-ask, and its verifier."""

from __future__ import annotations

import json
import random

import pytest

from playground.envs.finance import data
from playground.envs.finance.agents import MODE_LABELS, NUMBER_MODES, TAG_MODES, FormatNoisyAgent, break_answer
from playground.envs.finance.env import FinanceEnv
from playground.envs.finance.format_check import LABELS, check, expected_format
from playground.envs.finance.guard import FormatGuard
from playground.host.manager import default_labels
from playground.testing import ScriptedAgent, play

FORMULA = data.get_task("formula-20000")
FINER = data.get_task("finer-20000")
A, B, C, D = FINER.target.split(",")


def labels(context: str, answer: str) -> set[str]:
    return {p.label for p in check(context, answer)}


def test_labels_are_the_taxonomy_ones():
    assert set(LABELS) == default_labels().labels_of("format_precision")
    assert {label.plugin for label in default_labels() if label.failure_type == "format_precision"} == {"finance"}


@pytest.mark.parametrize("answer, expected", [
    ("5.0", set()), ("5", set()), (" -12.5 ", set()), ("1e3", set()),
    ("", {"unparseable_number"}), ("five", {"unparseable_number"}), ("$5", {"unparseable_number"}),
    ("5%", {"unparseable_number"}), ("1,000.50", set()), ("nan", {"unparseable_number"}),
    ("The answer is 5.0.", {"prose_around_answer"}), ("Answer: 5.0", {"prose_around_answer"}),
    ("**5.0**", {"prose_around_answer"}), ('"5.0"', {"prose_around_answer"}), ("(5.0)", {"unparseable_number"}),
    ("**1,000**", {"prose_around_answer"}), ("$1,000", {"unparseable_number"}),
    ("5.0, 6.0", {"extra_fields"}), ("5.0\n600.0", {"extra_fields"}),
    ("The result is 5.0 or 6.0", {"extra_fields", "prose_around_answer"}),
])
def test_number_answers(answer, expected):
    assert labels(FORMULA.context, answer) == expected


@pytest.mark.parametrize("answer, expected", [
    (f"{A},{B},{C},{D}", set()), (f" {A.lower()} , {B},{C} ,{D}", set()),
    ("", {"wrong_tag_count"}), (f"{A},{B},{C}", {"wrong_tag_count"}), (f"{A},{B},{C},{D},{D}", {"wrong_tag_count"}),
    (f"{A},{B},{C},NotARealTag", {"unknown_tag"}), (f"{A},,{C},{D}", {"unknown_tag"}),
    (f"The tags are: {A},{B},{C},{D}", {"prose_around_answer"}), (f"{A},{B},{C},{D}.", {"prose_around_answer"}),
    (f"1. {A},2. {B},3. {C},4. {D}", {"extra_fields"}),
    (f"{A}\n{B}\n{C}\n{D}", {"wrong_tag_count", "extra_fields"}),
    (f"I am not sure,{B},{C}", {"wrong_tag_count", "prose_around_answer"}),
])
def test_tag_answers(answer, expected):
    assert labels(FINER.context, answer) == expected


def test_evidence_quotes_the_answer():
    (problem,) = check(FINER.context, f"{A},{B},{C},Bogus")
    assert "item 4" in problem.evidence and "'Bogus'" in problem.evidence
    (problem,) = check(FORMULA.context, "$5")
    assert "'$5'" in problem.evidence


def test_noisy_breaks_are_detected_with_exactly_their_label():
    rng = random.Random(0)
    for seed in range(20_000, 20_060):
        for family, modes in (("formula", NUMBER_MODES), ("finer", TAG_MODES)):
            task = data.get_task(f"{family}-{seed}")
            fmt = expected_format(task.context)
            assert check(task.context, task.target) == []
            for mode in modes:
                broken = break_answer(fmt, task.target, mode, rng)
                assert labels(task.context, broken) == {MODE_LABELS[mode]}, (mode, broken)


def test_guard_reasks_with_the_exact_format_and_verifies_the_fix():
    agent = ScriptedAgent(["The answer is probably 5"])
    result = play(FinanceEnv("formula", expert=True), agent, plugins=[FormatGuard({})], task="formula-20000")
    (detection,) = result.of("detection")
    assert detection["failure_type"] == "format_precision" and detection["labels"] == ["prose_around_answer"]
    assert "'The answer is probably 5'" in detection["evidence"]
    message = agent.views[1].message
    assert message.kind == "format_repair" and message.labels == ("prose_around_answer",)
    assert "one plain number" in message.text and "no currency symbols" in message.text
    (verdict,) = result.of("verification")
    assert verdict["verdict"] == "resolved" and result.result.won


def test_guard_gives_up_after_the_reask_budget_and_says_unresolved():
    agent = ScriptedAgent(["$5", "$5", "$5", "$5"])
    result = play(FinanceEnv("formula", expert=True), agent, plugins=[FormatGuard({"max_reasks_per_step": 2})],
                  task="formula-20000")
    assert result.count("intervention") == 2 and result.count("proposal") == 3
    (verdict,) = result.of("verification")
    assert verdict["verdict"] == "unresolved" and "'$5'" in verdict["evidence"]
    assert result.of("step")[0]["action"] == "$5" and not result.result.won


def test_guard_never_reads_the_gold_answer(tmp_path, monkeypatch):
    """The same question with different golds gets the same detections, re-asks and verdicts."""
    for gold in ("5.0", "7.25", "not even a number"):
        (tmp_path / f"formula_{len(gold)}.jsonl").write_text(json.dumps({"context": FORMULA.context, "target": gold}) + "\n")
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    seen = []
    for task in ("formula_3:1", "formula_4:1", "formula_17:1"):
        result = play(FinanceEnv("formula-data"), ScriptedAgent(["Answer: 5", "$5", "5.0"]), plugins=[FormatGuard({})],
                      task=task)
        seen.append([(kind, {k: v for k, v in event.items() if k != "seconds"}) for kind, event in result.events
                     if kind in ("detection", "intervention", "verification")])
    assert seen[0] == seen[1] == seen[2] and len(seen[0]) == 5
    wrong_value = play(FinanceEnv("formula", expert=True), ScriptedAgent(["123456.78"]), plugins=[FormatGuard({})],
                       task="formula-20000")
    assert wrong_value.count("detection") == 0 and not wrong_value.result.won  # well-formed but wrong: not its business


def test_format_noisy_recovers_when_reasked_and_is_deterministic():
    options = {"prose": 1.0, "recover": 1.0}
    result = play(FinanceEnv("finer", expert=True), FormatNoisyAgent(**options), plugins=[FormatGuard({})],
                  task="finer-20002")
    assert result.count("intervention") == 1 and result.result.won
    actions = [[e["action"] for e in play(FinanceEnv("formula", expert=True), FormatNoisyAgent(prose=0.5),
                                          task=f"formula-{s}").of("proposal")] for s in range(20_000, 20_020)]
    again = [[e["action"] for e in play(FinanceEnv("formula", expert=True), FormatNoisyAgent(prose=0.5),
                                        task=f"formula-{s}").of("proposal")] for s in range(20_000, 20_020)]
    assert actions == again and any(labels(FORMULA.context, a[0]) for a in actions)


def test_format_noisy_rejects_bad_options():
    with pytest.raises(ValueError, match="'prose' must be in"):
        FormatNoisyAgent(prose=1.5)
    with pytest.raises(ValueError, match="has no option 'typo'"):
        FormatNoisyAgent(typo=0.1)


def test_format_noisy_without_reask_keeps_its_broken_answer():
    agent = FormatNoisyAgent(unparseable=1.0, prose=0.0, extra=0.0)
    result = play(FinanceEnv("formula", expert=True), agent, task="formula-20000")
    assert labels(FORMULA.context, result.of("step")[0]["action"]) == {"unparseable_number"}
    assert not result.result.won
