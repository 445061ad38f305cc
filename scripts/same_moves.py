"""How many games each harness of a run played with exactly the actions `base` played.

    python scripts/same_moves.py RUN_DIR [--base base]

Reads each record's trace (its `step` events) and prints, per harness, the games whose action
sequence equals the base harness's on the same task, out of the games both played: how often a
harness's guidance changed what the agent did at all (docs/results/sentry.md, the Sentry tables).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground.core.events import StepEvent  # noqa: E402
from playground.core.records import EpisodeRecord  # noqa: E402
from playground.run.rundir import load_records, record_trace  # noqa: E402
from playground.run.traces import read_events  # noqa: E402


def actions(run: Path, record: EpisodeRecord) -> list[str]:
    """The actions an episode sent to the env, in order."""
    return [event.action for event in read_events(record_trace(run, record)) if isinstance(event, StepEvent)]


def main() -> None:
    """Print `harness same/common` for every harness but the base one."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--base", default="base")
    args = parser.parse_args()
    run = Path(args.run_dir)
    by_harness: dict[str, dict[str, EpisodeRecord]] = {}
    for record in load_records(run):
        by_harness.setdefault(record.harness, {})[record.task_id] = record
    base = by_harness.get(args.base, {})
    for harness, records in by_harness.items():
        if harness == args.base:
            continue
        common = [task for task in records if task in base]
        same = sum(actions(run, records[task]) == actions(run, base[task]) for task in common)
        print(f"{harness} {same}/{len(common)}")


if __name__ == "__main__":
    main()
