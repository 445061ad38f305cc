"""Sentry on a three-node local Ray cluster with a PostgreSQL playbook beside the same episodes with `--workers` on one
node and an SQLite playbook, in one run: throughput of each, their ratio (issue 55's floor: >= 0.8x) and exactly-once.

Plays N episodes of the `noisy` agent (repeat=0.3, stall=0.2: Sentry repairs, verifies and learns on most of them) on
the `tiny` env's test split under the `sentry` harness twice, each into a fresh run directory:

1. `local`: `--executor local --workers W` with the playbook in an SQLite file (one machine's default);
2. `ray`: `--executor ray --workers W` on a `ray.cluster_utils.Cluster` started here: a head without CPUs and W
   one-CPU worker nodes, each its own raylet (three nodes for W=2), the playbook in a PostgreSQL schema.

Each figure is the whole `run()`: workers' start-up, the playbook's writes and the driver's writing of records and
traces included; the cluster's and the server's start-up not (a cluster is already up when a run joins it). Then each
run is checked from its run directory and playbook alone (`tests/exactly_once.py`): records twice (0 expected),
lessons whose provenance names no finished episode or whose counters differ from what the traces say (0 expected).

    python scripts/bench_cluster.py --episodes 10000            # the issue's figure
    python scripts/bench_cluster.py --episodes 200              # a check of the script, about a minute
    python scripts/bench_cluster.py --url 'postgresql://me@db/lessons'   # a server of yours (PGPASSWORD)
    python scripts/bench_cluster.py --episodes 3000 --split-costs  # also `local` with the PostgreSQL playbook
    python scripts/bench_cluster.py --episodes 10000 --split-costs --rounds 2  # twice, the second time in reverse

`--split-costs` adds a third run between the two, `local-pg`: `--workers W` on one node with the playbook in
PostgreSQL, so the gap divides into what the server costs (local-pg against local) and what Ray's nodes cost (ray
against local-pg).

Without `--url` it starts a throw-away PostgreSQL as the tests do (tests/postgres_server.py: the pgserver wheel of the
`test` extra); the playbook's schema is dropped at the end either way. Needs the `ray` and `postgres` extras. The
figures are wall-clock on whatever cores the machine has: run it on otherwise idle ones, and give the core count.
Beside them, CPU milliseconds per episode: `cpu ms/ep` of this process and a local run's worker processes (a Ray
run's workers are the raylets' children, not counted), `server ms/ep` of the PostgreSQL server it started, and
`machine ms/ep` of every process on the machine (Ray's nodes, the server, anything else running: the figure to compare
between runs on otherwise idle cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOISE = {"repeat": 0.3, "stall": 0.2}
OBJECT_STORE = 100 * 1024**2  # bytes per node: a record and its traces are a few kB


def config(out: Path, playbook: str, episodes: int) -> Any:
    """The run both executors play: `episodes` tasks of tiny's test split, noisy agent, sentry."""
    from playground.host.manager import Host
    from playground.run.config import RunConfig
    from playground.run.validation import resolve_tasks

    task_set, split, tasks = resolve_tasks(Host().load(), "tiny", None, "test", episodes)
    return RunConfig(env="tiny", task_set=task_set, split=split, tasks=list(tasks), agent="noisy",
                     harnesses=["sentry"], out=str(out), agent_options=NOISE, playbook=playbook)


def timed(executor: str, workers: int, run_config: Any) -> tuple[float, dict]:
    """(seconds, summary) of one whole run."""
    from playground.host.manager import Host
    from playground.run.runner import run

    host = Host().load()
    started = time.perf_counter()
    summary = run(host, run_config, executor=executor, workers=workers)
    return time.perf_counter() - started, summary


def process_cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (a local run's workers, once it is over)."""
    own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def machine_cpu_s() -> float:
    """CPU seconds every process of this machine has used since it started, all cores together (Linux's /proc/stat:
    user, nice, system, irq, softirq and steal time); 0.0 where there is no /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    busy = sum(int(fields[i]) for i in (0, 1, 2, 5, 6, 7) if i < len(fields))
    return busy / os.sysconf("SC_CLK_TCK")


def checked(playbook: str, out: Path) -> dict:
    """The exactly-once figures of one run: records, duplicate records, lessons, problems (tests/exactly_once.py)."""
    from playground.run.rundir import load_records
    from tests.exactly_once import problems

    records = load_records(out)
    lessons, found = problems(playbook, [out])
    return {"records": len(records), "duplicate_records": len(records) - len({r.key for r in records}),
            "lessons": lessons, "problems": len(found), "first_problems": found[:5]}


def start_cluster(workers: int) -> Any:
    """A head without CPUs and `workers` one-CPU worker nodes on this machine, joined by this process."""
    import ray
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                          "object_store_memory": OBJECT_STORE})
    for _ in range(workers):
        nodes.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
    nodes.wait_for_nodes()
    ray.init(address=nodes.address, include_dashboard=False, logging_level="WARNING")
    return nodes


def main() -> int:
    """Start the server, play both runs, check them and print the table (and JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000, help="tasks of tiny's test split (at most 10,000)")
    parser.add_argument("--workers", type=int, default=2, help="local workers, and worker nodes of one CPU [2]")
    parser.add_argument("--url", default=None, help="a PostgreSQL server's URL (default: start one)")
    parser.add_argument("--out", default=None, help="folder for the run directories [a temporary one]")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--rounds", type=int, default=1,
                        help="play the runs this many times in turn, each with fresh playbooks, every second round in "
                             "the opposite order (the ratio of each, and their median: a drift in the machine's speed "
                             "shows as a spread, and no run always plays last) [1]")
    parser.add_argument("--split-costs", action="store_true",
                        help="also play `local` with the PostgreSQL playbook (the server's cost apart from Ray's)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    server = None
    args.server_pid = None
    if args.url is None:
        from tests.postgres_server import PASSWORD, PostgresServer

        server = PostgresServer().start()
        args.server_pid = server.process.pid if server.process else None
        os.environ["PGPASSWORD"] = PASSWORD  # before the cluster starts: every node's workers inherit it
        args.url = server.url()
    url = f"{args.url}{'&' if '?' in args.url else '?'}schema=bench_{uuid.uuid4().hex[:12]}"

    rounds: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(dir=args.out) as folder:
            for number in range(args.rounds):
                rounds.append(play_round(Path(folder) / f"round-{number + 1}", f"{url}_{number + 1}", args,
                                         reverse=number % 2 == 1))
    finally:
        if server is not None:
            server.stop()
    print(f"{args.episodes:,} noisy episodes under sentry on tiny, {args.workers} workers, {os.cpu_count()} cores "
          f"(a machinery figure){f', {args.rounds} rounds' if args.rounds > 1 else ''}")
    print(f"{'run':<52} {'seconds':>8} {'episodes/s':>10} {'records':>8} {'dup':>4} {'lessons':>8} {'problems':>8} "
          f"{'cpu ms/ep':>9} {'server ms/ep':>12} {'machine ms/ep':>13}")
    labels = {"local": f"local --workers {args.workers}, SQLite",
              "local-pg": f"local --workers {args.workers}, PostgreSQL",
              "ray": f"ray, {args.workers + 1} nodes, PostgreSQL"}
    exact = True
    for number, figures in enumerate(rounds, start=1):
        runs = [name for name in ("local", "local-pg", "ray") if name in figures]
        for name in runs:
            row = figures[name]
            label = labels[name] + (f" (round {number}{', reversed' if figures['order'] == 'reversed' else ''})"
                                    if args.rounds > 1 else "")
            print(f"{label:<52} {row['seconds']:8.1f} {row['episodes_per_s']:10.1f} {row['records']:8,} "
                  f"{row['duplicate_records']:4} {row['lessons']:8,} {row['problems']:8} {_ms(row['cpu_ms']):>9} "
                  f"{_ms(row['server_cpu_ms']):>12} {_ms(row['machine_cpu_ms']):>13}")
            exact = exact and row["duplicate_records"] == 0 and row["problems"] == 0 and row["unfinished"] == 0 \
                and row["records"] == args.episodes
        print(f"throughput ratio ray/local: {figures['ratio']:.2f}x (floor 0.8x)")
        if "local-pg" in figures:
            print(f"of which the PostgreSQL playbook (local-pg/local): {figures['pg_cost']:.2f}x, Ray's nodes "
                  f"(ray/local-pg): {figures['nodes_cost']:.2f}x")
        for name in runs:
            for problem in figures[name]["first_problems"]:
                print(f"{name}: {problem}")
    if args.rounds > 1:
        ratios = sorted(figures["ratio"] for figures in rounds)
        print(f"ratio by round: {', '.join(f'{r:.2f}x' for r in ratios)}; median {statistics.median(ratios):.2f}x")
    if args.json:
        print(json.dumps(rounds[0] if args.rounds == 1 else rounds, indent=2))
    return 0 if exact else 1


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def play_round(folder: Path, url: str, args: argparse.Namespace, reverse: bool = False) -> dict[str, Any]:
    """One round: `local` (SQLite), `local-pg` with --split-costs, then `ray` on a cluster started for it and shut down
    right after (so its raylets take no CPU from the one-node runs); with `reverse`, the same runs in the opposite
    order (ABBA over rounds: on a machine whose speed drifts, each run plays first as often as last). Each run has a
    fresh run directory and playbook. Returns each run's figures, the ratio and, with --split-costs, the two costs it
    divides into."""
    from count_playbook_statements import server_cpu_s

    from playground.plugins.playbook.postgres import drop

    figures: dict[str, Any] = {"episodes": args.episodes, "workers": args.workers, "cores": os.cpu_count(),
                               "order": "reversed" if reverse else "forward"}
    plays = [("local", "local", str(folder / "local.sqlite"))]
    if args.split_costs:
        plays.append(("local-pg", "local", f"{url}_local"))
    plays.append(("ray", "ray", url))
    for name, executor, book in reversed(plays) if reverse else plays:
        nodes = start_cluster(args.workers) if executor == "ray" else None
        try:
            watched = args.server_pid if "://" in book else None  # the server's CPU, where this script started it
            cpu, server_cpu, machine = process_cpu_s(), server_cpu_s(watched) if watched else 0.0, machine_cpu_s()
            seconds, summary = timed(executor, args.workers, config(folder / name, book, args.episodes))
            cpu, server_cpu = process_cpu_s() - cpu, server_cpu_s(watched) - server_cpu if watched else None
            machine = machine_cpu_s() - machine
            figures[name] = {"seconds": seconds, "unfinished": summary["unfinished"], **checked(book, folder / name)}
            episodes = max(1, figures[name]["records"])
            # per episode, in ms: this process and a local run's workers (a Ray run's are not its children); the server
            figures[name]["cpu_ms"] = cpu * 1000 / episodes if executor == "local" else None
            figures[name]["server_cpu_ms"] = server_cpu * 1000 / episodes if server_cpu is not None else None
            figures[name]["machine_cpu_ms"] = machine * 1000 / episodes if machine else None
        finally:
            if "://" in book:
                drop(book)
            if nodes is not None:
                import ray

                ray.shutdown()
                nodes.shutdown()
    for name, _, _ in plays:
        figures[name]["episodes_per_s"] = figures[name]["records"] / figures[name]["seconds"]
    figures["ratio"] = figures["ray"]["episodes_per_s"] / figures["local"]["episodes_per_s"]
    if args.split_costs:
        figures["pg_cost"] = figures["local-pg"]["episodes_per_s"] / figures["local"]["episodes_per_s"]
        figures["nodes_cost"] = figures["ray"]["episodes_per_s"] / figures["local-pg"]["episodes_per_s"]
    return figures


if __name__ == "__main__":
    sys.exit(main())
