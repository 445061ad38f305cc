"""Paired per-task comparison of two runs (A and B) on success, steps, invalid actions and tokens.

Episodes are paired by task id; only tasks present in both runs are compared, and the
number dropped from each side is reported. For each metric the result gives the two
means, the mean paired difference B - A, a percentile bootstrap confidence interval of
that difference, and a two-sided p-value:

- success: exact McNemar test (two-sided binomial test on the discordant pairs);
- numeric metrics: paired sign-flip permutation test of the mean difference (exact when
  at most 16 units have a non-zero difference, else Monte Carlo with the given number of
  resamples, p = (1 + hits) / (1 + resamples)).

When a group key is given (e.g. the scenario or task family), tasks in a group are not
treated as independent: the bootstrap resamples whole groups and the sign-flip test
flips whole groups. The McNemar test always treats tasks as independent pairs.
p-values are Holm-adjusted across the metrics of one comparison. Everything random is
drawn from generators seeded with `seed`, so a comparison is reproducible.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from playground.core.errors import PlaygroundError
from playground.core.records import EpisodeRecord

EXACT_SIGN_FLIP_MAX_UNITS = 16
_CHUNK_ELEMENTS = 2_000_000


class ComparisonError(PlaygroundError, ValueError):
    """Two runs that cannot be compared; the message names the task, field or run at fault."""


@dataclass(frozen=True)
class Metric:
    """A per-episode quantity: the sum of the record's `fields` (`binary` metrics are 0/1, e.g. success)."""

    name: str
    fields: tuple[str, ...]
    binary: bool = False

    def value(self, record: EpisodeRecord, label: str) -> float:
        """Return the metric for one episode record, or raise ComparisonError naming a missing or bad field."""
        total = 0.0
        for field in self.fields:
            if not record.has(field):
                raise ComparisonError(f"run {label}: task {record.task_id!r} has no {field!r} field")
            value = record.value(field)
            if self.binary:
                value = bool(value)
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ComparisonError(f"run {label}: task {record.task_id!r} has a non-numeric "
                                      f"{field!r}: {value!r}")
            total += float(value)
        return total


DEFAULT_METRICS = (
    Metric("success", ("won",), binary=True),
    Metric("steps", ("steps",)),
    Metric("invalid_actions", ("invalid_actions",)),
    Metric("tokens", ("prompt_tokens", "completion_tokens")),
)


@dataclass(frozen=True)
class MetricComparison:
    """One metric of a paired comparison; `diff` and the interval are for B - A."""

    name: str
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    test: str
    discordant: tuple[int, int] | None = None   # success only: (A won and B lost, A lost and B won)


@dataclass(frozen=True)
class Comparison:
    """The paired comparison of run A with run B over the tasks both ran."""

    label_a: str
    label_b: str
    n_pairs: int
    only_a: int
    only_b: int
    group_key: str | None
    n_groups: int
    resamples: int
    seed: int
    confidence: float
    metrics: tuple[MetricComparison, ...]

    def metric(self, name: str) -> MetricComparison:
        """Return the comparison of the metric called `name`."""
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Return the comparison as a JSON-ready dict."""
        return asdict(self)


def mcnemar_exact(b: int, c: int) -> float:
    """Return the two-sided exact McNemar p-value for b and c discordant pairs (1.0 when there are none)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n, k = b + c, min(b, c)
    if n == 0:
        return 1.0
    if n <= 1000:
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    else:
        logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
                for i in range(k + 1)]
        top = max(logs)
        tail = math.exp(top) * math.fsum(math.exp(x - top) for x in logs)
    return min(1.0, 2 * tail)


def holm(p_values: Sequence[float]) -> list[float]:
    """Return Holm step-down adjusted p-values, in the order given."""
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def _units(diffs: np.ndarray, groups: Sequence[Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """Return the resampling units' summed differences and sizes: one unit per task, or per group (first-seen order)."""
    if groups is None:
        return np.asarray(diffs, dtype=float), np.ones(len(diffs))
    if len(groups) != len(diffs):
        raise ValueError(f"{len(groups)} group labels for {len(diffs)} differences")
    codes: dict[str, int] = {}
    index = np.array([codes.setdefault(str(g), len(codes)) for g in groups], dtype=int)
    return np.bincount(index, weights=diffs), np.bincount(index).astype(float)


def bootstrap_ci(diffs: Sequence[float], groups: Sequence[Any] | None = None, resamples: int = 10_000,
                 seed: int = 0, confidence: float = 0.95) -> tuple[float, float]:
    """Return the percentile bootstrap interval of the mean of `diffs`.

    With `groups`, whole groups are resampled (cluster bootstrap) and each resample's
    mean is its summed difference over its number of tasks.
    """
    if len(diffs) == 0:
        raise ValueError("no differences to bootstrap")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    sums, sizes = _units(np.asarray(diffs, dtype=float), groups)
    rng = np.random.default_rng([seed, 0])
    n_units = len(sums)
    chunk = max(1, _CHUNK_ELEMENTS // n_units)
    means = []
    for start in range(0, resamples, chunk):
        pick = rng.integers(0, n_units, size=(min(chunk, resamples - start), n_units))
        means.append(sums[pick].sum(axis=1) / sizes[pick].sum(axis=1))
    alpha = 1 - confidence
    low, high = np.quantile(np.concatenate(means), [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def sign_flip_p(diffs: Sequence[float], groups: Sequence[Any] | None = None, resamples: int = 10_000,
                seed: int = 0) -> float:
    """Return the two-sided paired sign-flip permutation p-value for a zero mean of `diffs`.

    With `groups`, each group's differences are flipped together.
    """
    sums, _ = _units(np.asarray(diffs, dtype=float), groups)
    sums = sums[sums != 0]
    if len(sums) == 0:
        return 1.0
    observed = abs(sums.sum())
    tolerance = 1e-9 * max(1.0, float(np.abs(sums).sum()))
    if len(sums) <= EXACT_SIGN_FLIP_MAX_UNITS:
        patterns = np.arange(2 ** len(sums))[:, None] >> np.arange(len(sums)) & 1
        totals = (1 - 2 * patterns) @ sums
        return float(np.mean(np.abs(totals) >= observed - tolerance))
    rng = np.random.default_rng([seed, 1])
    chunk = max(1, _CHUNK_ELEMENTS // len(sums))
    hits = 0
    for start in range(0, resamples, chunk):
        keep = rng.integers(0, 2, size=(min(chunk, resamples - start), len(sums)), dtype=bool)
        totals = 2 * (keep @ sums) - sums.sum()          # sign +1 where kept, -1 where flipped
        hits += int(np.sum(np.abs(totals) >= observed - tolerance))
    return (1 + hits) / (1 + resamples)


def _by_task(records: Iterable[EpisodeRecord], label: str) -> dict[str, EpisodeRecord]:
    """Records by task id, and by `task#N` for trial N > 1 (trial N of A is paired with trial N of B)."""
    out: dict[str, EpisodeRecord] = {}
    for record in records:
        task = record.task_id + (f"#{record.trial}" if record.trial > 1 else "")
        if task in out:
            raise ComparisonError(f"run {label}: task {task!r} appears more than once")
        out[task] = record
    return out


def _label(records: Sequence[EpisodeRecord], default: str) -> str:
    harnesses = {record.harness for record in records}
    return harnesses.pop() if len(harnesses) == 1 else default


def compare(records_a: Sequence[EpisodeRecord], records_b: Sequence[EpisodeRecord], *,
            label_a: str | None = None, label_b: str | None = None, group_key: str | None = None,
            metrics: Sequence[Metric] = DEFAULT_METRICS, resamples: int = 10_000, seed: int = 0,
            confidence: float = 0.95) -> Comparison:
    """Compare run B with run A task by task; see the module docstring for the tests used.

    Labels default to each run's harness name (when all its records share one), else A / B.
    `group_key` names a record field (e.g. "group") whose value clusters tasks. Runs with
    repeated trials pair trial N with trial N and, unless a group key is given, cluster by
    task (`task_id`): a task's trials are not independent.
    """
    label_a = label_a or _label(records_a, "A")
    label_b = label_b or _label(records_b, "B")
    if label_a == label_b:
        label_a, label_b = f"A ({label_a})", f"B ({label_b})"
    a, b = _by_task(records_a, label_a), _by_task(records_b, label_b)
    tasks = [task for task in a if task in b]
    if not tasks:
        raise ComparisonError(f"runs {label_a} and {label_b} have no task in common")
    if group_key is None and any(a[task].trial > 1 for task in tasks):
        group_key = "task_id"
    groups = None
    if group_key is not None:
        groups = []
        for task in tasks:
            for label, record in ((label_a, a[task]), (label_b, b[task])):
                if not record.has(group_key):
                    raise ComparisonError(f"run {label}: task {task!r} has no {group_key!r} field")
            group_a, group_b = a[task].value(group_key), b[task].value(group_key)
            if str(group_a) != str(group_b):
                raise ComparisonError(f"task {task!r} is in group {group_a!r} in run {label_a} "
                                      f"but {group_b!r} in run {label_b}")
            groups.append(str(group_a))
    rows = []
    for metric in metrics:
        values_a = np.array([metric.value(a[task], label_a) for task in tasks])
        values_b = np.array([metric.value(b[task], label_b) for task in tasks])
        diffs = values_b - values_a
        low, high = bootstrap_ci(diffs, groups, resamples, seed, confidence)
        if metric.binary:
            only_a = int(np.sum((values_a == 1) & (values_b == 0)))
            only_b = int(np.sum((values_a == 0) & (values_b == 1)))
            p, test, discordant = mcnemar_exact(only_a, only_b), "McNemar exact", (only_a, only_b)
        else:
            p, discordant = sign_flip_p(diffs, groups, resamples, seed), None
            test = "sign-flip" + (" by group" if groups is not None else "")
        rows.append((metric.name, float(values_a.mean()), float(values_b.mean()), float(diffs.mean()),
                     low, high, p, test, discordant))
    adjusted = holm([row[6] for row in rows])
    results = tuple(MetricComparison(name, mean_a, mean_b, diff, low, high, p, p_adj, test, discordant)
                    for (name, mean_a, mean_b, diff, low, high, p, test, discordant), p_adj in zip(rows, adjusted))
    return Comparison(label_a, label_b, len(tasks), len(a) - len(tasks), len(b) - len(tasks), group_key,
                      len(set(groups)) if groups is not None else len(tasks), resamples, seed, confidence, results)


def split_by_harness(records: Iterable[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    """Group one run's episode records by their `harness` field, in order of first appearance."""
    out: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        out.setdefault(record.harness, []).append(record)
    return out


def _num(value: float, decimals: int, signed: bool = False) -> str:
    return f"{value:{'+' if signed else ''}.{decimals}f}"


def _p(value: float) -> str:
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def format_comparison(result: Comparison) -> str:
    """Return the comparison as a plain-text table with a header saying what was paired and resampled."""
    units = (f"resampling {result.n_groups} groups of {result.group_key!r}" if result.group_key
             else "resampling tasks")
    lines = [
        f"A = {result.label_a}, B = {result.label_b}: {result.n_pairs} paired tasks "
        f"(dropped: {result.only_a} only in A, {result.only_b} only in B)",
        f"bootstrap: {result.resamples} resamples, seed {result.seed}, {units}; p-values Holm-adjusted "
        f"across {len(result.metrics)} metrics",
    ]
    ci = f"{result.confidence:.0%} CI"
    table = [("metric", "A", "B", "B-A", ci, "p", "p (Holm)", "test")]
    for m in result.metrics:
        test = m.test + (f" (b={m.discordant[0]}, c={m.discordant[1]})" if m.discordant else "")
        d = 1 if max(abs(m.mean_a), abs(m.mean_b)) >= 100 else 3
        table.append((m.name, _num(m.mean_a, d), _num(m.mean_b, d), _num(m.diff, d, True),
                      f"[{_num(m.ci_low, d, True)}, {_num(m.ci_high, d, True)}]", _p(m.p_value), _p(m.p_holm), test))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:-1], widths[1:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
