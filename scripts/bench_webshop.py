"""WebShop figures, side by side in one run: search latency, env latency, noisy reward by harness.

1. Search: BM25 index build time and per-query p50/p99 on the embedded catalogue (1,000
   products) and on a generated 10,000-product catalogue, with the goals' search queries;
   the ratio 10k/1k is printed.
2. Env: reset and step latency (p50/p99) of the env playing the expert's plan on the
   embedded catalogue, against the bare BM25 query each search step makes.
3. Reward of the `noisy` agent under `base` and `sentry` through the real runner, at the
   default failure rates and at stressed rates, with success (reward 1), mean reward,
   detections and lessons. `noisy` is an instrument: these say the machinery works on
   WebShop, never how an LLM agent does.

    python scripts/bench_webshop.py [--episodes 100] [--queries 200] [--max-steps 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from playground.envs.webshop import data
from playground.envs.webshop.catalogue import generate_catalogue
from playground.envs.webshop.env import WebShopEnv, expert_query
from playground.envs.webshop.search import build_index
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.rundir import load_records
from playground.run.runner import run

STRESSED = {"invalid": 0.15, "repeat": 0.1, "stall": 0.1, "drift": 0.1, "stop": 0.08}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def search_latency(n_products: int, queries: int) -> dict:
    catalogue = data.generated_catalogue() if n_products == 1000 else generate_catalogue(n_products, seed=0)
    started = time.perf_counter()
    index = build_index(catalogue)
    build = time.perf_counter() - started
    texts = [expert_query(data.generated_goal(catalogue, 20_000 + i)) for i in range(queries)]
    times = []
    for text in texts:
        started = time.perf_counter()
        index.search(text)
        times.append(time.perf_counter() - started)
    return {"products": n_products, "build_s": build, "p50_ms": 1e3 * statistics.median(times),
            "p99_ms": 1e3 * percentile(times, 0.99)}


def env_latency(episodes: int) -> dict:
    catalogue = data.generated_catalogue()
    env = WebShopEnv(catalogue, lambda task: data.generated_goal(catalogue, int(task)), expert=True)
    resets, steps, searches, bare = [], [], [], []
    for i in range(episodes):
        started = time.perf_counter()
        _, info = env.reset(options={"task": str(20_000 + i)})
        resets.append(time.perf_counter() - started)
        done = False
        while not done:
            action = info["expert_plan"][0]
            started = time.perf_counter()
            _, _, done, _, info = env.step(action)
            elapsed = time.perf_counter() - started
            (searches if action.startswith("search[") else steps).append(elapsed)
            if action.startswith("search["):
                started = time.perf_counter()
                env.index.search(action[7:-1])
                bare.append(time.perf_counter() - started)
    return {"reset_p50_ms": 1e3 * statistics.median(resets), "click_p50_ms": 1e3 * statistics.median(steps),
            "click_p99_ms": 1e3 * percentile(steps, 0.99), "search_step_p50_ms": 1e3 * statistics.median(searches),
            "bare_search_p50_ms": 1e3 * statistics.median(bare)}


def noisy_rewards(episodes: int, max_steps: int, rates: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        host = Host(strict=True).load()
        tasks = [f"generated-{20_000 + i}" for i in range(episodes)]
        run(host, RunConfig(env="webshop", task_set="generated", split="test", tasks=tasks, agent="noisy",
                            harnesses=["base", "sentry"], out=str(out), max_steps=max_steps, agent_options=rates))
        records = load_records(out)
        summary = json.loads((out / "summary.json").read_text())
    figures = {}
    for harness in ("base", "sentry"):
        mine = [r for r in records if r.harness == harness]
        figures[harness] = {"success": sum(r.status == "won" for r in mine) / len(mine),
                            "mean_reward": statistics.mean(float(r.score or 0.0) for r in mine),
                            "ci95": summary["harnesses"][harness].get("success_ci95"),
                            "detections": sum(r.detected_failures for r in mine),
                            "resolved_share": summary["harnesses"][harness].get("resolved_share"),
                            "lessons": sum(r.lessons_added for r in mine)}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--max-steps", type=int, default=15)
    args = parser.parse_args()

    small, large = search_latency(1000, args.queries), search_latency(10_000, args.queries)
    print("search (BM25, bm25s), per query with the goals' words:")
    for row in (small, large):
        print(f"  {row['products']:>6} products: index {row['build_s']:.2f} s, p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms")
    print(f"  ratio 10k/1k: p50 {large['p50_ms'] / small['p50_ms']:.2f}x, p99 {large['p99_ms'] / small['p99_ms']:.2f}x")

    env = env_latency(min(args.episodes, 200))
    print("env (expert plan, embedded catalogue):")
    print(f"  reset p50 {env['reset_p50_ms']:.3f} ms; click step p50 {env['click_p50_ms']:.3f} ms, p99 {env['click_p99_ms']:.3f} ms")
    print(f"  search step p50 {env['search_step_p50_ms']:.2f} ms vs bare BM25 query {env['bare_search_p50_ms']:.2f} ms "
          f"(ratio {env['search_step_p50_ms'] / env['bare_search_p50_ms']:.2f})")

    for name, rates in (("default rates", {}), (f"stressed rates {STRESSED}", STRESSED)):
        figures = noisy_rewards(args.episodes, args.max_steps, rates)
        print(f"noisy agent, {name}, {args.episodes} test goals, max {args.max_steps} steps:")
        for harness, row in figures.items():
            low, high = row["ci95"] or (0, 0)
            print(f"  {harness:<7} success {row['success']:.0%} ({low:.0%}-{high:.0%}), mean reward {row['mean_reward']:.3f}, "
                  f"detections {row['detections']}, resolved {row['resolved_share'] or 0:.0%}, lessons {row['lessons']}")


if __name__ == "__main__":
    main()
