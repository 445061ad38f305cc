"""Where a Sentry step's time goes with the embedded model: seconds per step of `base`, `sentry` and
`sentry-judge-blocks`, and each model role's share, side by side (machinery figures: time and tokens of the same
work; SmolLM2's replies are not a claim about any method).

Each harness plays README's default job (SmolLM2-135M, constrained, 2 `textworld:easy` games, 15 steps, no response
cache) in a fresh process of its own, in rounds whose order alternates (base, sentry, blocks; then blocks, sentry,
base), so every harness meets the same load. A child times every call to the embedded model by role (the agent,
and each judge by its system prompt) and every llama.cpp evaluation in it: the prompt's new tokens (those past the
prefix the role's context holds) and the reply's batches (`playground.agents.lookup_decoding`). The rest of an
episode's seconds is the env, the harness's rules, the playbook and the trace.

    python scripts/bench_sentry_roles.py [--games 2] [--rounds 2] [--threads 2] [--out DIR]

`--out DIR` plays the runs in DIR (one folder per harness and round) and writes the figures to DIR/figures.json;
without it they are played in a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HARNESSES = ("base", "sentry", "sentry-judge-blocks")


def child(args: argparse.Namespace) -> None:
    """Child: play the default job under one harness, timing the model by role; write the figures to --result."""
    from playground.agents import local_model, lookup_decoding
    from playground.cli.main import main

    roles: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    current = {"role": ""}
    evaluate, complete = lookup_decoding._evaluate, local_model.LocalChatModel.complete

    def timed_evaluate(llm, batch, every_position):
        start = time.perf_counter()
        evaluate(llm, batch, every_position)
        part = roles[current["role"]]
        kind = "reply" if every_position else "prompt"
        part[f"{kind}_batches"] += 1
        part[f"{kind}_tokens"] += len(batch)
        part[f"{kind}_s"] += time.perf_counter() - start

    def timed_complete(self, messages, **kwargs):
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        current["role"] = ("judge: " if kwargs.get("json_schema") is not None else "agent: ") + " ".join(
            system.split()[:3])
        start = time.perf_counter()
        completion = complete(self, messages, **kwargs)
        roles[current["role"]]["calls"] += 1
        roles[current["role"]]["call_s"] += time.perf_counter() - start
        return completion

    lookup_decoding._evaluate = timed_evaluate
    local_model.LocalChatModel.complete = timed_complete  # type: ignore[method-assign]
    code = main(["run", "--episodes", str(args.games), "--quiet", "--no-response-cache", "--out", args.run,
                 "--harness", args.harness, "--agent-option", f"threads={args.threads}"])
    if code:
        sys.exit(code)
    episodes = [json.loads(line) for line in Path(args.run, "episodes.jsonl").read_text().splitlines()]
    Path(args.result).write_text(json.dumps({
        "played_steps": sum(e["steps"] for e in episodes), "episode_s": sum(e["seconds"] for e in episodes),
        "roles": {role: dict(counts) for role, counts in roles.items()}}))


def play(harness: str, folder: Path, round_index: int, args: argparse.Namespace) -> dict:
    result = folder / f"{harness}-{round_index}.json"
    load = os.getloadavg()[0]
    subprocess.run([sys.executable, __file__, "--child", "--harness", harness, "--games", str(args.games),
                    "--threads", str(args.threads), "--run", str(folder / f"{harness}-{round_index}"),
                    "--result", str(result)], check=True, stdout=subprocess.DEVNULL)
    return {**json.loads(result.read_text()), "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="play the runs here and write figures.json (default: a temporary folder)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--harness", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.out and Path(args.out).exists() and any(Path(args.out).iterdir()):
        parser.error(f"--out {args.out}: not empty (a run there would resume, and a resumed run is not timed)")
    runs: dict[str, list[dict]] = {harness: [] for harness in HARNESSES}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for round_index in range(args.rounds):
            order = HARNESSES if round_index % 2 == 0 else tuple(reversed(HARNESSES))
            for harness in order:
                runs[harness].append(play(harness, folder, round_index, args))
    per_step = {h: statistics.mean(r["episode_s"] / r["played_steps"] for r in rs) for h, rs in runs.items()}
    date = time.strftime("%Y-%m-%d")
    print(f"{date}: the default job ({args.games} games), {args.rounds} rounds in alternating "
          f"order, {args.threads} threads, 1-minute loads {[round(r['load'], 1) for rs in runs.values() for r in rs]}")
    print(f"{'harness':<22} {'s/step':>7} {'/base':>6}   role: s/step, calls, new prompt tokens, reply batches "
          f"(tokens)")
    for harness, rs in runs.items():
        steps = rs[0]["played_steps"]
        print(f"{harness:<22} {per_step[harness]:>7.3f} {per_step[harness] / per_step['base']:>6.2f}")
        for role, counts in sorted(rs[0]["roles"].items(), key=lambda item: -item[1]["call_s"]):
            seconds = statistics.mean(r["roles"].get(role, {}).get("call_s", 0.0) for r in rs) / steps
            print(f"{'':<38}{role:<28} {seconds:>6.3f} {counts['calls']:>4} {counts.get('prompt_tokens', 0):>6} "
                  f"{counts.get('reply_batches', 0):>5} ({counts.get('reply_tokens', 0)})")
        other = statistics.mean(r["episode_s"] - sum(c["call_s"] for c in r["roles"].values()) for r in rs) / steps
        print(f"{'':<38}{'env, rules, playbook, trace':<28} {other:>6.3f}")
    if args.out:
        figures = {"date": date, "games": args.games, "rounds": args.rounds, "threads": args.threads,
                   "seconds_per_step": per_step, "runs": runs}
        Path(args.out, "figures.json").write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
