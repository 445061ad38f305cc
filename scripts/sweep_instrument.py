"""Where each of Sentry's mechanisms pays off: sweeps of the failure-injection instrument as the judges' model.

INSTRUMENT FIGURES. The `noisy` agent plays the tasks and also answers Sentry's judge roles (detector, need
check, verifier, summariser) from its own injected truth, right with a set probability (`judge_accuracy`, or one
kind's own `verifier_accuracy`), and takes the actions guidance names with a set probability (`compliance`,
`take_named=true`). The figures say how each mechanism depends on judge quality and compliance, never how any
LLM would do. Every cell is a `playground run` directory under OUT (resumable: rerun the same command), and the
table, JSON and SVG plots are derived from the run files alone (`table` redraws them).

    python scripts/sweep_instrument.py sentry --env textworld:custom --out docs/runs/instrument-sentry-tw
        [--episodes 100] [--accuracies 0.5,0.7,0.86,1.0] [--compliance 0.5,1.0] [--max-steps 40] [--rates JSON]
    python scripts/sweep_instrument.py verified --env textworld:custom --out docs/runs/instrument-verified-tw
        [--episodes 100] [--accuracies 0.6,0.7,0.8,0.9,1.0] [--others 1.0]
    python scripts/sweep_instrument.py table --out DIR      (re-derive table.md, table.json and the plots)
    python scripts/sweep_instrument.py pack --out DIR [--no-traces]   (the cells' small files for the repository)
    python scripts/sweep_instrument.py place --run DIR      (a run with `--agent-option judge=local` or
                                                             `shadow=local`: the model's accuracy per judge kind)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from playground.host.manager import Host
from playground.plugins.sentry.judge_quality import judge_grades, learning_curve, lesson_precision, success_against
from playground.run.config import RunConfig
from playground.run.rundir import TRACES_LEFT_OUT
from playground.run.runner import run
from playground.run.svg import color, line_chart, standalone
from playground.run.validation import resolve_tasks

SENTRY_HARNESSES = ("base", "sentry", "sentry-no-verify", "sentry-retrieval-off", "sentry-no-need-check")
VERIFIED_HARNESSES = ("base", "sentry", "sentry-no-verify")
# the instrument's failure rates in every cell (per step): the defaults, with early stops and drift more frequent so
# that an unrepaired episode often fails within the budget
RATES = {"invalid": 0.08, "malformed": 0.02, "repeat": 0.06, "stall": 0.06, "drift": 0.06, "stop": 0.05}


def cell_name(kind: str, accuracy: float, compliance: float, others: float = 1.0) -> str:
    """The folder of one cell: the accuracy swept, the other judges' accuracy (verified sweep) and the compliance."""
    if kind == "verified":
        return f"{kind}-acc{accuracy:g}-others{others:g}-comp{compliance:g}"
    return f"{kind}-acc{accuracy:g}-comp{compliance:g}"


def play_cell(host: Host, env_spec: str, episodes: int, max_steps: int, out: Path, harnesses: tuple[str, ...],
              options: dict[str, Any], rates: dict[str, float] | None = None) -> float:
    """Play one cell (resumable) with the failure `rates` (default `RATES`); return the seconds it took."""
    env, _, task_set = env_spec.partition(":")
    task_set, split, tasks = resolve_tasks(host, env, task_set or None, None, episodes)
    started = time.perf_counter()
    run(host, RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent="noisy",
                        harnesses=list(harnesses), out=str(out), max_steps=max_steps,
                        agent_options={**(RATES if rates is None else rates), "take_named": True, **options}))
    return time.perf_counter() - started


def cell_options(kind: str, accuracy: float, compliance: float, others: float = 1.0) -> dict[str, Any]:
    """The instrument's options for a cell: every judge at `accuracy` (sentry sweep), or the verifier at `accuracy`
    and the other judges at `others` (verified sweep)."""
    if kind == "verified":
        return {"judge_accuracy": others, "verifier_accuracy": accuracy, "compliance": compliance}
    return {"judge_accuracy": accuracy, "compliance": compliance}


ARCHIVE = "traces.tar.xz"


def unpack(cell: Path) -> bool:
    """A packed cell's traces back in place (`pack` keeps them as traces.tar.xz); True when it unpacked them."""
    archive = cell / ARCHIVE
    if (cell / "traces").is_dir() or not archive.is_file():
        return False
    with tarfile.open(archive) as opened:
        opened.extractall(cell, filter="data")
    return True


def pack(out: Path, traces: bool = True) -> None:
    """Keep each cell's small files for the repository: the traces of its Sentry harnesses as traces.tar.xz (base's
    and the playbooks dropped: a rerun of the cell, deterministic, rebuilds them; the tables need neither); with
    `traces` False no trace at all (the success figures and the judges' grades read the records and summary; lesson
    precision then needs a rerun of the cell)."""
    for cell in sorted(d for d in out.iterdir() if (d / "config.json").is_file()):
        if (cell / "traces").is_dir() and not traces:
            shutil.rmtree(cell / "traces")
        if (cell / "traces").is_dir():
            with tarfile.open(cell / ARCHIVE, "w:xz") as archive:
                for harness in sorted((cell / "traces").iterdir()):
                    if harness.name != "base":
                        archive.add(harness, arcname=f"traces/{harness.name}")
            shutil.rmtree(cell / "traces")
        shutil.rmtree(cell / "playbooks", ignore_errors=True)
        (cell / ".lock").unlink(missing_ok=True)
        (cell / TRACES_LEFT_OUT).write_text("traces left out of the repository on purpose (scripts/sweep_instrument.py "
                                            "pack); a resume keeps the finished episodes\n")


def measure_cell(host: Host, out: Path) -> dict[str, Any]:
    """Every figure of one cell, from its run files (a packed cell's traces unpacked while it is measured)."""
    unpacked = unpack(out)
    try:
        return _measure(host, out)
    finally:
        if unpacked:
            shutil.rmtree(out / "traces")


def _measure(host: Host, out: Path) -> dict[str, Any]:
    config = json.loads((out / "config.json").read_text())
    harnesses = config["harnesses"]
    rows = {}
    traced = (out / "traces").is_dir()
    summary = json.loads((out / "summary.json").read_text())["harnesses"] if (out / "summary.json").is_file() else {}
    for harness in harnesses:
        row: dict[str, Any] = success_against(out, harness)
        if harness != "base":
            row["judges"] = judge_grades(out, harness) if traced else graded_in_summary(summary.get(harness, {}))
            row["lessons"] = lesson_precision(out, harness) if traced else {}
            curve = learning_curve(out, harness)
            row["first_quarter"], row["last_quarter"] = curve["first_quarter"], curve["last_quarter"]
        rows[harness] = row
    return {"cell": out.name, "agent_options": config.get("agent_options", {}), "harnesses": rows}


def graded_in_summary(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The judges' graded calls as a summary counts them (`judge_replies`' graded/right per role), for a cell kept
    without traces: {kind: {"calls", "right", "accuracy"}}, the kind being the role's name after its plugin's."""
    grades = {}
    for role, counts in (entry.get("judge_replies") or {}).items():
        if counts.get("graded"):
            grades[role.split(".")[-1]] = {"calls": counts["graded"], "right": counts["right"],
                                           "accuracy": counts["right"] / counts["graded"]}
    return dict(sorted(grades.items()))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _p(value: float | None) -> str:
    return "-" if value is None else (f"{value:.3f}" if value >= 0.001 else f"{value:.1e}")


def table(cells: list[dict[str, Any]]) -> str:
    """A markdown table: one row per (cell, harness)."""
    lines = ["| cell | harness | success | 95% CI | vs base b/c | p (McNemar) | judges right | lessons | "
             "lesson precision | base rate | first/last quarter |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell in cells:
        for harness, row in cell["harnesses"].items():
            judges = row.get("judges") or {}
            right = ", ".join(f"{k} {_pct(v['accuracy'])}" for k, v in judges.items()) or "-"
            lessons = row.get("lessons") or {}
            ci = row["ci95"]
            pair = "-" if harness == "base" else f"{row['b']}/{row['c']}"
            lines.append(
                f"| {cell['cell']} | {harness} | {row['won']}/{row['episodes']} ({_pct(row['success'])}) | "
                f"{_pct(ci[0])}-{_pct(ci[1])} | {pair} | "
                f"{'-' if harness == 'base' else _p(row['p'])} | {right} | {lessons.get('lessons', '-')} | "
                f"{_pct(lessons.get('precision'))} | {_pct(lessons.get('base_rate'))} | "
                f"{_pct(row.get('first_quarter'))}/{_pct(row.get('last_quarter'))} |")
    return "\n".join(lines)


def matrix(kind: str, cells: list[dict[str, Any]]) -> str:
    """The compact tables for docs: per compliance (sentry) or other judges' accuracy (verified), one row per
    harness and one column per swept accuracy; each cell the episodes won and the McNemar p against base, or (verified)
    the lesson precision and the base rate."""
    group = "compliance" if kind == "sentry" else "judge_accuracy"
    out = []
    for level in sorted({float(c["agent_options"][group]) for c in cells}):
        mine = sorted((c for c in cells if float(c["agent_options"][group]) == level), key=lambda c: _accuracy(c, kind))
        accs = [_accuracy(c, kind) for c in mine]
        title = f"compliance {level:g}" if kind == "sentry" else f"other judges at {level:g}"
        out += [f"**{title}** (columns: {'judge' if kind == 'sentry' else 'verifier'} accuracy)", "",
                "| harness | " + " | ".join(f"{a:g}" for a in accs) + " |", "|---" * (len(accs) + 1) + "|"]
        for harness in mine[0]["harnesses"] if mine else []:
            row = []
            for c in mine:
                r = c["harnesses"][harness]
                won = f"{r['won']}/{r['episodes']}"
                if harness != "base":
                    won += f" (p {_p(r['p'])})"
                if kind == "verified" and harness != "base":
                    won += f"; precision {_pct(r['lessons']['precision'])} of {r['lessons']['lessons']}"
                row.append(won)
            out.append(f"| {harness} | " + " | ".join(row) + " |")
        if kind == "verified":
            out.append("| base rate (sentry's repairs truly resolved) | " + " | ".join(
                _pct(c["harnesses"]["sentry"]["lessons"]["base_rate"]) for c in mine) + " |")
        out.append("")
    return "\n".join(out)


def _accuracy(cell: dict[str, Any], kind: str) -> float:
    options = cell["agent_options"]
    return float(options["verifier_accuracy"] if kind == "verified" else options["judge_accuracy"])


def plots(kind: str, cells: list[dict[str, Any]]) -> dict[str, str]:
    """SVG plots: success against judge accuracy per compliance (sentry), or lesson precision and the base rate
    against verifier accuracy (verified)."""
    svgs: dict[str, str] = {}
    if kind == "sentry":
        for compliance in sorted({float(c["agent_options"]["compliance"]) for c in cells}):
            mine = sorted((c for c in cells if float(c["agent_options"]["compliance"]) == compliance),
                          key=lambda c: _accuracy(c, kind))
            names = list(mine[0]["harnesses"]) if mine else []
            series = [(h, [(_accuracy(c, kind), c["harnesses"][h]["success"]) for c in mine], color(i))
                      for i, h in enumerate(names)]
            svgs[f"success-comp{compliance:g}.svg"] = standalone(
                line_chart(series, "judge accuracy (instrument)", "success"), names, [color(i) for i in range(len(names))])
    else:
        for others in sorted({float(c["agent_options"]["judge_accuracy"]) for c in cells}):
            mine = sorted((c for c in cells if float(c["agent_options"]["judge_accuracy"]) == others),
                          key=lambda c: _accuracy(c, kind))
            series = []
            for i, (harness, what) in enumerate((("sentry", "precision"), ("sentry-no-verify", "precision"),
                                                 ("sentry", "base_rate"))):
                points = [(_accuracy(c, kind), c["harnesses"][harness]["lessons"][what]) for c in mine
                          if harness in c["harnesses"] and c["harnesses"][harness]["lessons"][what] is not None]
                series.append((f"{harness} {what}", points, color(i)))
            svgs[f"lesson-precision-others{others:g}.svg"] = standalone(
                line_chart(series, "verifier accuracy (instrument)", "share of lessons"),
                [s[0] for s in series], [s[2] for s in series])
    return svgs


def write_outputs(host: Host, out: Path, kind: str) -> str:
    """Measure every cell under `out` and write table.md, table.json and the plots; return the table."""
    cells = [measure_cell(host, d) for d in sorted(out.iterdir()) if (d / "config.json").is_file()]
    text = table(cells)
    (out / "table.md").write_text(f"Instrument figures ({kind} sweep): not evidence about any LLM.\n\n{text}\n")
    (out / "table.json").write_text(json.dumps({"kind": kind, "cells": cells}, indent=1) + "\n")
    (out / "matrix.md").write_text(matrix(kind, cells) + "\n")
    for name, svg in plots(kind, cells).items():
        (out / name).write_text(svg + "\n")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("sentry", "verified", "table", "place", "pack"))
    parser.add_argument("--env", default="textworld:custom", help="ENV:TASK_SET")
    parser.add_argument("--out", help="folder of the cells (kept; a rerun resumes them)")
    parser.add_argument("--run", help="place: a run directory played with --agent-option judge=local")
    parser.add_argument("--episodes", type=int, default=100, help="tasks per cell")
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--accuracies", default=None, help="comma-separated judge (or verifier) accuracies")
    parser.add_argument("--compliance", default=None, help="comma-separated compliance levels")
    parser.add_argument("--rates", default=None, help='the failure rates as JSON (default: RATES), e.g. '
                        '\'{"repeat": 0.1, "stall": 0.1, "drift": 0.1, "stop": 0}\'')
    parser.add_argument("--no-traces", action="store_true", help="pack: keep no trace (see pack())")
    parser.add_argument("--others", type=float, default=1.0,
                        help="verified: the accuracy of the judges other than the verifier")
    args = parser.parse_args()
    host = Host(strict=True).load()
    if args.what == "place":
        if not args.run:
            parser.error("place needs --run DIR")
        unpacked = unpack(Path(args.run))
        try:
            print(json.dumps({"answered": judge_grades(args.run, "sentry"),
                              "shadow": judge_grades(args.run, "sentry", shadow=True)}, indent=1))
        finally:
            if unpacked:
                shutil.rmtree(Path(args.run) / "traces")
        return 0
    if not args.out:
        parser.error(f"{args.what} needs --out DIR")
    out = Path(args.out)
    if args.what == "pack":
        pack(out, traces=not args.no_traces)
        return 0
    if args.what == "table":
        kind = json.loads((out / "table.json").read_text())["kind"] if (out / "table.json").is_file() else \
            ("verified" if any(d.name.startswith("verified") for d in out.iterdir()) else "sentry")
        print(write_outputs(host, out, kind))
        return 0
    kind = args.what
    rates = json.loads(args.rates) if args.rates else None
    if rates is not None and (not isinstance(rates, dict) or not all(isinstance(v, (int, float)) for v in rates.values())):
        parser.error("--rates must be a JSON object of failure rates")
    accuracies = [float(a) for a in (args.accuracies or ("0.5,0.7,0.86,1.0" if kind == "sentry"
                                                          else "0.6,0.7,0.8,0.9,1.0")).split(",")]
    compliance = [float(c) for c in (args.compliance or ("0.5,1.0" if kind == "sentry" else "1.0")).split(",")]
    harnesses = SENTRY_HARNESSES if kind == "sentry" else VERIFIED_HARNESSES
    for level in compliance:
        for accuracy in accuracies:
            cell = out / cell_name(kind, accuracy, level, args.others)
            seconds = play_cell(host, args.env, args.episodes, args.max_steps, cell, harnesses,
                                cell_options(kind, accuracy, level, args.others), rates)
            print(f"{cell.name}: played in {seconds:.0f} s", file=sys.stderr)
    print(write_outputs(host, out, kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
