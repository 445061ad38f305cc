"""What runs that share a playbook must leave in it, checked from their run directories alone: exactly-once.

`problems(playbook, outs)` reads the finished episodes of each run directory in `outs` (their records and traces) and
the playbook (a file or a PostgreSQL URL) and lists every way they disagree:

- a record twice in one run (the same key);
- a lesson whose provenance (run, episode) names no finished episode of those runs (an unfinished play's lesson that
  was not taken back), and two lessons with one origin (run, episode, attempt, step);
- a lesson a trace reports that the playbook lacks;
- a lesson's counters (`retrieved`, `verified`, `helped`) other than what the traces say: one retrieval per lesson
  an intervention listed at a step, one outcome per lesson of a repair a verifier judged (resolved or unresolved),
  helped when resolved, each counted once per (run, episode, step) as the playbook keys them.

Used by the Ray cluster tests and `scripts/bench_cluster.py`. Episode records are read as `EpisodeRecord`s.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Iterable

COUNTERS = ("retrieved", "verified", "helped")


def from_traces(outs: Iterable[Path]) -> tuple[list[str], set[tuple[str, str]], Counter, set[int]]:
    """(records seen twice, the finished (run, episode) pairs, the counters the traces imply by (lesson, counter),
    the lesson ids the traces report) of the runs in `outs`."""
    from playground.run.rundir import load_records

    twice: list[str] = []
    finished: set[tuple[str, str]] = set()
    retrieved: set[tuple[str, str, int, int]] = set()
    outcomes: dict[tuple[str, str, int, int], bool] = {}
    traced: set[int] = set()
    for out in outs:
        run_id = json.loads((out / "config.json").read_text())["run_id"]
        keys = Counter()
        for record in load_records(out):
            keys[record.key] += 1
            episode = str(record.episode_id)
            finished.add((run_id, episode))
            lessons_at: dict[int, list[int]] = {}
            for line in (out / str(record.trace)).read_text().splitlines():
                event = json.loads(line)
                if event["type"] == "intervention" and (event.get("details") or {}).get("lessons"):
                    lessons_at[event["step"]] = event["details"]["lessons"]
                    retrieved.update((run_id, episode, event["step"], lesson) for lesson in lessons_at[event["step"]])
                elif event["type"] == "verification" and event["verdict"] in ("resolved", "unresolved"):
                    for lesson in lessons_at.get(event["repair_step"], []):
                        outcomes.setdefault((run_id, episode, event["repair_step"], lesson),
                                            event["verdict"] == "resolved")
                elif event["type"] == "lesson":
                    traced.add(event["id"])
        twice += [f"{out.name}: {key}" for key, seen in keys.items() if seen > 1]
    counters: Counter = Counter()
    for *_, lesson in retrieved:
        counters[lesson, "retrieved"] += 1
    for (*_, lesson), helped in outcomes.items():
        counters[lesson, "verified"] += 1
        counters[lesson, "helped"] += helped
    return twice, finished, counters, traced


def problems(playbook: str | Path, outs: Iterable[Path]) -> tuple[int, list[str]]:
    """(the playbook's lessons, what breaks exactly-once between it and the runs in `outs`: empty when nothing)."""
    from playground.plugins.playbook.store import Playbook

    twice, finished, counters, traced = from_traces(list(outs))
    with Playbook(playbook, read_only=True) as book:
        lessons = list(book.all())
    found = [f"record twice: {key}" for key in twice]
    origins = Counter((str(lesson.provenance.get("run")), str(lesson.provenance.get("episode")),
                       lesson.provenance.get("attempt"), lesson.provenance.get("step")) for lesson in lessons)
    found += [f"two lessons from one origin: {origin}" for origin, seen in origins.items() if seen > 1]
    for lesson in lessons:
        origin = (lesson.provenance.get("run"), lesson.provenance.get("episode"))
        if origin not in finished:
            found.append(f"lesson {lesson.id} comes from no finished episode: {origin}")
        for name in COUNTERS:
            if getattr(lesson, name) != counters[lesson.id, name]:
                found.append(f"lesson {lesson.id}: {name} {getattr(lesson, name)}, the traces say "
                             f"{counters[lesson.id, name]}")
    found += [f"lesson {lesson} is in a trace, not in the playbook" for lesson in
              sorted(traced - {lesson.id for lesson in lessons})]
    return len(lessons), found
