"""The embedded model's requests of the default job, answered with guessed tokens checked in batches and one token per
forward pass, side by side (machinery figures: time and tokens; the replies are not a claim about any method).

First the default job (SmolLM2-135M, constrained, 2 `textworld:easy` games, 15 steps, `base` and `sentry`, no
response cache) is played once in a child process that records every request it sends the embedded model. Then
fresh child processes answer the same requests, in the same order, with `lookup_decoding` on (the default:
`playground.agents.lookup_decoding`) and off (one token per forward pass, llama-cpp-python's way), alternating
(on, off, then off, on with `--rounds 2`) so both meet the same load. Per decoding it prints the seconds the agent's
and the judges' requests took, the completion tokens, the tokens guessed and kept, and how many replies differ
between the two (a batch and a single token round differently in llama.cpp, so a close call can go the other way).

    python scripts/bench_lookup_decoding.py [--games 2] [--rounds 2] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def record(args: argparse.Namespace) -> None:
    """Child: play the default job, writing every request the embedded model was sent to --requests."""
    from playground.agents import local_model
    from playground.cli.main import main

    requests: list[dict] = []
    complete = local_model.LocalChatModel.complete

    def recording(self, messages, **kwargs):
        requests.append({"messages": messages, **kwargs})
        return complete(self, messages, **kwargs)

    local_model.LocalChatModel.complete = recording  # type: ignore[method-assign]
    code = main(["run", "--episodes", str(args.games), "--quiet", "--no-response-cache", "--out", args.run,
                 "--agent-option", f"threads={args.threads}"])
    if code:
        sys.exit(code)
    Path(args.requests).write_text(json.dumps(requests))


def answer(args: argparse.Namespace) -> None:
    """Child: answer the recorded requests with lookup decoding on or off; write times and replies to --result."""
    from llama_cpp import Llama

    from playground.agents.grammar_sampling import greedy_grammar_llama
    from playground.agents.local_model import LocalChatModel

    greedy_grammar_llama(Llama).lookup_decoding = args.lookup == "on"
    model = LocalChatModel(threads=args.threads, cache_dir=None)  # no response cache: every request is decoded
    seconds = {"agent": 0.0, "judge": 0.0}
    tokens = {"agent": 0, "judge": 0}
    replies = []
    for request in json.loads(Path(args.requests).read_text()):
        kind = "judge" if request.get("json_schema") is not None else "agent"
        start = time.perf_counter()
        completion = model.complete(**request)
        seconds[kind] += time.perf_counter() - start
        tokens[kind] += completion.completion_tokens
        replies.append(completion.text)
    guessers = [llm.lookup for llm in LocalChatModel._pools[model._key].values() if hasattr(llm, "lookup")]
    Path(args.result).write_text(json.dumps({
        "time_s": seconds, "tokens": tokens, "replies": replies,
        "guessed": sum(g.guesses for g in guessers), "kept": sum(g.kept for g in guessers)}))


def child(mode: str, folder: Path, args: argparse.Namespace, **extra: str) -> None:
    command = [sys.executable, __file__, "--child", mode, "--games", str(args.games), "--threads", str(args.threads),
               "--requests", str(folder / "requests.json")]
    for key, value in extra.items():
        command += [f"--{key}", value]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)  # (the recorded run prints its table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--child", choices=("record", "answer"), help=argparse.SUPPRESS)
    parser.add_argument("--requests", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--lookup", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "record":
        record(args)
        return
    if args.child == "answer":
        answer(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        child("record", folder, args, run=str(folder / "run"))
        requests = len(json.loads((folder / "requests.json").read_text()))
        results: dict[str, list[dict]] = {"on": [], "off": []}
        for round_index in range(args.rounds):
            order = ("on", "off") if round_index % 2 == 0 else ("off", "on")
            for lookup in order:
                load = os.getloadavg()[0]
                result = folder / f"{lookup}-{round_index}.json"
                child("answer", folder, args, lookup=lookup, result=str(result))
                results[lookup].append({**json.loads(result.read_text()), "load": load})
    figures = {}
    for lookup, runs in results.items():
        figures[lookup] = {
            "agent_seconds": statistics.mean(r["time_s"]["agent"] for r in runs),
            "judge_seconds": statistics.mean(r["time_s"]["judge"] for r in runs),
            "agent_tokens": runs[0]["tokens"]["agent"], "judge_tokens": runs[0]["tokens"]["judge"],
            "guessed": runs[0]["guessed"], "kept": runs[0]["kept"], "loads": [round(r["load"], 1) for r in runs]}
    differ = sum(a != b for a, b in zip(results["on"][0]["replies"], results["off"][0]["replies"]))
    print(f"{requests} requests of the default job ({args.games} games), {args.rounds} rounds, {args.threads} threads")
    print(f"{'lookup decoding':<16} {'agent s':>8} {'judges s':>9} {'agent tokens':>13} {'judge tokens':>13} "
          f"{'guessed':>8} {'kept':>6} {'1-min load':>12}")
    for lookup, row in figures.items():
        print(f"{lookup:<16} {row['agent_seconds']:>8.2f} {row['judge_seconds']:>9.2f} {row['agent_tokens']:>13} "
              f"{row['judge_tokens']:>13} {row['guessed']:>8} {row['kept']:>6} {str(row['loads']):>12}")
    on, off = figures["on"], figures["off"]
    print(f"on/off: agent {on['agent_seconds'] / off['agent_seconds']:.2f}, "
          f"judges {on['judge_seconds'] / off['judge_seconds']:.2f}, "
          f"all {(on['agent_seconds'] + on['judge_seconds']) / (off['agent_seconds'] + off['judge_seconds']):.2f}; "
          f"replies that differ: {differ} of {requests}")
    if args.json:
        print(json.dumps({"requests": requests, "differ": differ, **figures}))


if __name__ == "__main__":
    main()
