"""DARC distillation: time to score every chain, prefix-sharing batch against one chain at a time.

For each (interventions m, longest chain L, tasks n), builds a random evidence table
(success rates 10-50% per intervention, gamma-distributed costs), then times `distill`
(all chains scored by length, reusing each prefix's per-task state) and the reference
that calls `score_chain` once per chain, and checks both give the same scores and the
same best chain. Also times loading the table back from its CSV file.

    python scripts/bench_distill.py [--repeats 3] [--cases 4x3x10000,8x3x10000,8x3x100000]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np

from playground.plugins.darc.distill import count_chains, distill, rank_key, score_chain
from playground.plugins.darc.evidence import Evidence, load_evidence, write_evidence

LAM, TAU_FREE = 0.05, 2.0


def random_evidence(m: int, n: int, seed: int = 0) -> Evidence:
    """Return an n-task, m-intervention evidence table with varied success rates and costs."""
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.1, 0.5, m)
    mean_costs = rng.uniform(0.5, 3.0, m)
    return Evidence([f"task-{i}" for i in range(n)], [f"intervention-{r}" for r in range(m)],
                    rng.random((n, m)) < rates, rng.gamma(2.0, mean_costs / 2.0, (n, m)))


def best_time(fn, repeats: int) -> tuple[float, object]:
    """Return the fastest of `repeats` calls in seconds, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def one_at_a_time(evidence: Evidence, max_len: int):
    """Score every chain with `score_chain`, one call per chain."""
    names = evidence.interventions
    chains = [p for length in range(1, max_len + 1) for p in itertools.permutations(names, length)]
    return [score_chain(evidence, chain, LAM, TAU_FREE) for chain in chains]


def main() -> None:
    """Run the cases given on the command line and print one line per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default="4x3x10000,8x3x10000,8x3x100000",
                        help="comma-separated MxLxN: interventions x longest chain x tasks")
    args = parser.parse_args()
    print(f"{'m':>3} {'L':>2} {'tasks':>8} {'chains':>7} {'distill s':>10} {'per chain s':>12} {'ratio':>7} "
          f"{'load csv s':>11}  best chain")
    for case in args.cases.split(","):
        m, max_len, n = (int(x) for x in case.split("x"))
        evidence = random_evidence(m, n)
        fast, result = best_time(lambda: distill(evidence, max_len, LAM, TAU_FREE), args.repeats)
        slow, reference = best_time(lambda: one_at_a_time(evidence, max_len), 1)
        assert result.search_space == count_chains(m, max_len) == len(reference)
        for got, want in zip(result.candidates, reference):
            assert got.names == want.names
            assert abs(got.succ - want.succ) < 1e-12 and abs(got.cost - want.cost) < 1e-9
        assert min(reference, key=rank_key).names == result.best.names
        with tempfile.TemporaryDirectory() as tmp:
            path = write_evidence(Path(tmp) / "evidence.csv", evidence.rows())
            load, loaded = best_time(lambda: load_evidence(path), 1)
            assert loaded.n_tasks == n
        print(f"{m:>3} {max_len:>2} {n:>8} {result.search_space:>7} {fast:>10.4f} {slow:>12.4f} "
              f"{slow / fast:>6.1f}x {load:>11.3f}  {' > '.join(result.best.names)} "
              f"(J={result.best.J:.4f}, succ={result.best.succ:.4f}, cost={result.best.cost:.3f})")


if __name__ == "__main__":
    main()
