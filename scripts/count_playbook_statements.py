"""What one episode costs the PostgreSQL playbook: transactions, statements and rows per episode, and the statements
by kind (a machinery figure: counts, not time).

Plays N `noisy` episodes under Sentry on `tiny` (the episodes of `bench_cluster.py`) with one local worker and the
playbook in a throw-away PostgreSQL server (tests/postgres_server.py, as the tests start one), counting every
statement the playbook's session runs in this process and reading the server's own counters (`pg_stat_database`)
and the CPU time of its processes (Linux's /proc) before and after.

    python scripts/count_playbook_statements.py --episodes 300
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATS = ("xact_commit", "xact_rollback", "tup_returned", "tup_fetched", "tup_inserted", "tup_updated", "tup_deleted")


def server_cpu_s(pid: int) -> float:
    """CPU seconds the PostgreSQL server `pid` and its processes (live and exited) have used, from /proc."""
    def times(stat: str) -> list[str]:
        return stat.rsplit(")", 1)[1].split()  # fields from the state on (the name may hold spaces)

    ticks = 0
    own = times(Path(f"/proc/{pid}/stat").read_text())
    ticks += sum(int(own[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = times(stat.read_text())
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> int:
    """Play the episodes, print the counts per episode."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300, help="episodes of tiny's test split [300]")
    parser.add_argument("--top", type=int, default=12, help="statements by kind to show [12]")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    import psycopg
    from bench_cluster import config, timed

    from playground.plugins.playbook import postgres
    from tests.postgres_server import PASSWORD, PostgresServer

    counted: Counter[str] = Counter()
    execute = postgres.Session.execute

    def counting(session, sql, params=()):
        counted[" ".join(sql.split())[:100]] += 1
        return execute(session, sql, params)

    postgres.Session.execute = counting  # type: ignore[method-assign]
    server = PostgresServer().start()
    os.environ["PGPASSWORD"] = PASSWORD
    url = f"{server.url()}?schema=count_{uuid.uuid4().hex[:8]}"

    def stats() -> tuple:
        with psycopg.connect(server.url(), password=PASSWORD) as connection:
            return connection.execute(f"SELECT {', '.join(STATS)} FROM pg_stat_database "
                                      "WHERE datname = current_database()").fetchone()

    try:
        with tempfile.TemporaryDirectory() as folder:
            before, cpu_before = stats(), server_cpu_s(server.process.pid)
            seconds, _ = timed("local", 1, config(Path(folder) / "run", url, args.episodes))
            cpu = server_cpu_s(server.process.pid) - cpu_before
            time.sleep(1.0)  # the server's statistics are sent every half second or so
            after = stats()
    finally:
        postgres.drop(url)
        server.stop()
    n = args.episodes
    print(f"{n} noisy episodes under sentry on tiny, 1 worker, {seconds:.1f} s; per episode:")
    for name, old, new in zip(STATS, before, after):
        print(f"  {name:<14} {(new - old) / n:8.2f}")
    print(f"  {'server CPU ms':<14} {1000 * cpu / n:8.2f}")
    print(f"  {'statements':<14} {sum(counted.values()) / n:8.2f}  (the playbook's, in this process)")
    for sql, count in counted.most_common(args.top):
        print(f"  {count / n:8.2f}  {sql}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
