"""Milliseconds per decoded token of the embedded model under a grammar: llama-cpp-python's own path (the grammar
applied to the whole vocabulary at every token) against `playground.agents.grammar_sampling` (the model's own
choice checked first), side by side in one process, alternating, on the same prompts and grammars, plus the
unconstrained rate for reference (machinery figures: time, not quality). The replies must be the same; the script
stops if they are not.

    python scripts/bench_grammar_sampling.py [--rounds 3] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from llama_cpp import Llama, LlamaGrammar

from playground.agents.chat import grammar_schema
from playground.agents.grammar_sampling import greedy_grammar_llama
from playground.agents.local_model import _grammar_alternative, default_gguf_path
from playground.plugins.sentry.judges import LLMDetector, LLMVerifier

# the shapes the judges ask for, as Sentry's judges send them: the detector's reply (`{"failure": false}`, or a
# detection naming its type, labels, confidence and evidence) and the verifier's verdict
DETECTOR = LLMDetector(None).schema
VERDICT = LLMVerifier.SCHEMA
COMMANDS = ["go north", "go south", "take the red key", "open the wooden door", "inventory", "look",
            "take vacuum", "drop vacuum", "open fridge", "examine counter"]
STORY = ("You are in a kitchen. There is a fridge, a counter with a vacuum on it, and doors to the north and south. "
         "The agent took the vacuum, dropped it, took it again, and looked around three times.")


def timed(llm: Llama, messages: list[dict], grammar: LlamaGrammar | None, max_tokens: int) -> tuple[str, int, float]:
    """One greedy chat reply with its prompt already in the context's cache: (text, tokens, seconds)."""
    llm.create_chat_completion(messages=messages, max_tokens=1, temperature=0.0)  # the prompt evaluated once
    started = time.perf_counter()
    out = llm.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0, grammar=grammar)
    return out["choices"][0]["message"]["content"], out["usage"]["completion_tokens"], time.perf_counter() - started


def main() -> None:
    """Alternate the two paths over the shapes; print ms per token and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    options = {"model_path": str(default_gguf_path()), "n_ctx": 2048, "n_threads": args.threads,
               "n_threads_batch": args.threads, "verbose": False, "seed": 0}
    paths = {"llama-cpp-python": Llama(**options), "checked first": greedy_grammar_llama(Llama)(**options)}
    paths["checked first"].lookup_decoding = False  # one token per pass, as llama-cpp-python (bench_lookup_decoding)
    shapes = {
        "detector (JSON)": (LlamaGrammar.from_json_schema(json.dumps(grammar_schema(DETECTOR)), verbose=False), 80,
                            "Did the agent fail? Reply with JSON only."),
        "verdict (JSON)": (LlamaGrammar.from_json_schema(json.dumps(grammar_schema(VERDICT)), verbose=False), 40,
                           "Is the failure resolved? Reply with JSON only."),
        "command (choices)": (LlamaGrammar.from_string("root ::= " + " | ".join(_grammar_alternative(c)
                                                                                for c in COMMANDS), verbose=False),
                              12, "Which command comes next?"),
    }
    rows = []
    for shape, (grammar, max_tokens, question) in shapes.items():
        messages = [{"role": "user", "content": f"{STORY}\n{question}"}]
        seconds: dict[str, list[float]] = {name: [] for name in [*paths, "unconstrained"]}
        tokens: dict[str, int] = {}
        for _ in range(args.rounds):
            replies = set()
            for name, llm in paths.items():
                text, count, spent = timed(llm, messages, grammar, max_tokens)
                replies.add((text, count))
                seconds[name].append(spent / max(count, 1))
                tokens[name] = count
            if len(replies) != 1:
                raise SystemExit(f"{shape}: the two paths replied differently: {sorted(replies)}")
            _, count, spent = timed(paths["llama-cpp-python"], messages, None, tokens["llama-cpp-python"])
            seconds["unconstrained"].append(spent / max(count, 1))
        row = {"shape": shape, "tokens": tokens["llama-cpp-python"],
               **{f"{name} ms/token": round(1000 * statistics.median(v), 2) for name, v in seconds.items()}}
        row["checked first / llama-cpp-python"] = round(row["checked first ms/token"]
                                                        / row["llama-cpp-python ms/token"], 3)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'shape':<20}{'tokens':>7}{'llama-cpp-python':>18}{'checked first':>15}{'unconstrained':>15}{'ratio':>8}")
    for row in rows:
        print(f"{row['shape']:<20}{row['tokens']:>7}{row['llama-cpp-python ms/token']:>18}"
              f"{row['checked first ms/token']:>15}{row['unconstrained ms/token']:>15}"
              f"{row['checked first / llama-cpp-python']:>8}")


if __name__ == "__main__":
    main()
