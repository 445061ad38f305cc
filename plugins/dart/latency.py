"""Paired latency tests of the DART bench (the shape of the paper's Table 10).

Each comparison pairs DART with one other harness on the tasks both played (every domain's
tasks pooled; a task is the unit) and tests the mean of the per-task difference in episode
wall time, other minus DART, with the project's statistics (playground/run/stats.py): a
paired sign-flip permutation test, a percentile bootstrap interval of the mean difference,
and Holm's correction across the comparisons of one table.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from playground.host_api import bootstrap_ci, holm, sign_flip_p

COLUMNS = ("dart vs", "pairs", "dart {unit}", "other {unit}", "diff {unit}", "95% CI", "p", "p Holm")


@dataclass(frozen=True)
class LatencyTest:
    """One paired comparison: mean episode seconds of DART and of `other`, their mean difference (other - DART),
    its bootstrap interval, the sign-flip p-value and the Holm-adjusted one."""

    other: str
    pairs: int
    mean_dart: float
    mean_other: float
    diff: float
    ci_low: float
    ci_high: float
    p: float
    p_holm: float

    def row(self, scale: float = 1.0) -> list[str]:
        """The comparison as table cells, durations multiplied by `scale` (1000: milliseconds)."""
        d, o, diff, low, high = (x * scale for x in (self.mean_dart, self.mean_other, self.diff, self.ci_low,
                                                     self.ci_high))
        return [self.other, str(self.pairs), f"{d:.3g}", f"{o:.3g}", f"{diff:+.3g}", f"[{low:+.3g}, {high:+.3g}]",
                f"{self.p:.3g}", f"{self.p_holm:.3g}"]


def paired_latency(seconds: Mapping[str, Mapping[str, float]], reference: str = "dart", resamples: int = 10_000,
                   seed: int = 0) -> list[LatencyTest]:
    """DART (`reference`) against every other harness in `seconds` (harness -> task -> episode seconds), paired by
    task; harnesses with no task in common with DART are left out. p-values are Holm-adjusted across the rows."""
    if reference not in seconds:
        return []
    ours = seconds[reference]
    raw = []
    for other, theirs in seconds.items():
        tasks = sorted(set(ours) & set(theirs))
        if other == reference or not tasks:
            continue
        diffs = [theirs[t] - ours[t] for t in tasks]
        low, high = bootstrap_ci(diffs, resamples=resamples, seed=seed)
        raw.append((other, tasks, diffs, low, high, sign_flip_p(diffs, resamples=resamples, seed=seed)))
    adjusted = holm([r[5] for r in raw])
    return [LatencyTest(other, len(tasks), statistics.fmean(ours[t] for t in tasks),
                        statistics.fmean(seconds[other][t] for t in tasks), statistics.fmean(diffs), low, high, p,
                        p_holm)
            for (other, tasks, diffs, low, high, p), p_holm in zip(raw, adjusted, strict=True)]


def format_latency(tests: list[LatencyTest]) -> list[str]:
    """The tests as aligned text lines (empty when there is none): in milliseconds when every mean is below a
    second, else in seconds."""
    if not tests:
        return []
    small = all(max(t.mean_dart, t.mean_other) < 1 for t in tests)
    scale, unit = (1000.0, "ms") if small else (1.0, "s")
    body = [[c.format(unit=unit) for c in COLUMNS]] + [test.row(scale) for test in tests]
    widths = [max(len(r[i]) for r in body) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in body]
