"""Latency of the ScienceWorld env against raw `scienceworld` calls, and the JVM's memory, in one run.

    python scripts/bench_scienceworld.py [--tasks 5] [--variations 2]

On the first `--variations` test variations of the first `--tasks` tasks (every sixth of
the 30, so the task families differ) it plays the gold path twice on the process's one
JVM: with raw `scienceworld` calls (`load(..., generateGoldPath=True)` + `reset()`, then
`step()`), and through the playground env made with `expert=True` (`reset`, then `step`
on the expert plan). It prints median and 90th percentile latencies of both, the JVM's
start time, and the resident memory (VmRSS) of the java process at the end.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from playground.envs.scienceworld import ScienceWorldProvider
from playground.envs.scienceworld.engine import engine, java_pid
from playground.envs.scienceworld.tasks import TASKS, task_id, variations


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"median {1000 * statistics.median(values):.0f} ms, p90 {1000 * p90:.0f} ms (n={len(values)})"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--variations", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    sw = engine()
    start_s = time.perf_counter() - started
    episodes = [(t, v) for t in TASKS[::6][: args.tasks] for v in list(variations(t, "test"))[: args.variations]]
    raw_reset, raw_step, env_reset, env_step = [], [], [], []
    env = ScienceWorldProvider().make("all", expert=True)
    wins = 0
    for name, variation in episodes:
        t = time.perf_counter()
        sw.load(name, variation, "", generateGoldPath=True)
        sw.reset()
        raw_reset.append(time.perf_counter() - t)
        for action in sw.get_gold_action_sequence():
            t = time.perf_counter()
            _, _, done, _ = sw.step(action)
            raw_step.append(time.perf_counter() - t)
            if done:
                break
        t = time.perf_counter()
        _, info = env.reset(options={"task": task_id(name, variation)})
        env_reset.append(time.perf_counter() - t)
        terminated = False
        while not terminated and info["expert_plan"]:
            t = time.perf_counter()
            _, _, terminated, _, info = env.step(info["expert_plan"][0])
            env_step.append(time.perf_counter() - t)
        wins += bool(info["won"])
    pid = java_pid()
    print(f"episodes: {len(episodes)} ({args.tasks} tasks x {args.variations} test variations); "
          f"expert won {wins}/{len(episodes)} through the env")
    print(f"JVM start: {start_s:.1f} s; java RSS at the end: {_rss_mb(pid) if pid else float('nan'):.0f} MB")
    print(f"reset, raw load+reset: {_ms(raw_reset)}")
    print(f"reset, env:            {_ms(env_reset)}")
    print(f"step, raw:             {_ms(raw_step)}")
    print(f"step, env:             {_ms(env_step)}")


if __name__ == "__main__":
    main()
