"""Distillation of a short-circuit intervention chain from an evidence table.

A chain pi = (r1, ..., rl) is deployed as a cascade: on a task, try r1; if it fails,
reset and try r2; and so on, halting at the first intervention that succeeds. On the
evidence table, for each task i:

- the chain succeeds when any of its interventions succeeds: max over r in pi of s(i, r);
- the chain costs the summed cost of the interventions tried, up to and including the
  halting one, or of all of them when none succeeds.

succ(pi) and cost(pi) are the means of these over tasks, and the objective is

    J(pi) = succ(pi) - lambda * max(0, cost(pi) - tau_free).

Every duplicate-free ordered chain of length 1..L over the m interventions is scored
(`count_chains(m, L)` of them). The best chain is the first in this order (`rank_key`):
higher J, then higher succ, then lower cost, then shorter, then the tuple of names in
lexicographic order. Values equal to 12 significant digits count as ties, so that float
rounding from summing costs in a different order never decides.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from playground.plugins.darc.evidence import Evidence, evidence_hash

TIE_DIGITS = 12


@dataclass(frozen=True)
class Chain:
    """One candidate chain with its mean success, mean cost and objective on the evidence."""

    names: tuple[str, ...]
    succ: float
    cost: float
    J: float


@dataclass(frozen=True)
class DistillResult:
    """Every candidate chain scored (by length, then in the interventions' order), and the best one."""

    interventions: tuple[str, ...]
    n_tasks: int
    max_len: int
    lam: float
    tau_free: float
    candidates: tuple[Chain, ...]
    best: Chain

    @property
    def search_space(self) -> int:
        """The number of candidate chains scored."""
        return len(self.candidates)

    def ranked(self) -> list[Chain]:
        """Return the candidates best first, in the tie-breaking order of `rank_key`."""
        return sorted(self.candidates, key=rank_key)


def count_chains(m: int, max_len: int) -> int:
    """Return the number of duplicate-free ordered chains of length 1..max_len over m items."""
    if max_len < 1:
        raise ValueError(f"max_len (the longest chain, L) must be at least 1, got {max_len}")
    if m < 0:
        raise ValueError(f"the number of interventions must be non-negative, got {m}")
    return sum(math.perm(m, length) for length in range(1, max_len + 1))


def objective(succ: float | np.ndarray, cost: float | np.ndarray, lam: float, tau_free: float):
    """Return J = succ - lam * max(0, cost - tau_free) (element-wise for arrays)."""
    return succ - lam * np.maximum(0.0, np.asarray(cost, dtype=float) - tau_free)


def _tie(value: float) -> float:
    return float(f"{value:.{TIE_DIGITS}g}")


def rank_key(chain: Chain) -> tuple:
    """Sort key putting the better chain first: higher J, higher succ, lower cost, shorter, names."""
    return (-_tie(chain.J), -_tie(chain.succ), _tie(chain.cost), len(chain.names), chain.names)


def halting_index(evidence: Evidence, names: Sequence[str]) -> np.ndarray:
    """Return, per task, the position in the chain of the first intervention that succeeds, or -1 if none does."""
    solved = evidence.success[:, _columns(evidence, names)]
    return np.where(solved.any(axis=1), solved.argmax(axis=1), -1)


def score_chain(evidence: Evidence, names: Sequence[str], lam: float = 0.0, tau_free: float = 0.0) -> Chain:
    """Score one chain on the evidence (the reference definition, one chain at a time)."""
    columns = _columns(evidence, names)
    if not columns:
        raise ValueError("a chain needs at least one intervention")
    halt = halting_index(evidence, names)
    spent = np.cumsum(evidence.cost[:, columns], axis=1)
    last = np.where(halt >= 0, halt, len(columns) - 1)
    succ = float(np.mean(halt >= 0))
    cost = float(np.mean(spent[np.arange(evidence.n_tasks), last]))
    return Chain(tuple(names), succ, cost, float(objective(succ, cost, lam, tau_free)))


def _columns(evidence: Evidence, names: Sequence[str]) -> list[int]:
    if len(set(names)) != len(names):
        raise ValueError(f"a chain must not repeat an intervention: {tuple(names)}")
    unknown = [name for name in names if name not in evidence.interventions]
    if unknown:
        raise ValueError(f"unknown intervention(s) {', '.join(map(repr, unknown))}; "
                         f"the evidence has: {', '.join(evidence.interventions)}")
    return [evidence.interventions.index(name) for name in names]


def score_all_chains(success: np.ndarray, cost: np.ndarray, max_len: int
                     ) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]:
    """Score every duplicate-free chain of length 1..max_len over the columns of the tasks x interventions matrices.

    Returns the chains as tuples of column indices (by length, then lexicographically),
    their mean success and their mean cost.
    """
    if max_len < 1:
        raise ValueError(f"max_len (the longest chain, L) must be at least 1, got {max_len}")
    n, m = success.shape
    fails = np.ascontiguousarray(~np.asarray(success, dtype=bool).T)     # (m, n)
    costs = np.ascontiguousarray(np.asarray(cost, dtype=float).T)         # (m, n)
    prefixes: list[tuple[int, ...]] = [()]
    alive = np.ones((1, n), dtype=bool)       # per prefix, per task: no intervention has succeeded yet
    spent = np.zeros((1, n), dtype=float)     # per prefix, per task: cost of the interventions tried
    chains: list[tuple[int, ...]] = []
    solved_counts, cost_sums = [], []
    for length in range(1, min(max_len, m) + 1):
        extend = length < min(max_len, m)
        next_prefixes, next_alive, next_spent = [], [], []
        for r in range(m):
            rows = [p for p, prefix in enumerate(prefixes) if r not in prefix]
            if not rows:
                continue
            tried = alive[rows]
            paid = spent[rows] + tried * costs[r]
            still = tried & fails[r]
            new = [prefixes[p] + (r,) for p in rows]
            chains.extend(new)
            solved_counts.append(n - still.sum(axis=1))
            cost_sums.append(paid.sum(axis=1))
            if extend:
                next_prefixes.extend(new)
                next_alive.append(still)
                next_spent.append(paid)
        if extend:
            prefixes, alive, spent = next_prefixes, np.concatenate(next_alive), np.concatenate(next_spent)
    order = sorted(range(len(chains)), key=lambda k: (len(chains[k]), chains[k]))
    succ = np.concatenate(solved_counts)[order] / n
    mean_cost = np.concatenate(cost_sums)[order] / n
    return [chains[k] for k in order], succ, mean_cost


def distill(evidence: Evidence, max_len: int, lam: float, tau_free: float,
            interventions: Sequence[str] | None = None) -> DistillResult:
    """Score every short-circuit chain of length <= max_len on the evidence and pick the best.

    `interventions` limits the search to those columns (e.g. the interventions admissible
    for the diagnosed failure mode).
    """
    if max_len < 1:
        raise ValueError(f"max_len (the longest chain, L) must be at least 1, got {max_len}")
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lambda (the cost weight) must be a finite non-negative number, got {lam}")
    if not math.isfinite(tau_free):
        raise ValueError(f"tau_free (the free cost allowance) must be a finite number, got {tau_free}")
    if interventions is not None:
        evidence = evidence.restrict(interventions)
    if evidence.n_tasks == 0 or not evidence.interventions:
        raise ValueError("the evidence has no tasks or no interventions to distil from")
    chains, succ, cost = score_all_chains(evidence.success, evidence.cost, max_len)
    J = objective(succ, cost, lam, tau_free)
    names = evidence.interventions
    candidates = tuple(Chain(tuple(names[r] for r in chain), float(s), float(c), float(j))
                       for chain, s, c, j in zip(chains, succ, cost, J))
    return DistillResult(names, evidence.n_tasks, max_len, float(lam), float(tau_free), candidates,
                         min(candidates, key=rank_key))


@dataclass(frozen=True)
class Stability:
    """How stable the choice is when the tasks are resampled (`bootstrap_stability`)."""

    resamples: int
    seed: int
    winners: tuple[tuple[tuple[str, ...], int], ...]  # each winning chain and how often it won, most often first
    selection: tuple[float, ...]  # per resample: the winner's success on the resampled (selection) tasks
    test: tuple[float, ...]  # per resample with held-out tasks: the winner's success on the tasks not drawn

    @staticmethod
    def interval(values: Sequence[float]) -> tuple[float, float, float]:
        """Mean and the 2.5 and 97.5 percentiles (NaN when empty)."""
        if not values:
            return (math.nan, math.nan, math.nan)
        low, high = np.percentile(values, [2.5, 97.5])
        return (float(np.mean(values)), float(low), float(high))

    def report(self) -> str:
        """The summary `darc distill --bootstrap` prints."""
        plural = "s" if len(self.winners) != 1 else ""
        lines = [f"bootstrap: {self.resamples} resamples of the tasks (seed {self.seed}): "
                 + f"{len(self.winners)} distinct winning chain{plural}"]
        for names, count in self.winners[:5]:
            lines.append(f"  {count:>5}x  {' -> '.join(names)}")
        for what, values in (("selection success", self.selection), ("test success (held-out tasks)", self.test)):
            mean, low, high = self.interval(values)
            lines.append(f"  {what}: {mean:.3f} [95% {low:.3f}, {high:.3f}] over {len(values)} resamples")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready record written into policy.json."""
        sel, test = self.interval(self.selection), self.interval(self.test)
        return {"resamples": self.resamples, "seed": self.seed, "distinct_winners": len(self.winners),
                "winners": [{"chain": list(names), "count": count} for names, count in self.winners],
                "selection_success": {"mean": sel[0], "ci95": [sel[1], sel[2]]},
                "test_success": {"mean": test[0], "ci95": [test[1], test[2]], "resamples": len(self.test)}}


def bootstrap_stability(evidence: Evidence, max_len: int, lam: float, tau_free: float, resamples: int,
                        seed: int = 0) -> Stability:
    """Resample the tasks with replacement `resamples` times and distil on each resample.

    Reports how many distinct chains win, the winner's success on its own resample
    (selection) and on the tasks that resample left out (test; resamples that leave none
    out are skipped).
    """
    if resamples < 1:
        raise ValueError(f"the number of bootstrap resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng(seed)
    n = evidence.n_tasks
    wins: dict[tuple[str, ...], int] = {}
    selection: list[float] = []
    test: list[float] = []
    names = evidence.interventions
    for _ in range(resamples):
        drawn = rng.integers(0, n, size=n)
        chains, succ, cost = score_all_chains(evidence.success[drawn], evidence.cost[drawn], max_len)
        J = objective(succ, cost, lam, tau_free)
        scored = [Chain(tuple(names[r] for r in chain), float(s), float(c), float(j))
                  for chain, s, c, j in zip(chains, succ, cost, J)]
        best = min(scored, key=rank_key)
        wins[best.names] = wins.get(best.names, 0) + 1
        selection.append(best.succ)
        held_out = np.setdiff1d(np.arange(n), drawn)
        if held_out.size:
            columns = _columns(evidence, best.names)
            test.append(float(evidence.success[np.ix_(held_out, np.asarray(columns, dtype=int))].any(axis=1).mean()))
    winners = tuple(sorted(wins.items(), key=lambda item: (-item[1], item[0])))
    return Stability(resamples, seed, winners, tuple(selection), tuple(test))


def policy_dict(result: DistillResult, evidence_path: str | os.PathLike, **extra: Any) -> dict[str, Any]:
    """Return the JSON-ready record of the distilled policy to freeze; `extra` keys (e.g. the mode) are added."""
    best = result.best
    return {
        "chain": list(best.names),
        "J": best.J,
        "succ": best.succ,
        "cost": best.cost,
        "lambda": result.lam,
        "tau_free": result.tau_free,
        "max_len": result.max_len,
        "search_space": result.search_space,
        "interventions": list(result.interventions),
        "n_tasks": result.n_tasks,
        "evidence": str(evidence_path),
        "evidence_hash": evidence_hash(evidence_path),
        **extra,
    }


def save_policy(path: str | os.PathLike, policy: dict[str, Any]) -> Path:
    """Write a policy dict as a JSON file, replacing any old file only once the new one is fully written."""
    from playground.host_api import atomic_write_text

    return atomic_write_text(path, json.dumps(policy, indent=2) + "\n")
