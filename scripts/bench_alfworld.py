"""Benchmark of the ALFWorld env and DARC's action-validity guard, figures side by side.

    python scripts/bench_alfworld.py [--games 30] [--prior-games 60] [--max-steps 50]

On generated `valid_unseen` games (and, when ALFWORLD_DATA points at the official data,
on the official `valid_unseen` games too) it measures, in one run:

- guard recall@12: share of the steps of expert trajectories where the expert's next
  command is among the guard's top 12 (with the train priors, and without any priors);
- forced top-1 control: success when the guard's top-1 command is played every step,
  with no agent at all;
- invalid actions per episode (and success) of the `noisy` agent under harness `base`
  (no guard) and `alfworld-guard`;
- latency: reset and step of the env (median), and generation of one game.

The `noisy` agent is a failure-injection instrument: its figures test the machinery,
not any LLM agent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playground.envs.alfworld.data import env_data_root
from playground.envs.alfworld.guard import NO_PRIORS, Guard
from playground.envs.alfworld.priors import PRIOR_GAMES, load_priors
from playground.envs.alfworld.provider import AlfWorldProvider
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run

TOP_K = 12


def load_host() -> Host:
    """The host with the alfworld plugin (given explicitly while it is not a built-in)."""
    return Host().load()


def recall(provider: AlfWorldProvider, task_set: str, tasks: list[str], guards: dict[str, Guard],
           max_steps: int) -> dict[str, float]:
    """Share of expert steps whose command is in each guard's top 12 (one expert pass per task)."""
    env = provider.make(task_set, expert=True)
    hits = {name: 0 for name in guards}
    steps = 0
    try:
        for task in tasks:
            observation, info = env.reset(options={"task": task})
            first, history = observation, []
            while not info["won"] and info["expert_plan"] and len(history) < max_steps:
                expert = info["expert_plan"][0]
                for name, guard in guards.items():
                    top = guard.top(info["goal"], info["admissible_actions"], history, observation, first, TOP_K)
                    hits[name] += expert in top
                steps += 1
                observation, _, _, _, info = env.step(expert)
                history.append((expert, observation, info["valid_action"]))
    finally:
        env.close()
    return {name: hits[name] / steps if steps else float("nan") for name in guards} | {"steps": steps}


def forced_top1(provider: AlfWorldProvider, task_set: str, tasks: list[str], guard: Guard, max_steps: int) -> float:
    """Success rate when the guard's top-1 command is played every step, with no agent."""
    env = provider.make(task_set)
    won = 0
    try:
        for task in tasks:
            observation, info = env.reset(options={"task": task})
            first, history = observation, []
            while not info["won"] and len(history) < max_steps and info["admissible_actions"]:
                action = guard.top(info["goal"], info["admissible_actions"], history, observation, first, 1)[0]
                observation, _, _, _, info = env.step(action)
                history.append((action, observation, info["valid_action"]))
            won += bool(info["won"])
    finally:
        env.close()
    return won / len(tasks) if tasks else float("nan")


def noisy_runs(host: Host, task_set: str, tasks: list[str], max_steps: int, prior_games: int,
               out: Path) -> dict[str, dict]:
    """Success and invalid actions per episode of the noisy agent, without and with the guard."""
    config = RunConfig(env="alfworld", task_set=task_set, split="valid_unseen", tasks=tasks, agent="noisy",
                       harnesses=["base", "alfworld-guard"], out=str(out), max_steps=max_steps,
                       params={"prior_games": prior_games})
    return run(host, config)["harnesses"]


def latency(provider: AlfWorldProvider, task_set: str, tasks: list[str], steps_per_task: int = 15) -> dict[str, float]:
    """Median seconds of a first reset (game load included), a repeated reset, and a step (random
    admissible commands), without and with the expert."""
    import random

    rng = random.Random(0)
    first_resets, resets, steps, expert_steps = [], [], [], []
    for expert, times in ((False, steps), (True, expert_steps)):
        env = provider.make(task_set, expert=expert)
        try:
            for task in tasks:
                started = time.perf_counter()
                env.reset(options={"task": task})
                if not expert:
                    first_resets.append(time.perf_counter() - started)
                started = time.perf_counter()
                _, info = env.reset(options={"task": task})
                if not expert:
                    resets.append(time.perf_counter() - started)
                for _ in range(steps_per_task):
                    if info["won"]:
                        break
                    action = rng.choice(info["admissible_actions"])
                    started = time.perf_counter()
                    _, _, _, _, info = env.step(action)
                    times.append(time.perf_counter() - started)
        finally:
            env.close()
    return {"load+reset s": statistics.median(first_resets), "reset s": statistics.median(resets),
            "step ms": 1000 * statistics.median(steps), "step ms (expert)": 1000 * statistics.median(expert_steps)}


def generation_seconds(games: int) -> float:
    """Seconds per generated game (expert check included), in a fresh temporary cache."""
    from playground.envs.alfworld.generate import list_generated

    before = os.environ.get("PLAYGROUND_CACHE")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PLAYGROUND_CACHE"] = tmp
        try:
            started = time.perf_counter()
            list_generated("valid_seen", games)
            return (time.perf_counter() - started) / games
        finally:
            if before is None:
                os.environ.pop("PLAYGROUND_CACHE", None)
            else:
                os.environ["PLAYGROUND_CACHE"] = before


def measure(host: Host, task_set: str, tasks: list[str], guards: dict[str, Guard], args, out: Path) -> dict:
    """Every figure for one task set."""
    provider = AlfWorldProvider()
    started = time.perf_counter()
    figures = {"tasks": len(tasks)}
    figures.update({f"recall@12 {k}": v for k, v in recall(provider, task_set, tasks, guards, args.max_steps).items()})
    figures["forced top-1 success"] = forced_top1(provider, task_set, tasks, guards["train priors"], args.max_steps)
    for harness, summary in noisy_runs(host, task_set, tasks, args.max_steps, args.prior_games, out / task_set).items():
        figures[f"noisy {harness}: invalid/episode"] = summary["invalid_actions_per_episode"]
        figures[f"noisy {harness}: success"] = summary["success_rate"]
    figures.update(latency(provider, task_set, tasks[: args.latency_games]))
    figures["bench s"] = time.perf_counter() - started
    return figures


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the figures side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=30, help="valid_unseen games per task set")
    parser.add_argument("--prior-games", type=int, default=PRIOR_GAMES, help="generated train games for the priors")
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--latency-games", type=int, default=6)
    parser.add_argument("--generation-games", type=int, default=6, help="games generated afresh to time generation")
    args = parser.parse_args(argv)

    host = load_host()
    provider = AlfWorldProvider()
    started = time.perf_counter()
    priors = load_priors(args.prior_games)
    print(f"priors from {priors.games} generated train games: {time.perf_counter() - started:.1f}s", file=sys.stderr)
    guards = {"train priors": Guard(priors), "no priors": Guard(NO_PRIORS)}
    columns = {}
    with tempfile.TemporaryDirectory() as out:
        sets = ["generated"] + (["official"] if env_data_root() is not None else [])
        for task_set in sets:
            tasks = provider.task_sets()[task_set].tasks("valid_unseen", args.games)
            columns[task_set] = measure(host, task_set, tasks, guards, args, Path(out))
    columns["generated"]["generation s/game"] = generation_seconds(args.generation_games)

    rows = list(dict.fromkeys(k for c in columns.values() for k in c))
    width = max(map(len, rows))
    print(f"{'figure':<{width}}  " + "  ".join(f"{name:>12}" for name in columns))
    for row in rows:
        cells = []
        for c in columns.values():
            value = c.get(row)
            text = "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
            cells.append(f"{text:>12}")
        print(f"{row:<{width}}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
