"""1 against 2 llama.cpp threads on identical calls, idle and under a synthetic load this script starts itself.

Each call evaluates a fresh prompt (no cached prefix: the context is reset first) of about the size of an agent
step's and generates a fixed number of tokens greedily, with the embedded model (SmolLM2-135M by default). Thread
counts alternate call by call so that machine noise hits both. The same calls run twice: with no load of this
script's own ("idle": whatever else the machine runs stays, and its load is printed), then beside `--busy`
busy-loop processes (default: one per usable core). For each, it prints seconds and CPU seconds per call at 1 and 2
threads, their ratios side by side, and what `threads=auto` (`threads_by_contention`) picks at that moment.

    python scripts/bench_threads.py [--calls 6] [--prompt-tokens 500] [--new-tokens 12] [--busy 2] [--gguf PATH]

The 1-minute load average lags: the loaded phase waits `--settle` seconds (default 20) after starting the busy
loops, and "auto picks" is read at the end of each phase.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time


def cpu_seconds() -> float:
    """This process's user and system CPU seconds, all its threads together."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_call(llm, tokens: list[int], new_tokens: int) -> None:
    """Evaluate `tokens` from an empty context and generate `new_tokens` tokens greedily."""
    llm.reset()
    for count, _ in enumerate(llm.generate(tokens, temp=0.0, reset=True), start=1):
        if count >= new_tokens:
            break


def phase(models: dict[int, object], prompts: list[list[int]], new_tokens: int) -> dict[int, dict[str, float]]:
    """Play every prompt once per thread count, alternating; return seconds and CPU seconds per call by count."""
    totals = {threads: {"wall": 0.0, "cpu": 0.0} for threads in models}
    for index, prompt in enumerate(prompts):
        order = sorted(models) if index % 2 == 0 else sorted(models, reverse=True)
        for threads in order:
            wall, cpu = time.perf_counter(), cpu_seconds()
            one_call(models[threads], prompt, new_tokens)
            totals[threads]["wall"] += time.perf_counter() - wall
            totals[threads]["cpu"] += cpu_seconds() - cpu
    return {threads: {key: value / len(prompts) for key, value in t.items()} for threads, t in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--prompt-tokens", type=int, default=500)
    parser.add_argument("--new-tokens", type=int, default=12)
    parser.add_argument("--busy", type=int, default=None, help="busy-loop processes (default: the usable cores)")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds the busy loops run before measuring")
    parser.add_argument("--gguf", default="")
    args = parser.parse_args()

    from llama_cpp import Llama

    from playground.agents.local_model import default_gguf_path
    from playground.processes import machine_load, threads_by_contention, usable_cores

    path = args.gguf or str(default_gguf_path())
    busy = usable_cores() if args.busy is None else args.busy
    models = {t: Llama(model_path=path, n_ctx=2048, n_threads=t, n_threads_batch=t, verbose=False, seed=0)
              for t in (1, 2)}
    text = "You are in a kitchen. There is a table, a chair and a red key on the table. Step {}: go north. "
    prompts = [models[1].tokenize((text.format(i) * 60).encode())[:args.prompt_tokens] for i in range(args.calls)]
    one_call(models[1], prompts[0], 2)  # warm both up: page the weights in
    one_call(models[2], prompts[0], 2)
    print(f"{os.path.basename(path)}: {args.calls} calls of {len(prompts[0])} fresh prompt tokens + "
          f"{args.new_tokens} generated, {usable_cores()} usable cores, started {time.strftime('%Y-%m-%d %H:%M')}")
    rows = []
    load_before = machine_load()
    figures = phase(models, prompts, args.new_tokens)
    rows.append(("idle", load_before, machine_load(), figures, threads_by_contention()))
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(args.settle)
        load_before = machine_load()
        figures = phase(models, prompts, args.new_tokens)
        rows.append((f"{busy} busy", load_before, machine_load(), figures, threads_by_contention()))
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    print(f"{'condition':<10} {'load':>11} {'1t s/call':>9} {'2t s/call':>9} {'2t/1t wall':>10} "
          f"{'1t CPU':>7} {'2t CPU':>7} {'2t/1t CPU':>9}  auto picks")
    for name, before, after, f, (auto, why) in rows:
        load = f"{before or 0:.1f}-{after or 0:.1f}"
        print(f"{name:<10} {load:>11} {f[1]['wall']:>9.3f} {f[2]['wall']:>9.3f} {f[2]['wall'] / f[1]['wall']:>9.2f}x "
              f"{f[1]['cpu']:>7.3f} {f[2]['cpu']:>7.3f} {f[2]['cpu'] / f[1]['cpu']:>8.2f}x  {auto} ({why})")
    idle, loaded = rows[0][3], rows[1][3]
    print(f"loaded/idle seconds per call: 1 thread {loaded[1]['wall'] / idle[1]['wall']:.2f}x, "
          f"2 threads {loaded[2]['wall'] / idle[2]['wall']:.2f}x")


if __name__ == "__main__":
    main()
