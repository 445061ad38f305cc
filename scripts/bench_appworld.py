"""AppWorld figures, side by side in one run (needs `playground envs setup appworld`).

1. Server: start time (process start to first answer) and resident memory after start and
   after playing every embedded task.
2. Per task: first and later `/initialize` latency, `/execute` latency per cell (p50/p99),
   `/evaluate` latency, and a checkpoint restore by replay against a fresh initialize.
3. The `noisy` agent's success under `base`, `sentry` and the procedural harnesses
   through the real runner (an instrument: it shows the machinery works on AppWorld).

    python scripts/bench_appworld.py [--episodes 12] [--max-steps 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playground.envs.appworld import setup as appworld_setup
from playground.envs.appworld.env import AppWorldEnv
from playground.envs.appworld.server import AppWorldServer
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run

HARNESSES = ["base", "sentry", "local_induction", "auto_knowledge", "retrieval_fallback"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(call, *args, **kwargs):
    started = time.perf_counter()
    result = call(*args, **kwargs)
    return result, time.perf_counter() - started


def latency(task_ids: list[str]) -> None:
    root = appworld_setup.embedded_root()
    server = AppWorldServer(appworld_setup.venv_python(), root)
    _, start = timed(server.start)
    print(f"server: start {start:.2f} s, memory {server.memory_mb():.0f} MB")
    env = AppWorldEnv(server, root, expert=True)
    inits, cells, evaluates, restores, fresh = [], [], [], [], []
    for task_id in task_ids:
        (_, info), seconds = timed(env.reset, options={"task": task_id})
        inits.append(seconds)
        saved = env.snapshot()
        while True:
            (_, _, done, _, info), elapsed = timed(env.step, info["expert_plan"][0])
            if done:
                evaluates.append(elapsed)
                break
            cells.append(elapsed)
        _, seconds = timed(env.restore, saved)
        restores.append(seconds)
        _, seconds = timed(env.reset, options={"task": task_id})
        fresh.append(seconds)
    env.close()
    print(f"initialize: first {inits[0]:.2f} s, later p50 {statistics.median(inits[1:] or inits):.3f} s")
    print(f"execute (one cell, client round trip incl. /task_completed): p50 {1e3 * statistics.median(cells):.1f} ms, "
          f"p99 {1e3 * percentile(cells, 0.99):.1f} ms")
    print(f"last cell + /evaluate: p50 {1e3 * statistics.median(evaluates):.1f} ms")
    print(f"restore by replay (to the start) p50 {1e3 * statistics.median(restores):.1f} ms vs fresh reset "
          f"p50 {1e3 * statistics.median(fresh):.1f} ms (ratio {statistics.median(restores) / statistics.median(fresh):.2f})")
    print(f"server memory after {len(task_ids)} tasks: {server.memory_mb():.0f} MB")
    server.stop()


def noisy(episodes: int, max_steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        host = Host(strict=True).load()
        ids = host.envs.get("appworld").provider.task_sets()["embedded"].tasks("test", episodes)
        run(host, RunConfig(env="appworld", task_set="embedded", split="test", tasks=ids, agent="noisy",
                            harnesses=HARNESSES, out=str(out), max_steps=max_steps,
                            agent_options={"invalid": 0.3, "malformed": 0.1, "drift": 0.15, "stop": 0.05}))
        summary = json.loads((out / "summary.json").read_text())
    print(f"noisy (invalid 0.3, malformed 0.1, drift 0.15, stop 0.05), {len(ids)} tasks, max {max_steps} cells:")
    for harness in HARNESSES:
        row = summary["harnesses"][harness]
        low, high = row["success_ci95"]
        print(f"  {harness:<19} success {row['success_rate']:.0%} ({low:.0%}-{high:.0%}), "
              f"failed cells/ep {row['invalid_actions_per_episode']:.2f}, detections {row['detected_failures']}, "
              f"resolved {row.get('resolved_share') or 0:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--max-steps", type=int, default=12)
    args = parser.parse_args()
    if not appworld_setup.is_set_up():
        sys.exit(appworld_setup.not_set_up_message())
    ids = Host(strict=True).load().envs.get("appworld").provider.task_sets()["embedded"].tasks("test", args.episodes)
    latency(ids)
    noisy(args.episodes, args.max_steps)


if __name__ == "__main__":
    main()
