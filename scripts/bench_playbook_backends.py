"""Retrieval latency of the playbook on SQLite and on PostgreSQL at the same size, side by side (issue 55's floor:
PostgreSQL p99 <= 5 ms at 100k lessons).

Builds one playbook of N lessons in an SQLite file (drawn from a fixed seed: one failure type, 1 to 3 of its labels,
repeated triggers so the diversity cap has work), copies it to a PostgreSQL schema (`playground playbook copy`'s
code), then times the same Q retrievals (k=5, labels drawn from the same seed) on each, without and with the
counter update a run makes (`count=True` under an episode's origin). Prints milliseconds per retrieval: p50, p95,
p99, max.

    python scripts/bench_playbook_backends.py --lessons 100000 --queries 2000
    python scripts/bench_playbook_backends.py --url 'postgresql://me@host/db'   # a server of yours (PGPASSWORD)

Without `--url` it starts a throw-away server as the tests do (tests/postgres_server.py: the pgserver wheel of the
`test` extra); the playbook's schema is dropped at the end either way.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABELS = ["repetition_or_looping", "planning_stall", "over_exploration", "termination_miscalibration"]


def build(path: Path, lessons: int, seed: int) -> float:
    """Fill a new SQLite playbook with `lessons` lessons; return the seconds it took."""
    from playground.plugins.playbook.store import Playbook

    rng = random.Random(seed)
    started = time.perf_counter()
    with Playbook(path) as book:
        for first in range(0, lessons, 5_000):
            book.add_many({"failure_type": "progress", "labels": rng.sample(LABELS, rng.randint(1, 3)),
                           "trigger": f"when the agent repeats action {rng.randint(0, lessons // 3)}",
                           "principle": f"try another approach ({number})", "subtype": rng.choice(["", "loop", "tool"]),
                           "created_at": 1.7e9 + number, "provenance": {"n": number, "env": "tiny"}}
                          for number in range(first, min(first + 5_000, lessons)))
    return time.perf_counter() - started


def timings(location: str, queries: int, seed: int, count: bool) -> list[float]:
    """Milliseconds of each of `queries` retrievals (k=5) on the playbook at `location`."""
    from playground.plugins.playbook.store import Playbook

    rng = random.Random(seed)
    spent = []
    with Playbook(location) as book:
        for _ in range(20):  # warm the connections and the statements
            book.retrieve("progress", LABELS[:2], 5, count=False)
        for number in range(queries):
            labels = rng.sample(LABELS, rng.randint(1, 3))
            origin = {"run": "bench", "episode": f"e{number}", "attempt": 1, "step": 1}
            started = time.perf_counter()
            book.retrieve("progress", labels, 5, count=count, origin=origin if count else None)
            spent.append((time.perf_counter() - started) * 1000)
    return spent


def summary(spent: list[float]) -> str:
    ranked = sorted(spent)
    p = lambda q: ranked[min(len(ranked) - 1, int(q * len(ranked)))]  # noqa: E731
    return (f"{statistics.median(ranked):8.3f} {p(0.95):8.3f} {p(0.99):8.3f} {ranked[-1]:8.3f}")


def main() -> int:
    """Build, copy, time and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=55)
    parser.add_argument("--url", default=None, help="a PostgreSQL server's URL (default: start one)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    server = None
    if args.url is None:
        from tests.postgres_server import PASSWORD, PostgresServer

        server = PostgresServer().start()
        os.environ["PGPASSWORD"] = PASSWORD
        args.url = server.url()
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = f"{args.url}{'&' if '?' in args.url else '?'}schema={schema}"
    from playground.plugins.playbook.postgres import drop
    from playground.plugins.playbook.store import Playbook

    try:
        with tempfile.TemporaryDirectory() as folder:
            lite = Path(folder) / "bench.sqlite"
            built = build(lite, args.lessons, args.seed)
            started = time.perf_counter()
            with Playbook(lite, read_only=True) as book:
                book.copy_to(url)
            copied = time.perf_counter() - started
            print(f"{args.lessons:,} lessons: built in SQLite in {built:.1f} s, copied to PostgreSQL in "
                  f"{copied:.1f} s; {args.queries:,} retrievals (k=5) each; milliseconds per retrieval")
            print(f"{'backend':<11} {'counted':<8} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}")
            for count in (False, True):
                for name, location in (("sqlite", str(lite)), ("postgresql", url)):
                    spent = timings(location, args.queries, args.seed, count)
                    print(f"{name:<11} {'yes' if count else 'no':<8} {summary(spent)}")
    finally:
        drop(url)
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
