"""The baselines next to `base` and `sentry` with the `noisy` instrument: a machinery-only table.

    python scripts/bench_baselines.py [--episodes 20] [--out DIR] [--env textworld:easy --env webshop]

For each env it runs, in one run directory per env and rate setting (so every harness plays
the same tasks with the same seeds), `base`, `sentry`, `ace`, `reflexion`, `awm`,
`reasoningbank`, `monitor` and `ace-sentry`, at the noisy agent's default rates and at
stressed rates with a tight budget (`--max-steps 10`, the held-out protocol's setting), and
prints one markdown table per run: success with its 95% Wilson interval, mean score, env
steps per task (summed over Reflexion's trials), invalid actions per episode, interventions,
attempts per task, and what each harness's memory holds at the end.

The `noisy` agent reads intervention messages but not standing notes, so a baseline that
acts only through notes (ACE, Reflexion, AWM, ReasoningBank) plays exactly as `base` does:
these figures say the machinery runs and grows its memory, not how an LLM would do.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
from pathlib import Path

from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.run.validation import resolve_tasks

HARNESSES = ["base", "sentry", "ace", "reflexion", "awm", "reasoningbank", "monitor", "ace-sentry"]
STRESSED = {"invalid": 0.15, "repeat": 0.1, "stall": 0.1, "drift": 0.1, "stop": 0.08}


def memory(run_dir: Path, harness: str) -> str:
    """What a harness's memory holds at the end of the run."""
    playbooks = run_dir / "playbooks"
    parts = []
    ace = playbooks / f"{harness}.ace.txt"
    if ace.is_file():
        parts.append(f"{sum(line.startswith('[') for line in ace.read_text().splitlines())} ACE bullets")
    for suffix, what in (("reflections.jsonl", "reflections"), ("workflows.jsonl", "workflows"),
                         ("memory.jsonl", "memory items")):
        path = playbooks / f"{harness}.{suffix}"
        if path.is_file():
            records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            if suffix == "workflows.jsonl":
                parts.append(f"{len({tuple(r['steps']) for r in records})} workflows ({len(records)} inductions)")
            else:
                parts.append(f"{len(records)} {what}")
    sqlite = playbooks / f"{harness}.sqlite"
    if sqlite.is_file():
        with sqlite3.connect(sqlite) as db:
            count = db.execute("SELECT COUNT(*) FROM lessons").fetchone()[0]
            parts.append(f"{count} Sentry lesson{'' if count == 1 else 's'}")
    return ", ".join(parts) or "none"


def table(summary: dict, run_dir: Path) -> str:
    """The markdown table of one run."""
    lines = ["| harness | success [95% CI] | score | steps/task | invalid/ep | interventions | attempts/task | memory "
             "at the end |", "|---|---|---|---|---|---|---|---|"]
    for name in HARNESSES:
        h = summary["harnesses"][name]
        low, high = h["success_ci95"]
        interventions = sum(h["interventions"].values())
        attempts = h.get("mean_attempts", 1.0)
        lines.append(f"| {name} | {h['success_rate']:.0%} [{low:.0%}, {high:.0%}] | {h['mean_score'] or 0:.2f} | "
                     f"{h['mean_steps']:.2f} | {h['invalid_actions_per_episode']:.2f} | {interventions} | "
                     f"{attempts:.2f} | {memory(run_dir, name)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--env", action="append", default=None, help="env (repeatable; default textworld:easy, "
                                                                     "webshop)")
    parser.add_argument("--out", default=None, help="folder for the run directories (default: a temporary one)")
    args = parser.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="bench-baselines-"))
    host = Host().load()
    for env in args.env or ["textworld:easy", "webshop"]:
        name, _, asked = env.partition(":")
        task_set, _, tasks = resolve_tasks(host, name, asked or None, "test", args.episodes)
        for label, options, steps in (("default rates", {}, 40), ("stressed rates", STRESSED, 10)):
            run_dir = root / f"{name}-{task_set}-{label.split()[0]}"
            summary = run(host, RunConfig(env=name, task_set=task_set, split="test", tasks=tasks, agent="noisy",
                                          harnesses=HARNESSES, out=str(run_dir), agent_options=options,
                                          max_steps=steps))
            print(f"\n### {name}:{task_set}, noisy at {label}, --max-steps {steps}, {len(tasks)} tasks "
                  f"({run_dir})\n")
            print(table(summary, run_dir))


if __name__ == "__main__":
    main()
