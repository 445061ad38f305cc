"""Runs at the model server's speed: worker processes against episodes in flight in one process, side by side.

A scripted OpenAI-compatible server on 127.0.0.1 answers every request after a fixed delay (`--delay`, 0.5 s), with
a reply that depends only on the request (the first valid action), so every configuration plays the same episodes.
Each configuration runs `playground run --agent llm` on the same `--env` tasks under `base` (response cache off) in
its own process tree and reports:

- wall time, and the ideal: requests x delay / requests the configuration can have in flight; also the wall time
  from the first request the server saw (without the process start-up and plugin loading before it);
- the most requests the server saw at once;
- peak RSS of the whole process tree (the run and its worker processes, sampled every 50 ms), and per episode in
  flight.

    python scripts/bench_endpoint.py [--env tiny] [--episodes 64] [--steps 5] [--delay 0.5]
        [--configs workers=1,workers=2,workers=4,in-flight=8,in-flight=32,in-flight=64,in-flight=128] [--out FILE]
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

from playground.run.rundir import load_records
from playground.testing.openai_server import FirstActionModel, ScriptedChatServer

DEFAULT_CONFIGS = "workers=1,workers=2,workers=4,in-flight=8,in-flight=32,in-flight=64,in-flight=128"


def tree_rss_mb(root: int) -> float:
    """The resident memory of a process and all its descendants, in MB (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            statm = Path(f"/proc/{entry}/statm").read_text().split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(statm[1]) * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / 1e6


def measure(config: str, args: argparse.Namespace, url: str, out: Path) -> dict:
    """Run one configuration; return its wall time, peak tree RSS and what it was."""
    kind, value = config.split("=")
    flag = ["--workers", value] if kind == "workers" else ["--in-flight", value]
    command = [sys.executable, "-m", "playground.cli.main", "run", "--env", args.env, "--agent", "llm",
               "--llm-base-url", url, "--model", "m", "--agent-option", "timeout=600", "--harness", "base",
               "--episodes", str(args.episodes), "--max-steps", str(args.steps), "--quiet", "--no-response-cache",
               "--out", str(out), *flag]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0.0
    while process.poll() is None:
        peak = max(peak, tree_rss_mb(process.pid))
        time.sleep(0.05)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"{config}: the run failed: {process.stderr.read() if process.stderr else ''}")
    records = load_records(out)
    return {"config": config, "in_flight": min(int(value), args.episodes), "wall_s": wall, "started_at": start,
            "ended_at": start + wall, "peak_rss_mb": peak,
            "episodes": len(records), "errors": sum(r.status == "error" for r in records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tiny")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--out", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for number, config in enumerate(args.configs.split(",")):
            server_script = FirstActionModel(args.delay)
            with ScriptedChatServer(default=server_script) as server:
                row = measure(config, args, server.base_url, Path(tmp) / f"run-{number}")
            row["requests"], row["peak_requests_at_once"] = server_script.total, server_script.peak
            row["ideal_s"] = row["requests"] * args.delay / row["in_flight"]
            row["from_first_request_s"] = row.pop("ended_at") - (server_script.first or row["started_at"])
            row.pop("started_at")
            rows.append(row)
            print(f"{config:<14} requests {row['requests']:>4}  at once {row['peak_requests_at_once']:>3}  "
                  f"wall {row['wall_s']:>7.1f} s  ideal {row['ideal_s']:>6.1f} s  "
                  f"wall/ideal {row['wall_s'] / row['ideal_s']:>5.2f} "
                  f"(from the first request {row['from_first_request_s'] / row['ideal_s']:>5.2f})  peak RSS {row['peak_rss_mb']:>6.0f} MB "
                  f"({row['peak_rss_mb'] / row['in_flight']:.1f} MB per episode in flight)  "
                  f"episodes/min {row['episodes'] / row['wall_s'] * 60:>6.1f}  errors {row['errors']}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"env": args.env, "delay": args.delay, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
