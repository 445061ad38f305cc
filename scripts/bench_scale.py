"""Episodes per minute with 1 local worker, N local workers and Ray (local), on the same job in one run.

Plays the same job (the `noisy` agent on generated TextWorld games, harnesses `base` and
`sentry` by default) once per executor, each into its own fresh run directory, and times
each whole `run()`: worker start-up, Ray's start and shutdown included, game generation
not (the games are generated first). Prints episodes per minute and the speed-up over one
worker, and whether each run's success rates match the one-worker run's (harnesses that
learn online, such as `sentry`, may differ slightly: their playbook grows in another order).

    python scripts/bench_scale.py [--episodes 160] [--trials 18] [--workers 2] [--no-ray]

The default job is 160 tasks x 18 trials x 2 harnesses = 5,760 episodes, about 3.5 minutes
with one worker on a free core. Use `--episodes 10 --trials 1` to check the script. Run it
on otherwise idle cores: the figures are wall-clock; the CPU seconds beside them show
whether the workers had the cores to themselves.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import tempfile
import time
from pathlib import Path

from playground.host.manager import Host
from playground.run.config import DEFAULT_MAX_STEPS, RunConfig
from playground.run.runner import run
from playground.run.validation import resolve_tasks


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (local workers, a local Ray's processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def play(host: Host, config: RunConfig, executor: str, workers: int) -> tuple[float, float, dict]:
    """Run `config` on `executor` with `workers`; return (seconds, CPU seconds, summary)."""
    started, cpu = time.perf_counter(), cpu_seconds()
    summary = run(host, config, workers=workers, executor=executor)
    return time.perf_counter() - started, cpu_seconds() - cpu, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="textworld:custom", help="ENV:TASK_SET [textworld:custom]")
    parser.add_argument("--agent", default="noisy")
    parser.add_argument("--harness", action="append", help="repeatable [base, sentry]")
    parser.add_argument("--episodes", type=int, default=160, help="tasks of the test split [160]")
    parser.add_argument("--trials", type=int, default=18, help="passes over the tasks [18]")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2, help="workers of the parallel runs [2]")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray run")
    parser.add_argument("--out", default=None, help="folder for the run directories [a temporary one]")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    host = Host().load()
    env, _, task_set = args.env.partition(":")
    task_set, split, tasks = resolve_tasks(host, env, task_set or None, "test", args.episodes)
    harnesses = args.harness or ["base", "sentry"]
    chosen = host.envs.get(env).provider.task_sets()[task_set]
    max_steps = args.max_steps or getattr(chosen, "default_max_steps", None) or DEFAULT_MAX_STEPS
    host.envs.get(env).provider.prepare(task_set, tasks, print)  # generation is not what is measured
    runs = [("local", 1), ("local", args.workers)]
    if not args.no_ray:
        if importlib.util.find_spec("ray") is None:
            print("ray: not installed (pip install -e '.[ray]'); leaving out the Ray run")
        else:
            runs.append(("ray", args.workers))
    root = Path(args.out or tempfile.mkdtemp(prefix="bench-scale-"))
    episodes = len(tasks) * args.trials * len(harnesses)
    print(f"job: {env}:{task_set} {split}, {len(tasks)} tasks x {args.trials} trials x {','.join(harnesses)} = "
          f"{episodes} episodes ({args.agent}); run directories under {root}")
    rows = []
    for executor, workers in runs:
        config = RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent=args.agent,
                           harnesses=harnesses, out=str(root / f"{executor}-{workers}"), trials=args.trials,
                           max_steps=max_steps)
        seconds, cpu, summary = play(host, config, executor, workers)
        success = {h: summary["harnesses"][h]["success_rate"] for h in harnesses}
        rows.append({"executor": executor, "workers": workers, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
                     "episodes_per_minute": round(episodes / seconds * 60, 1), "success": success})
    base = rows[0]["episodes_per_minute"]
    for row in rows:
        row["speedup"] = round(row["episodes_per_minute"] / base, 2)
        row["same_success"] = row["success"] == rows[0]["success"]
        # The most the run's CPU time allows on `workers` free cores: Ray's processes are not all counted.
        row["cpu_bound"] = (round(min(row["workers"], row["workers"] * rows[0]["cpu_seconds"] / row["cpu_seconds"]), 2)
                            if row["executor"] == "local" and row["cpu_seconds"] else None)
    if args.json:
        print(json.dumps({"episodes": episodes, "runs": rows}, indent=2))
        return
    print(f"{'executor':<9} {'workers':>7} {'seconds':>8} {'CPU s':>7} {'episodes/min':>13} {'speed-up':>9} "
          f"{'CPU bound':>9}  success (same as 1 worker)")
    for row in rows:
        success = ", ".join(f"{h} {rate:.3f}" for h, rate in row["success"].items())
        bound = f"{row['cpu_bound']}x" if row["cpu_bound"] is not None else "-"
        print(f"{row['executor']:<9} {row['workers']:>7} {row['seconds']:>8} {row['cpu_seconds']:>7} "
              f"{row['episodes_per_minute']:>13} {row['speedup']:>8}x {bound:>9}  {success} "
              f"({'yes' if row['same_success'] else 'no'})")
    print("CPU s: CPU time of the run and its ended child processes. CPU bound: the speed-up that CPU time allows on "
          "free cores\n(workers x CPU s of 1 worker / CPU s); a speed-up well under it means other jobs took the cores.")


if __name__ == "__main__":
    main()
