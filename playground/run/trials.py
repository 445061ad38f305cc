"""Repeated trials (`playground run --trials N`): pass^k, each task's flip rate and the noise floor.

A run with trials N plays every task N times per harness, trial t with its own derived
seed (`config.episode_seed`). From the episode records of one harness:

- pass^k: the chance that k trials of a task drawn at random all succeed, averaged over
  tasks: for a task with n trials and c successes, C(c, k) / C(n, k) (the unbiased
  estimate; pass^1 is the success rate).
- pass@k: the chance that at least one of k trials drawn at random succeeds,
  1 - C(n - c, k) / C(n, k) (the unbiased estimate of Chen et al. 2021): what a deployment
  that may retry k times and knows when it has succeeded would solve.
- flip rate of a task: the share of its pairs of trials whose outcomes differ,
  c (n - c) / C(n, 2): 0 when every trial agrees, at most about 0.5.
- noise floor: the success difference two identical configurations show. The trials are
  split into two halves (odd and even trial numbers), each task's success in one half is
  paired with the other's, and the half-width of the 95% bootstrap interval of the mean
  difference (`stats.bootstrap_ci`, resampling tasks) is rescaled from half-size runs to
  runs of the full number of trials (the variance of a difference of two means of n_a and
  n_b trials is proportional to 1/n_a + 1/n_b). A difference between two harnesses or runs
  smaller than the noise floor is within what chance alone gives.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from playground.core.records import EpisodeRecord
from playground.run.stats import bootstrap_ci


def outcomes_by_task(records: Iterable[EpisodeRecord]) -> dict[str, list[bool]]:
    """Each task's outcomes (won or not), in trial order."""
    by_task: dict[str, list[tuple[int, bool]]] = {}
    for record in records:
        by_task.setdefault(record.task_id, []).append((record.trial, record.won))
    return {task: [won for _, won in sorted(pairs)] for task, pairs in by_task.items()}


def pass_hat_k(outcomes: Mapping[str, list[bool]], k: int) -> float | None:
    """pass^k over the tasks with at least k trials (None when none has)."""
    values = [math.comb(sum(o), k) / math.comb(len(o), k) for o in outcomes.values() if len(o) >= k]
    return sum(values) / len(values) if values else None


def pass_at_k(outcomes: Mapping[str, list[bool]], k: int) -> float | None:
    """pass@k over the tasks with at least k trials (None when none has)."""
    values = [1 - math.comb(len(o) - sum(o), k) / math.comb(len(o), k) for o in outcomes.values() if len(o) >= k]
    return sum(values) / len(values) if values else None


def flip_rate(outcomes: list[bool]) -> float | None:
    """The share of a task's pairs of trials whose outcomes differ (None for fewer than 2 trials)."""
    n, c = len(outcomes), sum(outcomes)
    return c * (n - c) / math.comb(n, 2) if n >= 2 else None


def noise_floor(outcomes: Mapping[str, list[bool]], resamples: int = 2_000, seed: int = 0) -> dict[str, float] | None:
    """The half-split difference and the noise floor of a success rate (module docstring); None without 2 trials."""
    split = [(o[0::2], o[1::2]) for o in outcomes.values() if len(o) >= 2]
    if not split:
        return None
    diffs = [float(np.mean(a) - np.mean(b)) for a, b in split]
    low, high = bootstrap_ci(diffs, resamples=resamples, seed=seed)
    n = Counter(len(a) + len(b) for a, b in split).most_common(1)[0][0]  # the usual number of trials
    half_a, half_b = (n + 1) // 2, n // 2
    scale = math.sqrt((2 / n) / (1 / half_a + 1 / half_b))
    return {"half_split_difference": sum(diffs) / len(diffs), "noise_floor": (high - low) / 2 * scale}


def trial_fields(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """The summary fields of repeated trials for one harness; empty when no task was played more than once."""
    outcomes = outcomes_by_task(records)
    most = max((len(o) for o in outcomes.values()), default=0)
    if most < 2:
        return {}
    rates = {task: flip_rate(o) for task, o in outcomes.items() if len(o) >= 2}
    noise = noise_floor(outcomes) or {}
    return {
        "trials": most,
        "pass_k": {str(k): pass_hat_k(outcomes, k) for k in range(1, most + 1)},
        "flip_rate": sum(r for r in rates.values() if r is not None) / len(rates),
        "flipping_tasks": sum(1 for r in rates.values() if r),
        "flip_rates": dict(sorted(rates.items())),
        "noise_floor": noise.get("noise_floor"),
        "half_split_difference": noise.get("half_split_difference"),
    }
