"""AED's LLM diagnoser against judge quality: the failure-injection instrument as the diagnoser, at set accuracies.

INSTRUMENT FIGURES, not evidence about any LLM. One `noisy` run (base harness) is played once; for each accuracy a
copy of it is diagnosed by the instrument answering AED's diagnoser role (`aed diagnose --llm-instrument A`: the
first injected step and its planned action, right with probability A, a realistic mistake otherwise), its kept
pairs are replayed (`aed replay`: the correction against a retry of the original action from the same rebuilt
state, under the run's own agent, an oracle continuation) and summarised (`aed summary --json`). Each cell
reports the grounded-diagnosis yield (records passing the checks / all records) and the correction and retry pass
rates. Resumable: rerun the same command; a finished step of a cell is not done again.

    python scripts/sweep_aed_instrument.py --out runs/instrument-aed [--env textworld:custom] [--episodes 50]
        [--trials 5] [--max-steps 12] [--accuracies 0.5,0.7,0.86,1.0] [--replay-trials 2]
        [--docs docs/runs/instrument-aed] [--svg docs/img/aed-instrument-diagnoser.svg]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.forks import load_episode
from playground.run.runner import run
from playground.run.svg import color, line_chart, standalone
from playground.run.traces import read_jsonl
from playground.run.validation import resolve_tasks

# the instrument's failure rates per step: enough that about half the episodes fail within the budget
RATES = {"invalid": 0.08, "malformed": 0.02, "repeat": 0.06, "stall": 0.06, "drift": 0.06, "stop": 0.03}
PLAYGROUND = str(Path(sys.executable).with_name("playground"))
RUN_FILES = ("config.json", "lock.json", "episodes.jsonl", "summary.json")
CELL_FILES = ("diagnose.json", "diagnoses.jsonl", "rejected.jsonl", "instrument.json", "replays.jsonl",
              "summary.json")


def play(host: Host, env_spec: str, episodes: int, trials: int, max_steps: int, out: Path) -> float:
    """Play the noisy run (resumable); return the seconds it took."""
    env, _, task_set = env_spec.partition(":")
    task_set, split, tasks = resolve_tasks(host, env, task_set or None, None, episodes)
    started = time.perf_counter()
    run(host, RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent="noisy", harnesses=["base"],
                        out=str(out), max_steps=max_steps, trials=trials, agent_options=dict(RATES)))
    return time.perf_counter() - started


def aed(*args: str) -> str:
    """Run one `playground aed` command; return its standard output (its standard error goes through)."""
    return subprocess.run([PLAYGROUND, "aed", *args], check=True, capture_output=False, text=True,
                          stdout=subprocess.PIPE).stdout


def cell_dir(out: Path, accuracy: float) -> Path:
    """The folder of one accuracy's copy of the run."""
    return out / f"acc{accuracy:g}"


def do_cell(run_dir: Path, cell: Path, accuracy: float, replay_trials: int) -> dict[str, float]:
    """Diagnose, replay and summarise one cell, each step only if not done yet; return the seconds per step."""
    seconds: dict[str, float] = {}
    if not (cell / "config.json").is_file():
        shutil.copytree(run_dir, cell, ignore=shutil.ignore_patterns("aed", "forks"))
    marks = cell / "aed"
    if not (marks / "diagnose.json").is_file() or (marks / "diagnose.partial.json").is_file():
        started = time.perf_counter()
        aed("diagnose", str(cell), "--llm-instrument", f"{accuracy:g}")
        seconds["diagnose"] = time.perf_counter() - started
    if not (marks / "replay.json").is_file():
        started = time.perf_counter()
        counts = aed("replay", str(cell), "--trials", str(replay_trials))
        (marks / "replay.json").write_text(counts)
        seconds["replay"] = time.perf_counter() - started
    (marks / "summary.json").write_text(aed("summary", str(cell), "--json"))
    return seconds


def split_by_grade(cell: Path, grades: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The replayed pairs split by whether the instrument's reply was right (its grade, by episode): pairs, and the
    mean share of trials won by the correction and by the retry."""
    split: dict[str, list[tuple[float, float]]] = {"right": [], "wrong": []}
    for replay in read_jsonl(cell / "aed" / "replays.jsonl"):
        episode = load_episode(cell / replay["trace"]).header.episode_id
        treatment, control = replay["treatment_won"], replay["control_won"]
        split["right" if grades[str(episode)]["correct"] else "wrong"].append(
            (sum(treatment) / len(treatment), sum(control) / len(control)))
    return {k: {"pairs": len(v), "correction_pass_rate": sum(t for t, _ in v) / len(v) if v else None,
                "retry_pass_rate": sum(c for _, c in v) / len(v) if v else None} for k, v in split.items()}


def measure(cell: Path, accuracy: float) -> dict[str, Any]:
    """One cell's figures, from its files."""
    diagnosed = json.loads((cell / "aed" / "diagnose.json").read_text())
    graded = json.loads((cell / "aed" / "instrument.json").read_text())
    summary = json.loads((cell / "aed" / "summary.json").read_text())
    produced = diagnosed["yield"]["produced"]
    return {"accuracy": accuracy, "failed": diagnosed["failed"], "produced": produced,
            "by_reply": split_by_grade(cell, graded["episodes"]),
            "right": graded["right"], "graded": graded["graded"],
            "checked": diagnosed["yield"]["checked"], "with_correction": diagnosed["yield"]["with_correction"],
            "grounded_yield": diagnosed["yield"]["checked"] / produced if produced else None,
            "rejected": diagnosed["rejected"], "replayed": summary.get("replayed_pairs", 0),
            "correction_pass_rate": summary.get("correction_pass_rate"),
            "retry_pass_rate": summary.get("retry_pass_rate"), "difference": summary.get("difference"),
            "difference_ci95": summary.get("difference_ci95"), "p_value": summary.get("p_value"),
            "grades": summary.get("grades", {})}


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one row per accuracy."""
    lines = ["| diagnoser accuracy | failed episodes | replies right | grounded (checked / produced) | "
             "rejected by reason | pairs replayed | correction pass rate | retry pass rate | "
             "difference [95% CI] | E2 / E1 / none | right replies: pairs, correction / retry | "
             "wrong replies: pairs, correction / retry |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        reasons = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in r["rejected"].items()) or "-"
        ci = r["difference_ci95"] or [None, None]
        grades = r["grades"]
        lines.append(f"| {r['accuracy']:g} | {r['failed']} | {r['right']}/{r['graded']} | "
                     f"{r['checked']}/{r['produced']} ({_f(r['grounded_yield'])}) | {reasons} | {r['replayed']} | "
                     f"{_f(r['correction_pass_rate'])} | {_f(r['retry_pass_rate'])} | "
                     f"{_f(r['difference'])} [{_f(ci[0])}, {_f(ci[1])}] | "
                     f"{grades.get('E2', 0)} / {grades.get('E1', 0)} / {grades.get('none', 0)} | "
                     + " | ".join(f"{b['pairs']}, {_f(b['correction_pass_rate'])} / {_f(b['retry_pass_rate'])}"
                                  for b in (r["by_reply"]["right"], r["by_reply"]["wrong"])) + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]]) -> str:
    """A standalone SVG image: grounded yield, correction and retry pass rates against the diagnoser's accuracy."""
    names = ("grounded yield", "correction pass rate", "retry pass rate")
    keys = ("grounded_yield", "correction_pass_rate", "retry_pass_rate")
    series = [(name, [(r["accuracy"], r[key]) for r in rows if r[key] is not None], color(i))
              for i, (name, key) in enumerate(zip(names, keys))]
    return standalone(line_chart(series, "diagnoser accuracy (instrument)", "share"), list(names),
                      [color(i) for i in range(3)])


def keep(run_dir: Path, out: Path, accuracies: list[float], docs: Path) -> None:
    """Copy the run's small files, its traces (traces.tar.gz) and every cell's AED outputs to `docs`."""
    docs.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        shutil.copy(run_dir / name, docs / name)
    with tarfile.open(docs / "traces.tar.gz", "w:gz") as tar:
        tar.add(run_dir / "traces", arcname="traces")
    for accuracy in accuracies:
        target = docs / cell_dir(out, accuracy).name
        target.mkdir(exist_ok=True)
        for name in CELL_FILES:
            shutil.copy(cell_dir(out, accuracy) / "aed" / name, target / name)
    for name in ("table.md", "table.json"):
        shutil.copy(out / name, docs / name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="work folder: the run and one copy per accuracy (resumable)")
    parser.add_argument("--env", default="textworld:custom", help="ENV:TASK_SET")
    parser.add_argument("--episodes", type=int, default=50, help="tasks")
    parser.add_argument("--trials", type=int, default=5, help="trials per task")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--accuracies", default="0.5,0.7,0.86,1.0", help="comma-separated diagnoser accuracies")
    parser.add_argument("--replay-trials", type=int, default=2, help="aed replay --trials")
    parser.add_argument("--docs", default=None, help="copy the small files here")
    parser.add_argument("--svg", default=None, help="write the plot here too")
    args = parser.parse_args()
    accuracies = [float(a) for a in args.accuracies.split(",")]
    if any(not 0 <= a <= 1 for a in accuracies):
        parser.error("--accuracies: each between 0 and 1")
    out = Path(args.out)
    run_dir = out / "run"
    seconds = play(Host(strict=True).load(), args.env, args.episodes, args.trials, args.max_steps, run_dir)
    print(f"run: {seconds:.0f} s", file=sys.stderr)
    rows = []
    for accuracy in accuracies:
        took = do_cell(run_dir, cell_dir(out, accuracy), accuracy, args.replay_trials)
        print(f"acc {accuracy:g}: " + ", ".join(f"{k} {v:.0f} s" for k, v in took.items()), file=sys.stderr)
        rows.append(measure(cell_dir(out, accuracy), accuracy))
    text = table(rows)
    (out / "table.md").write_text("Instrument figures (AED's LLM diagnoser played by the `noisy` instrument at a "
                                  f"set accuracy): not evidence about any LLM.\n\n{text}\n")
    (out / "table.json").write_text(json.dumps({"env": args.env, "cells": rows}, indent=1) + "\n")
    svg = plot(rows) + "\n"
    (out / "diagnoser-accuracy.svg").write_text(svg)
    if args.svg:
        Path(args.svg).write_text(svg)
    if args.docs:
        keep(run_dir, out, accuracies, Path(args.docs))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
