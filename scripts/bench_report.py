"""How `playground view` and `playground report` scale: time to first screen on 10,000 episodes, report build on 1,000.

Plays a small real run (the `tiny` env, the `noisy` agent, harnesses base and sentry) and
copies its episodes, records and traces under new task ids until a run directory holds
the number of episodes asked for (a synthetic run: real event streams, many of them).
Then, each `--repeats` times, in a fresh process as a user would run them:

- `playground view DIR` (the first page of the list) on the large run: time to first screen;
- `playground view DIR --label repetition_or_looping` (a filtered list) and
  `playground view DIR --episode KEY` (one episode step by step) on the large run;
- `playground report DIR` on the report-sized run: time to build and write the HTML, and its size.

The medians are printed, with `python -c "import playground.cli.main"` (start-up and
imports alone) for reference.

    python scripts/bench_report.py [--view-episodes 10000] [--report-episodes 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playground.run.rundir import load_records, record_trace

SEED_RUN = ["--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=0.3", "--agent-option", "repeat=0.2",
            "--agent-option", "stop=0.05", "--harness", "base", "--harness", "sentry", "--episodes", "25", "--quiet"]


def playground(*args: str) -> float:
    """Run `playground ARGS` in a fresh process (output discarded); return its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "playground.cli.main", *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"playground {' '.join(args)} failed: {done.stderr[-2000:]}")
    return elapsed


def grow(seed_run: Path, out: Path, episodes: int) -> None:
    """Write a run directory of `episodes` episodes by copying the seed run's records and traces under new task ids."""
    config = json.loads((seed_run / "config.json").read_text())
    records = load_records(seed_run)
    out.mkdir(parents=True)
    tasks: list[str] = []
    lines = []
    copy = 0
    while len(lines) < episodes:
        for record in records:
            if len(lines) >= episodes:
                break
            task = f"{record.task_id}-c{copy}"
            trace = f"traces/{record.harness}/{task}.jsonl"
            target = out / trace
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record_trace(seed_run, record), target)
            copied = record.model_copy(update={"task_id": task, "key": f"{record.harness}/{task}",
                                               "episode_id": f"{record.episode_id}-c{copy}", "trace": trace})
            lines.append(json.dumps(copied.as_json()) + "\n")
            if task not in tasks:
                tasks.append(task)
        copy += 1
    (out / "episodes.jsonl").write_text("".join(lines))
    (out / "config.json").write_text(json.dumps({**config, "tasks": tasks}, indent=2))
    for name in ("summary.json", "lock.json"):
        if (seed_run / name).exists():
            shutil.copyfile(seed_run / name, out / name)


def median_of(repeats: int, *args: str) -> float:
    return statistics.median(playground(*args) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--view-episodes", type=int, default=10_000)
    parser.add_argument("--report-episodes", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        seed_run = root / "seed"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "playground.cli.main", "run", *SEED_RUN, "--out", str(seed_run)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        large, small = root / "large", root / "small"
        grow(seed_run, large, args.view_episodes)
        grow(seed_run, small, args.report_episodes)
        print(f"set-up: seed run and synthetic run directories in {time.perf_counter() - started:.1f} s")
        key = load_records(large)[-1].key
        startup = statistics.median(
            _timed([sys.executable, "-c", "import playground.cli.main"]) for _ in range(args.repeats))
        rows = [
            ("python -c 'import playground.cli.main' (start-up)", "-", startup, ""),
            ("view DIR (first screen)", args.view_episodes, median_of(args.repeats, "view", str(large)), ""),
            ("view DIR --label repetition_or_looping", args.view_episodes,
             median_of(args.repeats, "view", str(large), "--label", "repetition_or_looping"), ""),
            ("view DIR --episode KEY", args.view_episodes, median_of(args.repeats, "view", str(large), "--episode", key),
             ""),
        ]
        report = root / "report.html"
        seconds = statistics.median(playground("report", str(small), "--out", str(report), "--force")
                                    for _ in range(args.repeats))
        rows.append(("report DIR --out report.html", args.report_episodes, seconds,
                     f"{report.stat().st_size / 1e6:.2f} MB"))
    width = max(len(r[0]) for r in rows)
    print(f"{'command'.ljust(width)}  episodes  median s  notes")
    for name, episodes, value, note in rows:
        print(f"{name.ljust(width)}  {str(episodes).rjust(8)}  {value:8.2f}  {note}")
    print(f"(median of {args.repeats} runs each, fresh process each time)")


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
