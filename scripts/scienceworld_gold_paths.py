"""Does ScienceWorld's own gold path win? Load one task variation N times and play each load's gold path.

    python scripts/scienceworld_gold_paths.py [--task mendelian-genetics-known-plant-90] [--loads 6]

Raw `scienceworld` calls on the process's one JVM, no env code: `load(..., generateGoldPath=True)` and
`reset()`, then the load's `get_gold_action_sequence()` played to its end. One line per load: the path's
length, its focus actions, the final score, and whether the path is the first load's. The engine's API takes no
seed, so the paths (and, for Mendelian genetics, the outcome) vary from load to load.
"""

from __future__ import annotations

import argparse

from playground.envs.scienceworld.engine import engine
from playground.envs.scienceworld.tasks import parse_task_id


def main() -> None:
    """Play `--loads` loads' gold paths of `--task` and print what each came to."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="mendelian-genetics-known-plant-90", help="<task>-<variation>")
    parser.add_argument("--loads", type=int, default=6)
    args = parser.parse_args()
    parsed = parse_task_id(args.task)
    if parsed is None:
        parser.error(f"--task {args.task!r} is not '<task>-<variation>' of a ScienceWorld task")
    name, variation = parsed
    sw = engine()
    first, won = None, 0
    for load in range(args.loads):
        sw.load(name, variation, "", generateGoldPath=True)
        sw.reset()
        path = list(sw.get_gold_action_sequence())
        first = path if first is None else first
        score = 0
        for command in path:
            _, _, done, info = sw.step(command)
            score = info["score"]
            if done:
                break
        won += score == 100
        focus = [command for command in path if command.startswith("focus on")]
        print(f"load {load}: {len(path)} commands, {focus}, score {score}, same path as load 0: {path == first}",
              flush=True)
    print(f"{args.task}: the gold path won {won} of {args.loads} loads")


if __name__ == "__main__":
    main()
