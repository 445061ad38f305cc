"""A run against a rate-limited server: wall time against the ideal at the server's true limit, and error records.

    python scripts/bench_rate_limit.py [--server-limit 16] [--max-connections 64] [--episodes 128] [--delay 0.5]
                                       [--retry-after S] [--no-baseline]

A scripted OpenAI-compatible server on 127.0.0.1, in its own process, answers at most `--server-limit` requests at
once (each after `--delay` s) and refuses the rest at once with HTTP 429 (with `Retry-After: S` when given). The
script runs `playground run --env tiny --agent llm --harness base --max-connections M` against it (M episodes in
flight, so M requests want the server at once) and prints, side by side:

- wall: the run's seconds, from its first request (the server's clock: the same monotonic clock) to its end;
- ideal: the requests the server answered x `--delay` / `--server-limit` (the server kept full all the time);
- wall / ideal (the issue's floor: at most 1.3), the requests refused, the episodes recorded and the error records
  (episodes recorded with status error, plus those left unfinished: the floor is 0).

With the baseline (the default), the same run is made first with the client as it was before the AIMD limit (a
fixed cap of M, each refused request retried alone with backoff), by patching the limiter in the run's process; and
last, as a reference, with `--max-connections` set to the server's limit (the client told the true limit: what it
costs to play the run on this machine, refusals aside).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The client before the AIMD limit: the cap stays fixed and no refusal is congestion (each spends an attempt).
STATIC = """
from playground.agents import endpoint_limits

def release(self, ticket, status):
    with self._condition:
        self.in_flight -= 1
        self._condition.notify_all()
        return False

endpoint_limits.EndpointLimiter.release = release
"""
RUN = "import sys\nfrom playground.cli.main import cli\nsys.argv[0] = 'playground'\ncli()\n"


def serve(limit: int, delay: float, retry_after: str | None, conn) -> None:
    """Serve a rate-limited scripted model; send its URL, then its counts whenever asked ("stats"), until "stop"."""
    from playground.testing.openai_server import FirstActionModel, ScriptedChatServer
    from playground.testing.rate_limit import AdmitsAtOnce

    admits = AdmitsAtOnce(limit, FirstActionModel(), delay=delay, retry_after=retry_after)
    with ScriptedChatServer(default=admits) as server:
        conn.send(server.base_url)
        while conn.recv() == "stats":
            first = admits.arrivals[0].at if admits.arrivals else None
            last = admits.arrivals[-1].at if admits.arrivals else None
            conn.send({"admitted": admits.admitted, "refused": admits.refused, "peak": admits.peak,
                       "first": first, "last": last})


def one_run(args: argparse.Namespace, static: bool, out: Path, connections: int, label: str) -> dict:
    """Start a server, make the run against it with `connections` (`--max-connections`), and return its figures."""
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(args.server_limit, args.delay, args.retry_after, child),
                                     daemon=True)
    server.start()
    url = parent.recv()
    command = ["run", "--env", "tiny", "--agent", "llm", "--llm-base-url", url, "--model", "m", "--harness", "base",
               "--episodes", str(args.episodes), "--max-steps", str(args.max_steps), "--max-connections",
               str(connections), "--no-response-cache", "--quiet", "--out", str(out)]
    code = (STATIC if static else "") + RUN
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, *command], capture_output=True, text=True, cwd=ROOT)
    ended = time.monotonic()
    parent.send("stats")
    stats = parent.recv()
    parent.send("stop")
    server.join(10)
    lines = (out / "episodes.jsonl").read_text().splitlines() if (out / "episodes.jsonl").exists() else []
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    # error records: those recorded with status error (the summary's per-harness `errors`) and those left unfinished
    errors = sum(int(figures.get("errors") or 0) for figures in (summary.get("harnesses") or {}).values()) \
        + int(summary.get("unfinished") or 0)
    ideal = stats["admitted"] * args.delay / args.server_limit
    return {"client": label, "exit": done.returncode, "wall": ended - (stats["first"] or started), "ideal": ideal,
            "refused": stats["refused"], "answered": stats["admitted"],
            "recorded": len(lines), "errors": errors, "peak": stats["peak"]}


def main() -> None:
    """Parse the options, make the runs and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-limit", type=int, default=16, help="requests the server answers at once")
    parser.add_argument("--max-connections", type=int, default=64, help="the run's --max-connections (in flight)")
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--max-steps", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the server takes per answered request")
    parser.add_argument("--retry-after", default=None, help="the Retry-After header of a refusal (none by default)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="only the AIMD run: skip the client as it was before and the reference told the limit")
    args = parser.parse_args()
    runs = [(False, args.max_connections, "AIMD (now)")]
    if not args.no_baseline:
        runs = [(True, args.max_connections, "fixed cap (before)"), *runs,
                (False, args.server_limit, f"told the limit ({args.server_limit})")]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for number, (static, connections, label) in enumerate(runs):
            rows.append(one_run(args, static, Path(folder) / str(number), connections, label))
            threading.Event().wait(1.0)  # the port and the threads of the last run are gone
    print(f"server: {args.server_limit} at once, {args.delay:g} s each, 429 beyond"
          + (f" (Retry-After: {args.retry_after})" if args.retry_after else "") + f"; run: --max-connections "
          f"{args.max_connections}, {args.episodes} episodes of tiny, {args.max_steps} steps")
    print(f"{'client':22s} {'exit':>4s} {'wall s':>8s} {'ideal s':>8s} {'wall/ideal':>10s} {'refused':>8s} "
          f"{'answered':>8s} {'recorded':>8s} {'errors':>6s}")
    for row in rows:
        print(f"{row['client']:22s} {row['exit']:>4d} {row['wall']:>8.1f} {row['ideal']:>8.1f} "
              f"{row['wall'] / row['ideal'] if row['ideal'] else float('inf'):>10.2f} {row['refused']:>8d} "
              f"{row['answered']:>8d} {row['recorded']:>8d} {row['errors']:>6d}")


if __name__ == "__main__":
    main()
