"""Model calls of a Sentry ablation sweep with the shared response cache, against those of one harness alone.

A scripted OpenAI-compatible server on 127.0.0.1 plays the model: an agent request gets the first valid action of
its prompt; a judge request (one that asks for a JSON schema) gets an object of that schema whose booleans, enums
and numbers are drawn from a hash of the request, so Sentry's judges detect, decline, verify and write lessons on
some steps and not others, the same way for the same request. Every reply depends only on the request, as a
temperature-0 model's would. The script counts the requests the server receives:

1. `base` alone, then `sentry` alone, on the games (each with its own fresh cache);
2. the 8-harness ablation sweep on the same games (another fresh cache): harnesses that ask the same questions
   until they diverge pay for them once;
3. the same sweep again into a new run directory: every reply comes from the cache.

    python scripts/bench_sweep_cache.py [--env textworld:easy] [--games 20] [--steps 15]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from playground.testing.openai_server import ScriptedChatServer

SWEEP = ["base", "sentry", "sentry-rules", "sentry-shortlist", "sentry-retrieval-off", "sentry-no-verify",
         "sentry-no-need-check", "sentry-persistent"]


def _draw(seed: str, schema: dict) -> Any:
    """A value of `schema` chosen by `seed`."""
    number = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][number % len(schema["enum"])]
    if "const" in schema:
        return schema["const"]
    if kind == "boolean":
        return number % 3 == 0
    if kind in ("number", "integer"):
        low, high = schema.get("minimum", 0), schema.get("maximum", 1)
        return low + (number % 10) * (high - low) / 10 if kind == "number" else int(low)
    if kind == "array":
        items = schema.get("items", {})
        size = max(int(schema.get("minItems", 0)), 1)
        return [_draw(f"{seed}/{i}", items) for i in range(size)]
    if kind == "object":
        return {name: _draw(f"{seed}/{name}", sub) for name, sub in schema.get("properties", {}).items()}
    return "seen in the last steps"[: int(schema.get("maxLength", 40))]


class Model:
    """The scripted model (see module docstring); counts requests."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, body: dict) -> str:
        self.requests += 1
        response_format = body.get("response_format") or {}
        schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get("schema")
        text = body["messages"][-1]["content"]
        if schema:
            return json.dumps(_draw(json.dumps(body["messages"], sort_keys=True), schema))
        line = next((ln for ln in text.splitlines() if ln.startswith("Valid actions: ")), "")
        actions = line.removeprefix("Valid actions: ").split(", ")
        pick = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % max(len(actions), 1)
        return f"Thought: go\nAction: {actions[pick] or 'look'}"


def play(url: str, harnesses: list[str], out: Path, cache: Path, args: argparse.Namespace) -> None:
    """One `playground run` of the harnesses against the server, with the response cache in `cache`."""
    command = [sys.executable, "-m", "playground.cli.main", "run", "--env", args.env, "--agent", "llm",
               "--llm-base-url", url, "--model", "m", "--episodes", str(args.games), "--max-steps",
               str(args.steps), "--quiet", "--out", str(out), *[f"--harness={h}" for h in harnesses]]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PLAYGROUND_RESPONSE_CACHE": str(cache)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="textworld:easy")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--steps", type=int, default=15)
    args = parser.parse_args()
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp, ScriptedChatServer(default=(model := Model())) as server:
        root = Path(tmp)
        for name, harnesses, cache, out in (("base alone", ["base"], "cache-base", "base"),
                                            ("sentry alone", ["sentry"], "cache-sentry", "sentry"),
                                            ("8-harness sweep", SWEEP, "cache-sweep", "sweep"),
                                            ("the sweep again", SWEEP, "cache-sweep", "sweep-again")):
            before = model.requests
            play(server.base_url, harnesses, root / out, root / cache, args)
            counts[name] = model.requests - before
            summary = json.loads((root / out / "summary.json").read_text())
            cache_use = summary.get("response_cache", {})
            print(f"{name:<16} model calls {counts[name]:>6}  cache hits {cache_use.get('hits', 0):>6}  "
                  f"misses {cache_use.get('misses', 0):>6}", flush=True)
            if out == "sweep":  # the harnesses did diverge: their interventions and moves differ
                for harness, figures in summary["harnesses"].items():
                    print(f"  {harness:<22} interventions {sum(figures['interventions'].values()):>4}  "
                          f"lessons {figures['lessons_added']:>3}  agent tokens/ep {figures['tokens_per_episode'] or 0:>8.0f}")
    sweep = counts["8-harness sweep"]
    print(f"the {len(SWEEP)}-harness sweep made {sweep / max(counts['base alone'], 1):.2f}x the model calls of base "
          f"alone and {sweep / max(counts['sentry alone'], 1):.2f}x those of sentry alone; "
          f"the rerun made {counts['the sweep again']}")


if __name__ == "__main__":
    main()
