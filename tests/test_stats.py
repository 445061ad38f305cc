"""Paired comparison of two runs: McNemar, Holm, bootstrap and sign-flip tests against hand values."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from playground.core.records import new_record
from playground.run.stats import (
    DEFAULT_METRICS,
    ComparisonError,
    Metric,
    bootstrap_ci,
    compare,
    format_comparison,
    holm,
    mcnemar_exact,
    sign_flip_p,
    split_by_harness,
)


def record(task, harness, won, steps=10, invalid=0, prompt=100, completion=20, **extra):
    return new_record(task_id=task, harness=harness, status="won" if won else "lost", won=won, steps=steps,
                      invalid_actions=invalid, prompt_tokens=prompt, completion_tokens=completion, **extra)


@pytest.mark.parametrize(("b", "c", "p"), [
    (8, 2, 0.109375),      # 2 * (1 + 10 + 45) / 1024
    (2, 8, 0.109375),
    (0, 0, 1.0),
    (5, 5, 1.0),           # the two-sided tail exceeds 1 and is capped
    (0, 5, 0.0625),        # 2 / 32
    (1, 6, 0.125),         # 2 * (1 + 7) / 128
])
def test_mcnemar_exact_matches_hand_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_for_many_discordant_pairs_matches_exact_arithmetic():
    b, c = 700, 800
    n = b + c
    exact = float(2 * Fraction(sum(math.comb(n, i) for i in range(b + 1)), 2**n))
    assert mcnemar_exact(b, c) == pytest.approx(exact, rel=1e-9)


def test_holm_on_a_hand_example():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, 2*0.03, max(0.06, 1*0.04)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.6, 0.01, 0.02]) == pytest.approx([1.0, 1.0, 0.04, 0.06])
    assert holm([]) == []


def test_sign_flip_is_exact_for_few_units():
    # 8 sign patterns of (1, 1, 1); |sum| >= 3 only for all + and all -
    assert sign_flip_p([1, 1, 1]) == 0.25
    assert sign_flip_p([0, 0, 0]) == 1.0
    assert sign_flip_p([2, -2]) == 1.0
    # zero differences carry no sign: same as (1, 1, 1)
    assert sign_flip_p([1, 0, 1, 0, 1]) == 0.25
    # grouped: two groups with sums 3 and 2 -> 4 patterns, |sum| >= 5 for 2 of them
    assert sign_flip_p([1, 1, 1, 1, 1], groups=["g", "g", "g", "h", "h"]) == 0.5


def test_sign_flip_monte_carlo_detects_a_shift_and_is_seeded():
    rng = np.random.default_rng(7)
    shifted = rng.normal(0.5, 1.0, 200)
    p = sign_flip_p(shifted, resamples=2000, seed=1)
    assert p < 0.01
    assert p == sign_flip_p(shifted, resamples=2000, seed=1)
    null = rng.normal(0.0, 1.0, 200)
    assert sign_flip_p(null, resamples=2000, seed=1) > 0.01


def test_bootstrap_ci_contains_the_true_difference_and_is_reproducible():
    rng = np.random.default_rng(0)
    diffs = rng.normal(1.5, 2.0, 400)
    low, high = bootstrap_ci(diffs, seed=3)
    assert low < 1.5 < high
    assert high - low < 1.0
    assert bootstrap_ci(diffs, seed=3) == (low, high)
    assert bootstrap_ci(diffs, seed=4) != (low, high)


def test_cluster_bootstrap_resamples_whole_groups():
    rng = np.random.default_rng(1)
    diffs = rng.normal(0.0, 1.0, 50)
    # one group: every resample is the whole sample, so the interval collapses to the mean
    low, high = bootstrap_ci(diffs, groups=["all"] * 50)
    assert low == pytest.approx(diffs.mean()) and high == pytest.approx(diffs.mean())
    assert np.subtract(*bootstrap_ci(diffs)[::-1]) > 0.2
    # groups of one task resample exactly like tasks
    assert bootstrap_ci(diffs, groups=list(range(50)), seed=5) == bootstrap_ci(diffs, seed=5)
    # strongly clustered differences: the clustered interval is wider than the naive one
    effects = np.repeat(rng.normal(0.0, 1.0, 10), 20) + rng.normal(0.0, 0.1, 200)
    groups = np.repeat(np.arange(10), 20).tolist()
    naive, clustered = bootstrap_ci(effects), bootstrap_ci(effects, groups=groups)
    assert clustered[1] - clustered[0] > 2 * (naive[1] - naive[0])


def two_runs():
    a = [record(f"t{i}", "base", won=i < 4, steps=20, invalid=2, prompt=100) for i in range(12)]
    b = [record(f"t{i}", "sentry", won=i < 10 or i == 11, steps=15, invalid=1, prompt=150) for i in range(11)]
    b.append(record("extra", "sentry", won=True))
    return a, b


def test_compare_pairs_by_task_and_reports_what_was_dropped():
    a, b = two_runs()
    result = compare(a, b, seed=0, resamples=2000)
    assert (result.label_a, result.label_b) == ("base", "sentry")
    assert (result.n_pairs, result.only_a, result.only_b) == (11, 1, 1)
    success = result.metric("success")
    # tasks t0..t10: A wins t0..t3, B wins t0..t9
    assert success.discordant == (0, 6)
    assert (success.mean_a, success.mean_b) == pytest.approx((4 / 11, 10 / 11))
    assert success.diff == pytest.approx(6 / 11)
    assert success.p_value == pytest.approx(2 / 64) and success.test == "McNemar exact"
    steps = result.metric("steps")
    assert (steps.mean_a, steps.mean_b, steps.diff) == (20.0, 15.0, -5.0)
    assert steps.ci_low == steps.ci_high == -5.0
    assert steps.p_value == pytest.approx(1 / 2**10)   # exact: 11 units, only the two constant patterns
    tokens = result.metric("tokens")
    assert (tokens.mean_a, tokens.mean_b, tokens.diff) == (120.0, 170.0, 50.0)
    assert [m.p_holm for m in result.metrics] == pytest.approx(holm([m.p_value for m in result.metrics]))
    assert result.to_dict()["metrics"][0]["name"] == "success"


def test_compare_clusters_by_the_group_key():
    a = [record(f"t{i}", "base", won=False, steps=10, group=f"g{i % 3}") for i in range(9)]
    b = [record(f"t{i}", "sentry", won=i % 3 == 0, steps=10 - i % 3, group=f"g{i % 3}") for i in range(9)]
    result = compare(a, b, group_key="group", seed=0, resamples=1000)
    assert result.n_groups == 3 and result.group_key == "group"
    steps = result.metric("steps")
    assert steps.test == "sign-flip by group"
    assert steps.p_value == 0.5          # group sums 0, -3, -6: 2 non-zero units, 2 of 4 patterns
    assert compare(a, b, seed=0, resamples=1000).metric("steps").p_value == pytest.approx(2 / 2**6)


def test_compare_is_reproducible_by_seed():
    a, b = two_runs()
    assert compare(a, b, seed=11, resamples=500) == compare(a, b, seed=11, resamples=500)


def test_format_comparison_is_a_table_naming_both_runs():
    a, b = two_runs()
    text = format_comparison(compare(a, b, resamples=500))
    lines = text.splitlines()
    assert "A = base, B = sentry: 11 paired tasks (dropped: 1 only in A, 1 only in B)" in lines[0]
    assert "500 resamples" in lines[1] and "Holm" in lines[1]
    assert lines[2].split()[:4] == ["metric", "A", "B", "B-A"]
    assert lines[3].startswith("success") and "McNemar exact (b=0, c=6)" in lines[3]
    assert [line.split()[0] for line in lines[3:]] == ["success", "steps", "invalid_actions", "tokens"]


def test_split_by_harness_separates_one_run_into_two():
    a, b = two_runs()
    runs = split_by_harness(a + b)
    assert list(runs) == ["base", "sentry"] and len(runs["sentry"]) == 12


RATIO = Metric("ratio", ("score_ratio",))  # a field records carry only where a plugin added it


def _with(records, **update):
    return [r.model_copy(update=update) for r in records]


@pytest.mark.parametrize(("mutate", "metrics", "match"), [
    (lambda a, b: (a, b + [b[0]]), DEFAULT_METRICS, "run sentry: task 't0' appears more than once"),
    (lambda a, b: (a, _with(b, score_ratio=0.5)), (RATIO,), "run base: task 't0' has no 'score_ratio' field"),
    (lambda a, b: (_with(a, score_ratio="many"), _with(b, score_ratio=0.5)), (RATIO,), "non-numeric 'score_ratio'"),
    (lambda a, b: (a, [record("zzz", "sentry", True)]), DEFAULT_METRICS, "no task in common"),
])
def test_records_that_cannot_be_compared_are_named(mutate, metrics, match):
    a, b = mutate(*two_runs())
    with pytest.raises(ComparisonError, match=match):
        compare(a, b, metrics=metrics, resamples=100)


def test_group_key_must_be_present_and_agree():
    a, b = two_runs()
    with pytest.raises(ComparisonError, match="has no 'scenario' field"):
        compare(a, b, group_key="scenario", resamples=100)
    a, b = _with(a, scenario="x"), _with(b, scenario="x")
    b[0] = b[0].model_copy(update={"scenario": "y"})
    with pytest.raises(ComparisonError, match="task 't0' is in group 'x' in run base but 'y' in run sentry"):
        compare(a, b, group_key="scenario", resamples=100)
