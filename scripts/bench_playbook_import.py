"""`playbook import` time by file size, for lessons of ONE failure type and label set (issue 57, item 8).

Writes JSONL files of 10,000 and 100,000 distinct lessons, all of failure type "progress" with one label, in
a temporary folder, imports each into a fresh SQLite playbook with `import_file` (what `playground playbook
import` calls), side by side in one run, and prints the times and the ratio 100k / 10k. An import linear in
the number of lessons gives about 10; the issue's floor is 12.

    python scripts/bench_playbook_import.py [--sizes 10000,100000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from playground.host.manager import default_labels
from playground.plugins.playbook.store import import_file

FAILURE_TYPE = "progress"


def write_lessons(path: Path, count: int, label: str) -> None:
    """Write `count` distinct lessons of FAILURE_TYPE and `label` as JSONL at `path`."""
    now = time.time() - count
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            handle.write(json.dumps({
                "failure_type": FAILURE_TYPE, "labels": [label], "subtype": "",
                "trigger": f"the agent repeats step {i} of the plan without progress",
                "principle": f"after step {i} fails twice, try a different action {i % 97}",
                "provenance": {"run": "bench", "task": f"task-{i}"}, "created_at": now + i}) + "\n")


def time_import(folder: Path, source: Path, name: str) -> float:
    """Seconds to import `source` into a new playbook `name` in `folder`, checking every lesson arrived."""
    target = folder / f"{name}.sqlite"
    started = time.perf_counter()
    report = import_file(target, source)
    seconds = time.perf_counter() - started
    expected = sum(1 for _ in open(source, encoding="utf-8"))
    if report.imported != expected:
        raise SystemExit(f"{source.name}: imported {report.imported}, expected {expected}")
    target.unlink()
    return seconds


def main() -> None:
    """Parse arguments, run the imports, print the times and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="two comma-separated lesson counts")
    parser.add_argument("--rounds", type=int, default=1, help="imports of each size (the best is kept)")
    args = parser.parse_args()
    small, large = (int(size) for size in args.sizes.split(","))
    label = sorted(default_labels().labels_of(FAILURE_TYPE))[0]
    best: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for size in (small, large):
            write_lessons(folder / f"{size}.jsonl", size, label)
        for round_ in range(args.rounds):
            for size in (small, large):  # side by side: each round imports both sizes
                seconds = time_import(folder, folder / f"{size}.jsonl", f"r{round_}-{size}")
                best[size] = min(best.get(size, seconds), seconds)
                print(f"round {round_ + 1}: {size:>9,} lessons of {FAILURE_TYPE}/{label}: {seconds:8.2f} s "
                      f"({size / seconds:,.0f} lessons/s)", flush=True)
    ratio = best[large] / best[small]
    print(f"best: {small:,} in {best[small]:.2f} s, {large:,} in {best[large]:.2f} s; "
          f"ratio {large // 1000}k/{small // 1000}k = {ratio:.1f} (linear: {large / small:.0f}; floor <= 12)")
    if ratio > 12:
        raise SystemExit(f"ratio {ratio:.1f} is above 12: the import is not linear")


if __name__ == "__main__":
    main()
