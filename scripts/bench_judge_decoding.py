"""What Sentry's judges decode, and what it costs per step: the default job (the embedded SmolLM2-135M, constrained,
2 `textworld:easy` games, 15 steps, `base` and `sentry`) played by a base revision and by the working tree, side
by side in one run, each with no response cache (machinery figures: time and tokens, not success).

Per revision and harness it prints the agent's and the judges' completion tokens per step, the judge calls per
step, and the episode wall seconds per step; then Sentry/base seconds per step and the judges' tokens per step,
now against the base. The revisions alternate (base, now, then now, base with `--rounds 2`) so both meet the same
load and neither always plays second;
the 1-minute load average is printed beside each run.

    python scripts/bench_judge_decoding.py --base 0256f21 [--games 2] [--rounds 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from checkout_tree import ROOT, python_env, worktree

from playground.run.rundir import load_records


def play(tree: Path, games: int) -> dict[str, dict[str, float]]:
    """Play the default job from `tree` into a fresh folder, no response cache; per harness its per-step figures."""
    env, folder = python_env(tree)
    out = Path(tempfile.mkdtemp(prefix="bench-judges-")) / "run"
    subprocess.run([sys.executable, "-m", "playground.cli.main", "run", "--episodes", str(games), "--quiet",
                    "--no-response-cache", "--out", str(out)], env=env, cwd=folder, check=True,
                   capture_output=True, text=True)
    totals: dict[str, dict[str, float]] = {}
    for record in load_records(out):  # typed records, read by this checkout's playground
        row = totals.setdefault(record.harness, dict.fromkeys(("steps", "agent", "judge", "calls", "seconds"), 0.0))
        judged = sum(int(counts.get("calls", 0)) for counts in (record.judge_replies or {}).values())
        for key, value in (("steps", record.steps), ("agent", record.completion_tokens),
                           ("judge", record.judge_completion_tokens), ("calls", judged), ("seconds", record.seconds)):
            row[key] += value
    return {harness: {"agent tokens/step": row["agent"] / row["steps"],
                      "judge tokens/step": row["judge"] / row["steps"],
                      "judge calls/step": row["calls"] / row["steps"], "seconds/step": row["seconds"] / row["steps"]}
            for harness, row in totals.items()}


def main() -> None:
    """Alternate the base revision and the working tree; print each run's figures and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trees = {args.base: worktree(args.base), "now": ROOT}
    runs: list[dict] = []
    for round_number in range(args.rounds):  # ABBA: the second round plays now first, so order effects cancel
        order = list(trees.items()) if round_number % 2 == 0 else list(reversed(trees.items()))
        for label, tree in order:
            load = os.getloadavg()[0]
            runs.append({"revision": label, "load": load, "harnesses": play(tree, args.games)})
            print(f"{label}: load {load:.1f}", json.dumps(runs[-1]["harnesses"]), file=sys.stderr)
    summary = {}
    for label in trees:
        mine = [run["harnesses"] for run in runs if run["revision"] == label]
        mean = {key: sum(run["sentry"][key] for run in mine) / len(mine) for key in mine[0]["sentry"]}
        base_seconds = sum(run["base"]["seconds/step"] for run in mine) / len(mine)
        summary[label] = {**{f"sentry {k}": v for k, v in mean.items()},
                          "sentry/base seconds per step": mean["seconds/step"] / base_seconds}
    if args.json:
        print(json.dumps({"runs": runs, "summary": summary}, indent=2))
        return
    keys = list(summary["now"])
    print(f"{'figure':34} {args.base:>10} {'now':>10} {'now/base':>9}")
    for key in keys:
        was, now = summary[args.base][key], summary["now"][key]
        print(f"{key:34} {was:>10.2f} {now:>10.2f} {now / was if was else float('nan'):>9.2f}")


if __name__ == "__main__":
    main()
