"""Playbook store: retrieval latency by playbook size, insert throughput, several writers at once.

For each size, builds a playbook in a temporary folder with `add_many` (chunks of 50,000
lessons, one transaction each), then times `retrieve(k=5)` for random failures of the
taxonomy, without and with counting the retrieval (counting is a write). Lessons have 1-3
labels of their type, one of 4 subtypes and one of 50 triggers per type, so the diversity
cap has repeats to pass over. Then times single `add()` calls, and 4 processes calling
`add()` at once on one fresh file (the final count must equal the sum of what each added).
Last, the characters Sentry adds to the agent's context per proposal under `sentry` and
`sentry-persistent` with playbooks of 10, 100 and 1,000 lessons.

    python scripts/bench_playbook.py [--sizes 1000,100000,1000000] [--queries 2000] [--writers 4]
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import random
import statistics
import tempfile
import time
from pathlib import Path

from playground.host.manager import default_labels
from playground.plugins.playbook.store import Playbook

CHUNK = 50_000
TYPES = ("action_validity", "progress", "grounding", "procedure")  # 3, 4, 3 and 14 labels with every plugin loaded


def lesson_records(count: int, seed: int = 0):
    """Yield `count` lesson records of the taxonomy's types, oldest first."""
    rng = random.Random(seed)
    start = time.time() - count
    for i in range(count):
        failure_type = rng.choice(TYPES)
        labels = sorted(default_labels().labels_of(failure_type))
        yield {"failure_type": failure_type, "labels": rng.sample(labels, rng.randint(1, min(3, len(labels)))),
               "subtype": f"subtype {rng.randrange(4)}", "trigger": f"{failure_type} trigger {rng.randrange(50)}",
               "principle": f"Principle {i}: when this happens, check the goal and try one new action.",
               "provenance": {"run": "bench", "task": f"task-{i % 997}", "step": i % 40}, "created_at": start + i}


def build(path: Path, size: int) -> float:
    """Fill a new playbook with `size` lessons; return lessons added per second."""
    records = lesson_records(size)
    started = time.perf_counter()
    with Playbook(path) as book:
        for _ in range(0, size, CHUNK):
            book.add_many(next(records) for _ in range(min(CHUNK, size - len(book))))
        assert len(book) == size
    return size / (time.perf_counter() - started)


def percentile(samples: list[float], q: float) -> float:
    """Return the q-th percentile (0-100) of samples."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def time_retrieval(path: Path, queries: int, count: bool) -> list[float]:
    """Return the latency in microseconds of `queries` random retrievals."""
    rng = random.Random(1)
    latencies = []
    with Playbook(path) as book:
        for i in range(queries + 100):
            failure_type = rng.choice(TYPES)
            labels = rng.sample(sorted(default_labels().labels_of(failure_type)), rng.randint(1, 3))
            started = time.perf_counter_ns()
            got = book.retrieve(failure_type, labels, k=5, count=count)
            elapsed = (time.perf_counter_ns() - started) / 1_000
            assert len(got) == 5
            if i >= 100:  # the first 100 warm the caches
                latencies.append(elapsed)
    return latencies


def single_adds(path: Path, count: int) -> float:
    """Return `add()` calls per second into a fresh playbook."""
    records = list(lesson_records(count, seed=2))
    with Playbook(path) as book:
        started = time.perf_counter()
        for record in records:
            book.add(**record)
        return count / (time.perf_counter() - started)


def writer(path: str, worker: int, count: int, results) -> None:
    """Add `count` lessons one by one; report (added, errors)."""
    added = errors = 0
    try:
        book = Playbook(path)
    except Exception:
        results.put((0, 1))
        return
    for record in lesson_records(count, seed=10 + worker):
        try:
            book.add(**record)
            added += 1
        except Exception:
            errors += 1
    book.close()
    results.put((added, errors))


def concurrent_adds(path: Path, writers: int, each: int) -> tuple[int, int, int, float]:
    """Run `writers` processes adding `each` lessons at once; return (added, final count, errors, seconds)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=writer, args=(str(path), w, each, results)) for w in range(writers)]
    started = time.perf_counter()
    for process in processes:
        process.start()
    reports = [results.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
    seconds = time.perf_counter() - started
    with Playbook(path) as book:
        final = len(book)
    crashed = sum(1 for p in processes if p.exitcode != 0)
    return sum(a for a, _ in reports), final, sum(e for _, e in reports) + crashed, seconds


def context_chars(folder: Path, sizes: list[int], episodes: int) -> list[tuple[str, str, str, str]]:
    """Mean characters the harness adds to the agent's context per proposal: sentry vs sentry-persistent."""
    from playground.agents.noisy import NoisyAgent
    from playground.plugins.sentry.harness import SentryPlugin
    from playground.testing import play, tiny_env

    rows = []
    for size in sizes:
        path = folder / f"context-{size}.db"
        with Playbook(path) as book:
            diagnosed = (r for r in lesson_records(4 * size, seed=1) if r["failure_type"] != "procedure")
            book.add_many(itertools.islice(diagnosed, size))
            stored = len(book)
        means = []
        for persistent in (False, True):
            chars = []
            for i in range(episodes):
                result = play(tiny_env(), NoisyAgent(), plugins=[SentryPlugin({"persistent": persistent,
                                                                             "update_playbook": False})],
                              task=f"tiny-{20_000 + i}", max_steps=30, playbook=str(path), strict=False)
                chars += [p["intervention_chars"] for p in result.of("proposal")]
            means.append(statistics.mean(chars))
        rows.append((f"{stored:,}", f"{means[0]:,.0f}", f"{means[1]:,.0f}", f"{means[1] / means[0]:,.1f}x"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000", help="comma-separated playbook sizes")
    parser.add_argument("--queries", type=int, default=2000, help="timed retrievals per size and mode")
    parser.add_argument("--adds", type=int, default=2000, help="single add() calls timed")
    parser.add_argument("--writers", type=int, default=4, help="processes adding at once")
    parser.add_argument("--per-writer", type=int, default=5000, help="lessons each writer adds")
    parser.add_argument("--context-sizes", default="10,100,1000", help="playbook sizes for the context comparison")
    parser.add_argument("--context-episodes", type=int, default=10, help="tiny episodes per harness and size")
    args = parser.parse_args()
    sizes = [int(size.replace("_", "")) for size in args.sizes.split(",")]

    with tempfile.TemporaryDirectory(prefix="bench_playbook_") as folder:
        folder = Path(folder)
        rows = []
        for size in sizes:
            path = folder / f"playbook-{size}.db"
            bulk = build(path, size)
            plain = time_retrieval(path, args.queries, count=False)
            counted = time_retrieval(path, args.queries, count=True)
            megabytes = sum(p.stat().st_size for p in folder.glob(f"{path.name}*")) / 1e6
            rows.append((f"{size:,}", f"{bulk:,.0f}", f"{statistics.median(plain):,.0f}",
                         f"{percentile(plain, 99):,.0f}", f"{statistics.median(counted):,.0f}",
                         f"{percentile(counted, 99):,.0f}", f"{megabytes:,.1f}"))
            path.unlink()
        single = single_adds(folder / "single.db", args.adds)
        added, final, errors, seconds = concurrent_adds(folder / "shared.db", args.writers, args.per_writer)
        context = context_chars(folder, [int(n) for n in args.context_sizes.split(",")], args.context_episodes)

    header = ("lessons", "bulk adds/s", "retrieve p50 us", "p99 us", "retrieve+count p50 us", "p99 us", "file MB")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"retrieve(k=5), {args.queries} random queries per cell; bulk = add_many in chunks of {CHUNK:,}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
    print(f"\nsingle add() calls: {single:,.0f}/s ({args.adds} calls, one transaction each)")
    print(f"{args.writers} processes x {args.per_writer} add() at once: {added:,} added, final count {final:,} "
          f"(expected {args.writers * args.per_writer:,}), errors reaching the caller: {errors}, "
          f"{seconds:.1f} s wall ({added / seconds:,.0f} adds/s incl. process start)")
    print(f"\ncharacters the harness adds to the agent's context per proposal (noisy agent, tiny env, "
          f"{args.context_episodes} episodes each):")
    print(f"{'lessons':>8}  {'sentry':>8}  {'sentry-persistent':>17}  {'ratio':>8}")
    for lessons, sentry, persistent, ratio in context:
        print(f"{lessons:>8}  {sentry:>8}  {persistent:>17}  {ratio:>8}")


if __name__ == "__main__":
    main()
