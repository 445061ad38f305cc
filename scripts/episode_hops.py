"""How many host modules one episode crosses, and the longest chain of calls between them (machinery figure).

Plays one `tiny` episode under a harness through `playground.run.runner.run` with a profiler on, and counts:

- modules: the distinct `playground.*` modules (the host, not plugins or envs) whose functions ran;
- hops: the longest chain of calls that crosses from one host module into another, from the runner down (a call
  within one module is no hop), with the chain printed.

Run it on two checkouts to compare a change (`git worktree add /tmp/before REV`, then this script with
`--root /tmp/before`): both figures come from the same episode.

    python scripts/episode_hops.py [--harness sentry] [--root CHECKOUT]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def measure(harness: str) -> tuple[set[str], list[str]]:
    """Play one episode; return the host modules that ran and the longest chain of module-crossing calls."""
    from playground.host.manager import Host
    from playground.run.config import RunConfig
    from playground.run.runner import run

    modules: set[str] = set()
    stack: list[tuple[str, int]] = []  # (module, hops to reach it) for each host frame in play
    longest: list[str] = []
    chains: dict[int, list[str]] = {}

    def profile(frame, event, _arg):
        nonlocal longest
        name = frame.f_globals.get("__name__", "")
        if not name.startswith("playground.") or name.startswith(("playground.plugins", "playground.envs")):
            return
        if event == "call":
            modules.add(name)
            parent = stack[-1] if stack else None
            hops = parent[1] + (parent[0] != name) if parent else 0
            chain = (chains.get(id(parent), []) if parent else []) + ([name] if not parent or parent[0] != name
                                                                        else [])
            entry = (name, hops)
            chains[id(entry)] = chain
            stack.append(entry)
            if len(chain) > len(longest):
                longest = chain
        elif event == "return" and stack:
            chains.pop(id(stack.pop()), None)

    with tempfile.TemporaryDirectory() as folder:
        config = RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000"], agent="noisy",
                           harnesses=[harness], out=str(Path(folder) / "run"), max_steps=6)
        host = Host().load()
        sys.setprofile(profile)
        try:
            run(host, config)
        finally:
            sys.setprofile(None)
    return modules, longest


def main() -> None:
    """Print the figures for one episode."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--harness", default="sentry")
    parser.add_argument("--root", help="the checkout to measure (default: this one)")
    args = parser.parse_args()
    if args.root:
        sys.path.insert(0, str(Path(args.root).resolve()))
    modules, longest = measure(args.harness)
    print(f"host modules run by one {args.harness} episode: {len(modules)}")
    print(f"hops (module crossings on the longest chain): {max(len(longest) - 1, 0)}")
    print("  " + " -> ".join(name.removeprefix("playground.") for name in longest))


if __name__ == "__main__":
    main()
