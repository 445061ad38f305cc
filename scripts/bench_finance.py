"""Finance figures, side by side in one run: BM25 latency, accuracy by retrieval budget, detector precision/recall.

1. BM25 retrieval latency: index build time and per-query p50/p99 over the benchmark's
   train file (from `--data`, the shared samples by default) and over generated train
   splits, querying with held-out questions at k=16.
2. Accuracy of the `format-noisy` agent by retrieval budget k in {0, 1, 2, 4, 8, 16}
   (k=0: harness `base`; k>0: `demos-k<k>`), plus `format-guard` for reference, on the
   benchmark's val files and on generated test tasks, through the real runner. Record-level
   accuracy = success rate; entity-level accuracy (FiNER) = correct tags / gold tags.
3. Precision and recall of the format detector per label, on a labelled set built here:
   every failure mode of `format-noisy` applied to real and generated questions (labelled
   by the mode), the gold answers (labelled clean), and hand-written harder answers.

`format-noisy` is an instrument: these numbers show the machinery works (and how big a
difference each budget makes under its documented demo factor), never how an LLM does.

    python scripts/bench_finance.py [--data ../shared/data/finance] [--tasks 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from playground.envs.finance import data, demos
from playground.envs.finance.agents import MODE_LABELS, NUMBER_MODES, TAG_MODES, break_answer
from playground.envs.finance.format_check import LABELS, check, expected_format
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.rundir import load_records
from playground.run.runner import run

BUDGETS = (0, 1, 2, 4, 8, 16)
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/finance"


# -- 1. BM25 latency ---------------------------------------------------------------------


def latency(task_set: str, queries: list[data.Task], splits: list[str] | None = None, size: int = 500) -> dict:
    """Build the index of `task_set` from scratch and time `queries` at k=16."""
    demos._INDEXES.clear()
    started = time.perf_counter()
    index = demos.get_index(task_set, splits, size)
    build = time.perf_counter() - started
    times = []
    for query in queries:
        started = time.perf_counter()
        demos.retrieve(index, query.id, query.context, 16)
        times.append(time.perf_counter() - started)
    times.sort()
    return {"pool": len(index.tasks), "build_s": build, "p50_ms": 1000 * statistics.median(times),
            "p99_ms": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))], "queries": len(times)}


# -- 2. accuracy by k --------------------------------------------------------------------


def accuracy(host: Host, task_set: str, split: str, tasks: list[str], out: Path, seed: int,
             params: dict | None = None) -> dict[str, dict]:
    """Run format-noisy under base, demos-k* and format-guard; return figures per column."""
    harnesses = ["base"] + [f"demos-k{k}" for k in BUDGETS if k] + ["format-guard"]
    summary = run(host, RunConfig(env="finance", task_set=task_set, split=split, tasks=tasks, agent="format-noisy",
                                  harnesses=harnesses, out=str(out), seed=seed, params=dict(params or {}), strict=True))
    records = load_records(out)
    figures = {}
    for harness in harnesses:
        mine = [r for r in records if r.harness == harness]
        column = "k=0" if harness == "base" else ("guard" if harness == "format-guard" else harness.replace("demos-k", "k="))
        figures[column] = {
            "record": summary["harnesses"][harness]["success_rate"],
            "entity": sum(r.score for r in mine) / sum(r.max_score for r in mine),
            "malformed": summary["harnesses"][harness]["invalid_actions_per_episode"],
        }
    return figures


# -- 3. detector precision / recall ------------------------------------------------------

HARD_NUMBERS = [  # (answer, labels a careful reader would give)
    ("**5.0**", {"prose_around_answer"}), ("5.0 USD", {"prose_around_answer"}), ('"5.0"', {"prose_around_answer"}),
    ("5,0", {"unparseable_number"}), ("5.00%", {"unparseable_number"}), ("Five point zero", {"unparseable_number"}),
    ("5.0\n\nExplanation: current assets divided by liabilities", {"prose_around_answer"}),
    ('{"answer": 5.0}', {"extra_fields"}), ("ANSWER=5", {"prose_around_answer"}), ("(5.0)", {"unparseable_number"}),
    ("5.0 (or 5.00 rounded)", {"prose_around_answer", "extra_fields"}), ("approx. 5", {"prose_around_answer"}),
    ("1 234.5", {"unparseable_number"}), ("-", {"unparseable_number"}), ("5.0;", {"unparseable_number"}),
    ("5.0", set()), ("-0.25", set()), ("1234.57", set()), ("  12.0  ", set()), ("1e6", set()),
]


def hard_tags(tags: list[str]) -> list[tuple[str, set[str]]]:
    """Hand-written harder tag answers for a question whose gold is `tags` (4 tags)."""
    a, b, c, d = tags
    return [
        (f"[{a}, {b}, {c}, {d}]", {"prose_around_answer"}),
        (f"'{a}','{b}','{c}','{d}'", {"prose_around_answer"}),
        (f"{a}; {b}; {c}; {d}", {"wrong_tag_count", "extra_fields"}),
        (f"{a},{b},{c}", {"wrong_tag_count"}),
        (f"us-gaap:{a},{b},{c},{d}", {"prose_around_answer"}),
        (f"{a},{b},{c},{d}\nThese tags follow the order of the questions.", {"prose_around_answer"}),
        (f"{a} ({'34.6'}),{b},{c},{d}", {"extra_fields"}),
        (f"{a},{b},{c},{d}Total", {"unknown_tag"}),
        (f"{a},{b},{c},{d}", set()),
        (f"{a.lower()}, {b.upper()}, {c}, {d}", set()),
    ]


def labelled_set(tasks: list[data.Task], seed: int) -> list[tuple[str, str, set[str], str]]:
    """Return (context, answer, gold labels, source) items: noisy breaks, gold answers, hand-written cases."""
    rng = random.Random(f"bench-finance:{seed}")
    items = []
    for task in tasks:
        fmt = expected_format(task.context)
        items.append((task.context, task.target, set(), "gold"))
        for mode in NUMBER_MODES if fmt.kind == "number" else TAG_MODES:
            items.append((task.context, break_answer(fmt, task.target, mode, rng), {MODE_LABELS[mode]}, "noisy"))
    number = next(t for t in tasks if expected_format(t.context).kind == "number")
    tagged = [t for t in tasks if expected_format(t.context).kind == "tags" and len(t.target.split(",")) == 4]
    items += [(number.context, answer, gold, "hand") for answer, gold in HARD_NUMBERS]
    for task in tagged[:3]:
        items += [(task.context, answer, gold, "hand") for answer, gold in hard_tags(task.target.split(","))]
    return items


def precision_recall(items) -> dict[str, tuple[float, float, int]]:
    """Per label (and "any failure"): precision, recall, and how many items carry the label."""
    tp, fp, fn = Counter(), Counter(), Counter()
    for context, answer, gold, _ in items:
        found = {p.label for p in check(context, answer)}
        for label in LABELS:
            tp[label] += label in found and label in gold
            fp[label] += label in found and label not in gold
            fn[label] += label not in found and label in gold
        tp["any failure"] += bool(found) and bool(gold)
        fp["any failure"] += bool(found) and not gold
        fn["any failure"] += not found and bool(gold)
    return {label: (tp[label] / (tp[label] + fp[label]) if tp[label] + fp[label] else float("nan"),
                    tp[label] / (tp[label] + fn[label]) if tp[label] + fn[label] else float("nan"),
                    tp[label] + fn[label]) for label in (*LABELS, "any failure")}


# -- printing ----------------------------------------------------------------------------


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    """Print a plain-text table."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(cell).rjust(w) if i else str(cell).ljust(w) for i, (cell, w) in enumerate(zip(row, widths))))


def main() -> None:
    """Print the three tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="directory of the benchmark's JSONL files")
    parser.add_argument("--tasks", type=int, default=300, help="tasks per accuracy setting")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    have_data = Path(args.data).is_dir() and any(Path(args.data).glob("*.jsonl"))
    if have_data:
        os.environ[data.DATA_VARIABLE] = args.data
    else:
        os.environ.pop(data.DATA_VARIABLE, None)
        print(f"(no benchmark files under {args.data}: generated tasks only)")
    sets = data.task_sets()
    generated_queries = {family: [data.get_task(t) for t in sets[family].tasks("test", args.tasks)] for family in data.FAMILIES}

    # 1. latency
    rows = []
    settings = [("generated formula train (500)", "formula", generated_queries["formula"], None),
                ("generated finer train (500)", "finer", generated_queries["finer"], None)]
    if "formula-data" in sets:
        val = [s for s in sets["formula-data"].splits if "train" not in s]
        queries = [data.get_task(t) for s in val for t in sets["formula-data"].tasks(s)][: args.tasks]
        settings.insert(0, ("formula train file", "formula-data", queries, None))
    if "finer-data" in sets:
        split = sets["finer-data"].default_split
        queries = [data.get_task(t) for t in sets["finer-data"].tasks(split)][: args.tasks]
        settings.append((f"finer {split} (leave-one-out)", "finer-data", queries, [split]))
    for name, task_set, queries, splits in settings:
        figures = latency(task_set, queries, splits)
        rows.append([name, str(figures["pool"]), f"{figures['build_s']:.3f}", f"{figures['p50_ms']:.2f}",
                     f"{figures['p99_ms']:.2f}", str(figures["queries"])])
    table("1. BM25 retrieval (bm25s), k=16, never the query itself",
          ["pool", "docs", "build s", "query p50 ms", "query p99 ms", "queries"], rows)

    # 2. accuracy by k
    host = Host(strict=True).load()
    runs = [("generated formula (test)", "formula", "test", sets["formula"].tasks("test", args.tasks), {}),
            ("generated finer (test)", "finer", "test", sets["finer"].tasks("test", args.tasks), {})]
    if "formula-data" in sets:
        split = sets["formula-data"].default_split
        runs.insert(0, (f"formula {split}", "formula-data", split, sets["formula-data"].tasks(split)[: args.tasks], {}))
    if "finer-data" in sets:
        split = sets["finer-data"].default_split
        pool = {} if any("train" in s for s in sets["finer-data"].splits) else {"demo_pool": split}
        runs.insert(1, (f"finer {split}" + (" (pool: itself, leave-one-out)" if pool else ""), "finer-data", split,
                        sets["finer-data"].tasks(split)[: args.tasks], pool))
    columns = [f"k={k}" for k in BUDGETS] + ["guard"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for number, (name, task_set, split, tasks, params) in enumerate(runs):
            started = time.perf_counter()
            figures = accuracy(host, task_set, split, tasks, Path(tmp) / str(number), args.seed, params)
            seconds = time.perf_counter() - started
            rows.append([f"{name}, n={len(tasks)}: record", *(f"{figures[c]['record']:.3f}" for c in columns), f"{seconds:.1f}"])
            if "finer" in task_set:
                rows.append([f"{'':>{len(name)}}  entity", *(f"{figures[c]['entity']:.3f}" for c in columns), ""])
            rows.append([f"{'':>{len(name)}}  malformed", *(f"{figures[c]['malformed']:.3f}" for c in columns), ""])
    table("2. format-noisy accuracy by retrieval budget (default rates; guard = format-guard, k=0)",
          ["setting", *columns, "run s"], rows)

    # 3. detector precision / recall
    tasks = [t for family in data.FAMILIES for t in generated_queries[family][:100]]
    for name in ("formula-data", "finer-data"):
        if name in sets:
            split = sets[name].default_split
            tasks += [data.get_task(t) for t in sets[name].tasks(split)[:100]]
    items = labelled_set(tasks, args.seed)
    by_source = Counter(source for *_, source in items)
    results = {source: precision_recall([i for i in items if i[3] == source]) for source in ("noisy", "hand")}
    results["all"] = precision_recall(items)
    rows = []
    for label in (*LABELS, "any failure"):
        row = [label]
        for source in ("noisy", "hand", "all"):
            p, r, n = results[source][label]
            row.append("-" if n == 0 and p != p else f"{p:.2f} / {r:.2f} ({n})")
        rows.append(row)
    table(f"3. format detector precision / recall (support) on {len(items)} labelled answers "
          f"({by_source['gold']} gold, {by_source['noisy']} noisy breaks, {by_source['hand']} hand-written)",
          ["label", "noisy breaks", "hand-written", "all (incl. gold)"], rows)


if __name__ == "__main__":
    main()
