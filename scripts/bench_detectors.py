"""Sentry's detectors and verifier measured against the failures the `noisy` agent injected.

For each env, the `noisy` agent plays the same tasks under `base` (nothing repaired, so the
injected failures are not altered) and `sentry` (repairs, for the verifier's verdicts),
through the real runner. Sentry's rules are then replayed offline over the `base` traces
from the blind view, the LLM judge (the embedded model) on a sample of their steps, and
every detection is matched with the injections the agent recorded in the trace
(`plugins/sentry/truth.py`, rule in `plugins/sentry/measure.py`). Prints the tables of
`playground sentry detectors` for all envs together. `noisy` is an instrument: the figures
say how well the rules see its failures, not an LLM agent's.

    python scripts/bench_detectors.py [--episodes 20] [--envs textworld:custom,alfworld:generated,webshop:generated]
        [--llm-sample 30] [--window 3] [--match mode|label] [--out DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from playground.host.manager import Host
from playground.plugins.sentry.bench import measure_run, tables
from playground.run.files import safe_file_name
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.run.validation import resolve_tasks

ENVS = "textworld:custom,alfworld:generated,webshop:generated"


def play(host: Host, env_spec: str, episodes: int, max_steps: int, out: Path) -> None:
    """The noisy agent on `episodes` test tasks of ENV:TASK_SET under `base` and `sentry`, into `out` (resumable)."""
    env, _, task_set = env_spec.partition(":")
    task_set, split, tasks = resolve_tasks(host, env, task_set or None, None, episodes)
    run(host, RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent="noisy",
                        harnesses=["base", "sentry"], out=str(out), max_steps=max_steps))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="tasks per env")
    parser.add_argument("--envs", default=ENVS, help="comma-separated ENV:TASK_SET")
    parser.add_argument("--llm-sample", type=int, default=30,
                        help="steps per env the LLM judge is asked about (0: none)")
    parser.add_argument("--window", type=int, default=3, help="steps after an injection a detection still counts for")
    parser.add_argument("--match", choices=("mode", "label"), default="mode")
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--out", default=None, help="folder for the runs (kept; a rerun resumes them)")
    parser.add_argument("--json", default=None, help="also write the reports as JSON to this file")
    args = parser.parse_args()
    if args.episodes < 1 or args.llm_sample < 0 or args.window < 0:
        print("error: --episodes must be at least 1, --llm-sample and --window 0 or more", file=sys.stderr)
        return 2

    host = Host(strict=True).load()
    judge = None
    if args.llm_sample:
        from playground.plugins.sentry.judges import LLMDetector, make_judge_model

        judge = LLMDetector(make_judge_model({"judge_local": True}))
    root = Path(args.out or tempfile.mkdtemp(prefix="bench-detectors-"))
    reports = []
    for env_spec in [e.strip() for e in args.envs.split(",") if e.strip()]:
        out = root / safe_file_name(env_spec)
        started = time.perf_counter()
        play(host, env_spec, args.episodes, args.max_steps, out)
        played = time.perf_counter() - started
        reports.append(measure_run(host, out, window=args.window, match=args.match, llm_sample=args.llm_sample,
                                   judge=judge))
        print(f"{env_spec}: {reports[-1]['episodes']} episodes, {reports[-1]['steps']} steps, injected "
              f"{reports[-1]['injections']}; played in {played:.0f} s, measured in "
              f"{time.perf_counter() - started - played:.0f} s ({out})", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2) + "\n", encoding="utf-8")
    print(tables(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
