"""Finance scoring: exactly the benchmark's rules, edge cases included."""

from __future__ import annotations

import pytest

from playground.envs.finance.scoring import finer_positions, formula_correct, score_answer, split_tags


@pytest.mark.parametrize("answer, right", [
    ("5.0", True), ("5", True), ("5.00", True), (" 5 ", True), ("\t5.0\n", True), ("+5", True), ("5e0", True),
    ("$5", False), ("five", False), ("", False), ("   ", False), ("5%", False), ("5.0.", False),
    ("The answer is 5.0", False), ("5,0", False), ("nan", False), ("5.01", False), ("4.999", False),
    (",5", True), ("5,", True),
])
def test_formula_is_float_equality_after_commas_are_removed(answer, right):
    assert formula_correct(answer, "5.0") is right


def test_formula_targets_as_the_benchmark_writes_them():
    assert formula_correct("-15000000", "-15000000.0")
    assert formula_correct("8.33", "8.33") and not formula_correct("8.333", "8.33")
    assert formula_correct("0.2", "0.20") and formula_correct("1000000000", "1000000000.0")

def test_formula_thousands_separators_are_removed_as_ace_does():
    """ACE's `_formula_answer_is_correct` strips commas from both sides before `float()`."""
    assert formula_correct("1,000,000,000", "1000000000.0")
    assert formula_correct("27,432.79", "27432.79") and formula_correct("27432.79", "27,432.79")
    assert formula_correct("-15,000,000", "-15000000.0")
    assert not formula_correct("27,432.8", "27432.79")


def test_formula_unparseable_sides_fall_back_to_string_equality():
    assert not formula_correct("n/a", "5.0")
    assert formula_correct("n/a", "n/a") and formula_correct("n,/a", "n/a")  # upstream compares stripped strings


def test_formula_score_is_one_point():
    assert score_answer("formula", "2.0", "2") == score_answer("formula", "2", "2.0")
    result = score_answer("formula", "2", "2.0")
    assert (result.score, result.max_score, result.won) == (1.0, 1.0, True)
    result = score_answer("formula", "$2", "2.0")
    assert (result.score, result.max_score, result.won) == (0.0, 1.0, False)


GOLD = "Revenues,GrossProfit,Goodwill,LongTermDebt"


def test_finer_tags_are_split_stripped_and_lowercased():
    assert split_tags(" Revenues , GrossProfit,goodwill ") == ["revenues", "grossprofit", "goodwill"]
    assert finer_positions("revenues, grossprofit ,GOODWILL,LongTermDebt", GOLD) == [True] * 4


def test_finer_positions_align_and_missing_tags_count_wrong():
    assert finer_positions("Revenues,GrossProfit", GOLD) == [True, True, False, False]
    assert finer_positions("", GOLD) == [False] * 4
    # a missing tag in the middle shifts every later position: all of them are wrong
    assert finer_positions("Revenues,Goodwill,LongTermDebt", GOLD) == [True, False, False, False]
    # an empty item keeps the alignment
    assert finer_positions("Revenues,,Goodwill,LongTermDebt", GOLD) == [True, False, True, True]


def test_finer_extra_tags_beyond_the_gold_are_ignored():
    assert finer_positions(GOLD + ",Depreciation,Revenues", GOLD) == [True] * 4
    assert finer_positions("Depreciation," + GOLD, GOLD) == [False] * 4  # an extra tag in front shifts everything


def test_finer_score_is_correct_positions_out_of_gold_tags():
    result = score_answer("finer", "Revenues,GrossProfit,Depreciation", GOLD)
    assert (result.score, result.max_score, result.won) == (2.0, 4.0, False)
    assert score_answer("finer", GOLD.lower(), GOLD).won
    assert score_answer("finer", GOLD + ",Extra", GOLD).won  # the benchmark truncates extra tags


def test_unknown_family_is_named():
    with pytest.raises(ValueError, match="unknown task family 'fin'"):
        score_answer("fin", "1", "1")
