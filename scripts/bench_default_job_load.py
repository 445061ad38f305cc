"""The default job idle and beside busy loops this script starts itself: the wall time of README's `playground run`
(the embedded SmolLM2-135M, constrained, 2 `textworld:easy` games, `base` and `sentry`, no response cache) with no
load of its own, then beside `--busy` busy-loop processes; their ratio, and Sentry/base seconds per step in each
(machinery figures). `threads=auto` picks the llama.cpp threads from the load it sees (`threads_by_contention`);
the lock records its choice, printed here.

    python scripts/bench_default_job_load.py [--busy 2] [--games 2] [--settle 20]

Floors it measures (issue: fast on shared cores): loaded ≤ 2x idle; Sentry/base ≤ 2.0 seconds per step idle.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playground.run.lock import read_lock
from playground.run.rundir import load_records


def play(games: int) -> dict:
    """One default job into a fresh folder; its wall seconds, seconds per step by harness and the threads chosen."""
    out = Path(tempfile.mkdtemp(prefix="bench-default-job-")) / "run"
    load = os.getloadavg()[0]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "playground.cli.main", "run", "--episodes", str(games), "--quiet",
                    "--no-response-cache", "--out", str(out)], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    steps: dict[str, list[float]] = {}
    for record in load_records(out):
        totals = steps.setdefault(record.harness, [0.0, 0.0])
        totals[0] += record.seconds
        totals[1] += record.steps
    per_step = {harness: seconds / count for harness, (seconds, count) in steps.items()}
    agent = read_lock(out / "lock.json").get("agent", {})
    return {"wall_s": wall, "load_before": load, "seconds_per_step": per_step,
            "sentry_over_base": per_step["sentry"] / per_step["base"], "threads": agent.get("threads")}


def main() -> None:
    """Idle, then loaded; print both and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds the busy loops run before the job")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    idle = play(args.games)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        time.sleep(args.settle)
        loaded = play(args.games)
    finally:
        for loop in loops:
            loop.kill()
    result = {"idle": idle, f"{args.busy} busy": loaded, "loaded_over_idle": loaded["wall_s"] / idle["wall_s"]}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for name, row in (("idle", idle), (f"{args.busy} busy", loaded)):
        print(f"{name:8} wall {row['wall_s']:7.1f} s  load before {row['load_before']:4.1f}  Sentry/base per step "
              f"{row['sentry_over_base']:.2f}  threads {row['threads']}")
    print(f"loaded/idle wall: {result['loaded_over_idle']:.2f}")


if __name__ == "__main__":
    main()
