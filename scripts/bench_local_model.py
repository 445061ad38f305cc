"""Seconds per step of the embedded model against its token-throughput limit, prompt shapes side by side.

Each configuration plays the same `textworld:easy` games under `base` and `sentry` (the paper's configuration: the
agent's model is every judge) with the default agent (SmolLM2-135M, constrained), in a fresh process each, with the
response cache off so every call is the model's work:

- `sliding, 1 context`: the history is the last W steps, and one llama.cpp context serves the agent and every judge
  (how the embedded model ran before; `--agent-option history=sliding --agent-option contexts=1`);
- `blocks, 4 contexts`: the history starts at a multiple of W, so consecutive prompts share all but the newest
  step, and up to 4 system prompts keep their own context and KV cache (the default before: Sentry's four judge
  roles and the agent are five, so one of them gave its context away);
- `blocks, 5 contexts`: the same, a context for each of the five system prompts (the default).

For every model call the child process records the prompt tokens, the tokens llama.cpp actually evaluated (those
past the prefix its context already holds) and the completion tokens. llama.cpp's raw throughput on the same cores
is measured first: prompt evaluation (tokens/s over a fresh 512-token prompt) and generation (tokens/s). The limit
of a configuration is (evaluated prompt tokens / eval rate + completion tokens / generation rate) per step: the
time the tokens it must process take at llama.cpp's own speed; "over limit" is its seconds per step over that.
Replies decoded in batches (`playground.agents.lookup_decoding`, the default) count one forward pass per batch at
the generation rate and the batch's other tokens at the eval rate (`limit`); the prompt's last two tokens are
always evaluated there.
"must eval" counts the prompt tokens that are new against the previous request with the same system prompt, the
least any cache can evaluate.

The independent measurement of the same run: llama.cpp's own performance counters (`llama_perf_context`: the
prompt tokens it evaluated and the tokens it decoded, and the milliseconds each took), read from every model context
the run used, at the end of each of its calls. Printed beside the script's own count: evaluated tokens per step
(the script's prefix accounting plus the tokens of the reply's batches, against llama.cpp's count of every token it
evaluated; the two should agree within 10%) and the limit
(raw rates) against llama.cpp's own seconds per step (eval plus decode; sampling and Python are outside it).

    python scripts/bench_local_model.py [--games 2] [--steps 15] [--threads 2] [--out FILE.json]

`--threads 1,2` instead plays the default configuration once per thread count, side by side: seconds and CPU
seconds per step, each against the limit at that thread count's raw rates (the default `threads` is chosen from
this, not from the core count).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playground.run.rundir import load_records

CONFIGS = {
    "sliding, 1 context": ["--agent-option", "history=sliding", "--agent-option", "contexts=1"],
    "blocks, 4 contexts": ["--agent-option", "contexts=4"],
    "blocks, 5 contexts": [],
}


def raw_throughput(threads: int) -> dict[str, float]:
    """llama.cpp's prompt-eval and generation rates (tokens/s) for the embedded model on these cores."""
    from llama_cpp import Llama

    from playground.agents.local_model import default_gguf_path

    llm = Llama(model_path=str(default_gguf_path()), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                verbose=False, seed=0)
    prompt = llm.tokenize(("You are in a kitchen. There is a table, a chair and a red key. " * 40).encode())[:512]
    llm.reset()
    start = time.perf_counter()
    llm.eval(prompt)
    eval_rate = len(prompt) / (time.perf_counter() - start)
    # Generation: timed from the first generated token to the 65th, so the prompt's evaluation is outside the clock
    # whether or not its tokens were cached (subtracting a prompt time that a cached prefix never spent made the
    # rate 2-2.5x too high), and each token timed is one decode of one token plus its sampling.
    llm.reset()
    generated, first = 0, 0.0
    for _ in llm.generate(prompt[:64], temp=0.0, reset=True):
        generated += 1
        if generated == 1:
            first = time.perf_counter()
        if generated == 65:
            break
    gen_seconds = time.perf_counter() - first
    return {"prompt_eval_tokens_per_s": eval_rate,
            "generation_tokens_per_s": (generated - 1) / max(gen_seconds, 1e-6)}


def child(args: argparse.Namespace) -> None:
    """Play one configuration in this process, counting what llama.cpp evaluates; write counts to --counts."""
    import llama_cpp
    from llama_cpp import Llama

    from playground.agents import lookup_decoding
    from playground.agents.grammar_sampling import greedy_grammar_llama
    from playground.cli.main import main

    calls: list[dict] = []
    last_by_system: dict[bytes, list[int]] = {}
    perf: dict[int, dict[str, float]] = {}  # per model context: llama.cpp's own cumulative counters
    model_class = greedy_grammar_llama(Llama)  # the class the embedded model's contexts are
    original_generate = model_class.generate
    decoded = {"batches": 0, "tokens": 0}  # the reply's batches (lookup_decoding) and the tokens evaluated in them
    original_evaluate = lookup_decoding._evaluate

    def counted_evaluate(llm, batch, every_position):
        if every_position:
            decoded["batches"] += 1
            decoded["tokens"] += len(batch)
        return original_evaluate(llm, batch, every_position)

    lookup_decoding._evaluate = counted_evaluate

    def counted_generate(self, tokens, *a, **k):
        tokens = list(tokens)
        held = self._input_ids.tolist()
        reused = Llama.longest_token_prefix(held, tokens)
        if self.lookup_decoding:  # the last two prompt tokens at least are evaluated (a batch of one differs)
            reused = max(0, min(reused, len(tokens) - 2))
        elif reused == len(tokens):  # llama.cpp evaluates the last token again to get its logits
            reused -= 1
        system = bytes(str(tokens[:48]), "ascii")  # the system prompt's tokens identify the role
        previous = last_by_system.get(system, [])
        must = len(tokens) - Llama.longest_token_prefix(previous, tokens)
        last_by_system[system] = tokens
        record = {"prompt": len(tokens), "evaluated": len(tokens) - reused, "must": max(must, 1), "completion": 0}
        calls.append(record)
        before = dict(decoded)
        try:
            for token in original_generate(self, tokens, *a, **k):
                record["completion"] += 1
                yield token
        finally:  # also when the caller stops early (a grammar's end, max_tokens): the counters so far
            record["batches"] = decoded["batches"] - before["batches"]
            record["decoded"] = decoded["tokens"] - before["tokens"]
            data = llama_cpp.llama_perf_context(self._ctx.ctx)
            perf[id(self)] = {"prompt_ms": data.t_p_eval_ms, "prompt_tokens": data.n_p_eval,
                              "decode_ms": data.t_eval_ms, "decode_tokens": data.n_eval}

    model_class.generate = counted_generate
    code = main(["run", "--episodes", str(args.games), "--max-steps", str(args.steps), "--quiet",
                 "--no-response-cache", "--out", args.run, "--agent-option", f"threads={args.threads}", *args.extra])
    Path(args.counts).write_text(json.dumps({"code": code, "calls": calls, "perf": list(perf.values()),
                                             "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(name: str, extra: list[str], args: argparse.Namespace, folder: Path, threads: int) -> dict:
    """Play one configuration in a child process with `threads` threads; return its figures per step."""
    counts, run = folder / f"{len(os.listdir(folder))}.json", folder / f"run-{len(os.listdir(folder))}"
    start, cpu_before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, __file__, "--child", "--counts", str(counts), "--run", str(run),
                    "--games", str(args.games), "--steps", str(args.steps), "--threads", str(threads),
                    "--", *extra], check=True)
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    data = json.loads(counts.read_text())
    records = load_records(run)
    steps = sum(r.steps for r in records)
    seconds = sum(r.seconds for r in records)
    calls = data["calls"]
    total = {key: sum(c.get(key, 0) for c in calls)
             for key in ("prompt", "evaluated", "must", "completion", "batches", "decoded")}
    llama = {key: sum(p[key] for p in data["perf"]) for key in ("prompt_ms", "prompt_tokens", "decode_ms",
                                                                 "decode_tokens")}
    return {"config": name,
            # every token llama.cpp evaluated: the prompts' and, decoded in batches, the replies' (lookup_decoding)
            "llama_evaluated_tokens_per_step": (llama["prompt_tokens"] + llama["decode_tokens"]) / max(steps, 1),
            "llama_seconds_per_step": (llama["prompt_ms"] + llama["decode_ms"]) / 1000 / max(steps, 1),
            "llama_decoded_tokens_per_step": llama["decode_tokens"] / max(steps, 1), "threads": threads,
            "wall_s": wall, "cpu_s": cpu,
            "cpu_seconds_per_step": cpu / max(steps, 1), "steps": steps, "episodes": len(records),
            "won": sum(r.won for r in records), "seconds_per_step": seconds / max(steps, 1),
            "calls_per_step": len(calls) / max(steps, 1), "peak_rss_mb": data["peak_rss_mb"],
            **{f"{key}_tokens_per_step": value / max(steps, 1) for key, value in total.items()},
            "seconds_per_step_by_harness": {
                h: sum(r.seconds for r in records if r.harness == h)
                / max(sum(r.steps for r in records if r.harness == h), 1)
                for h in sorted({r.harness for r in records})}}


def limit(row: dict, rates: dict[str, float], prompt: str) -> float:
    """Seconds per step the tokens take at llama.cpp's raw rates: the `prompt` tokens (evaluated or must) at the
    prompt-eval rate; the reply one forward pass per token at the generation rate, or, decoded in batches
    (`lookup_decoding`), one pass per batch plus its other tokens at the prompt-eval rate."""
    prompt_seconds = row[f"{prompt}_tokens_per_step"] / rates["prompt_eval_tokens_per_s"]
    batches = row["batches_tokens_per_step"]
    if not batches:
        return prompt_seconds + row["completion_tokens_per_step"] / rates["generation_tokens_per_s"]
    return (prompt_seconds + batches / rates["generation_tokens_per_s"]
            + (row["decoded_tokens_per_step"] - batches) / rates["prompt_eval_tokens_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--threads", default="2", help="llama.cpp threads; several (1,2): compare them")
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--counts", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("extra", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    counts = [int(t) for t in str(args.threads).split(",") if t.strip()]
    if len(counts) > 1:
        compare_threads(args, counts)
        return
    args.threads = counts[0]
    rates = raw_throughput(args.threads)
    print(f"llama.cpp raw: prompt eval {rates['prompt_eval_tokens_per_s']:.0f} tokens/s, "
          f"generation {rates['generation_tokens_per_s']:.1f} tokens/s ({args.threads} threads)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in CONFIGS.items():
            row = measure(name, extra, args, Path(tmp), args.threads)
            row["limit_seconds_per_step"] = limit(row, rates, "evaluated")
            row["must_limit_seconds_per_step"] = limit(row, rates, "must")
            rows.append(row)
    header = (f"{'configuration':<20} {'s/step':>7} {'limit':>6} {'over limit':>10} {'calls/step':>10} "
              f"{'prompt/step':>11} {'evaluated':>9} {'must eval':>9} {'over must':>9} {'won':>5} {'RSS MB':>7}")
    print(header)
    for row in rows:
        print(f"{row['config']:<20} {row['seconds_per_step']:>7.2f} {row['limit_seconds_per_step']:>6.2f} "
              f"{row['seconds_per_step'] / row['limit_seconds_per_step']:>9.2f}x {row['calls_per_step']:>10.2f} "
              f"{row['prompt_tokens_per_step']:>11.0f} {row['evaluated_tokens_per_step']:>9.0f} "
              f"{row['must_tokens_per_step']:>9.0f} "
              f"{row['seconds_per_step'] / row['must_limit_seconds_per_step']:>8.2f}x "
              f"{row['won']:>2}/{row['episodes']:<2} {row['peak_rss_mb']:>7.0f}")
    for row in rows:
        print(f"  {row['config']}: seconds per step by harness "
              + ", ".join(f"{h} {v:.2f}" for h, v in row["seconds_per_step_by_harness"].items()))
    print("against llama.cpp's own counters of the same run (perf context): evaluated tokens per step (prompts, and "
          "replies decoded in batches), "
          "script / llama.cpp; limit / llama.cpp's eval+decode seconds per step")
    for row in rows:
        counted = row["evaluated_tokens_per_step"] + row["decoded_tokens_per_step"]
        print(f"  {row['config']}: evaluated {counted:.0f} / {row['llama_evaluated_tokens_per_step']:.0f} = "
              f"{counted / max(row['llama_evaluated_tokens_per_step'], 1e-9):.3f}; "
              f"limit {row['limit_seconds_per_step']:.2f} / {row['llama_seconds_per_step']:.2f} s = "
              f"{row['limit_seconds_per_step'] / max(row['llama_seconds_per_step'], 1e-9):.3f}")
    first, last = rows[0], rows[-1]
    print(f"seconds per step, {last['config']} / {first['config']}: "
          f"{last['seconds_per_step'] / first['seconds_per_step']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"raw": rates, "rows": rows, "games": args.games, "steps": args.steps,
                                              "threads": args.threads}, indent=2))


def compare_threads(args: argparse.Namespace, counts: list[int]) -> None:
    """The default configuration at each thread count, side by side, each against its own raw-rate limit."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in counts:
            rates = raw_throughput(threads)
            row = measure(f"{threads} threads", [], args, Path(tmp), threads)
            row["raw"] = rates
            row["limit_seconds_per_step"] = limit(row, rates, "evaluated")
            rows.append(row)
    print(f"{'threads':>7} {'raw eval t/s':>12} {'raw gen t/s':>11} {'s/step':>7} {'CPU s/step':>10} {'limit':>6} "
          f"{'over limit':>10} {'won':>5}")
    for row in rows:
        print(f"{row['threads']:>7} {row['raw']['prompt_eval_tokens_per_s']:>12.0f} "
              f"{row['raw']['generation_tokens_per_s']:>11.1f} {row['seconds_per_step']:>7.2f} "
              f"{row['cpu_seconds_per_step']:>10.2f} {row['limit_seconds_per_step']:>6.2f} "
              f"{row['seconds_per_step'] / row['limit_seconds_per_step']:>9.2f}x {row['won']:>2}/{row['episodes']:<2}")
    first = rows[0]
    for row in rows[1:]:
        print(f"{row['threads']} threads / {first['threads']}: seconds per step "
              f"{row['seconds_per_step'] / first['seconds_per_step']:.2f}, CPU per step "
              f"{row['cpu_seconds_per_step'] / first['cpu_seconds_per_step']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "games": args.games, "steps": args.steps}, indent=2))


if __name__ == "__main__":
    main()
