"""DARC's LLM diagnoser against judge quality: the failure-injection instrument as the diagnoser's judge model.

INSTRUMENT FIGURES. The `noisy` agent plays ALFWorld's generated games as DARC's profiling run (`playground run
--harness darc-profile:sentry`: the base agent watched by detect-only detectors) and, after the run, answers DARC's
diagnoser role from the failures it injected and its trace recorded (`darc diagnose RUN_DIR --diagnoser instrument
--diagnoser-accuracy A`), naming the injected dominant mode with probability A and another candidate (or "none")
otherwise. The figures say how DARC's diagnosis, and the
policy it selects, depend on the diagnoser's accuracy; never how any LLM would do.

    python scripts/sweep_darc_instrument.py --out docs/runs/instrument-darc-alf
        [--seeds 0,1,2,3] [--episodes 120] [--accuracies 0.5,0.7,0.86,1.0] [--family-size 11]
        [--downstream docs/runs/darc-alf-noisy-v2]
    python scripts/sweep_darc_instrument.py --out DIR --table-only     (re-derive table.md, table.json, the plot)

Each seed is one folder, OUT/seedS: its profiling run OUT/seedS/profile-run (resumable: rerun the same command),
the rule's diagnosis of it OUT/seedS/diagnosis.json (`darc diagnose`) and each accuracy's OUT/seedS/diagnosis-accA.json.
The measurement reads the profiles' traces, packed (traces.tar.gz) or not.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from playground.agents.instrument_judge import state_from_events
from playground.cli.main import main as playground
from playground.host.manager import Host
from playground.plugins.darc.instrument import injected_mode
from playground.run.rundir import load_records, record_trace
from playground.run.svg import color, line_chart, standalone
from playground.run.traces import read_events

PROFILE = ["--env", "alfworld", "--agent", "noisy", "--agent-option", "invalid=0.5", "--split", "valid_seen",
           "--quiet"]
HARNESS = "darc-profile:sentry"  # the base agent, Sentry's detectors watching (detect-only)
DRAWS = 2000  # resampled families per accuracy


def acc_name(accuracy: float) -> str:
    """The file of one accuracy's diagnosis in a seed's folder."""
    return f"diagnosis-acc{accuracy:g}.json"


def play(out: Path, seeds: list[int], episodes: int, accuracies: list[float]) -> float:
    """Play every seed's profiling run (resumable) and diagnose it with the rule and at every accuracy; return the
    seconds it took."""
    started = time.perf_counter()
    for seed in seeds:
        folder = out / f"seed{seed}"
        run_dir = folder / "profile-run"
        if playground(["run", *PROFILE, "--episodes", str(episodes), "--seed", str(seed), "--harness", HARNESS,
                       "--out", str(run_dir)]) != 0:
            raise SystemExit(f"playground run {HARNESS} failed for seed {seed}")
        if playground(["darc", "diagnose", str(run_dir), "--out", str(folder)]) != 0:
            raise SystemExit(f"darc diagnose failed for seed {seed}")
        for accuracy in accuracies:
            with tempfile.TemporaryDirectory(dir=folder) as diagnosed:
                if playground(["darc", "diagnose", str(run_dir), "--diagnoser", "instrument", "--diagnoser-accuracy",
                               f"{accuracy:g}", "--out", diagnosed]) != 0:
                    raise SystemExit(f"darc diagnose --diagnoser instrument failed for seed {seed}, accuracy "
                                     f"{accuracy}")
                shutil.move(Path(diagnosed) / "diagnosis.json", folder / acc_name(accuracy))
        print(f"seed {seed}: profiled and diagnosed in {time.perf_counter() - started:.0f} s so far", file=sys.stderr)
    return time.perf_counter() - started


def majority(modes: list[str | None]) -> str | None:
    """The mode named strictly most often (None, "no mode", is not a vote), as `LLMDiagnoser.diagnose_family`."""
    votes = Counter(m for m in modes if m is not None)
    ranked = votes.most_common()
    if not ranked or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def truths(host: Host, folder: Path, candidates: list[str]) -> dict[str, str | None]:
    """{task_id: the mode a right diagnoser names (the injected dominant mode if a candidate, else None)} for the
    failed episodes of one profile, from their traces (its traces folder, or its packed traces.tar.gz)."""
    run_dir = folder / "profile-run"
    with tempfile.TemporaryDirectory() as unpacked:
        traces_dir = run_dir
        if not (run_dir / "traces").is_dir() and (run_dir / "traces.tar.gz").is_file():
            with tarfile.open(run_dir / "traces.tar.gz") as packed:
                packed.extractall(unpacked, filter="data")
            traces_dir = Path(unpacked)
        found = {}
        for record in load_records(run_dir):
            if record.won:
                continue
            mode = injected_mode(state_from_events(read_events(record_trace(traces_dir, record))), host.labels)
            found[record.task_id] = mode if mode in candidates else None
    return found


def measure(host: Host, out: Path, accuracies: list[float], family_size: int) -> dict[str, Any]:
    """Per accuracy: per-episode agreement with the injected dominant mode, each profile's family verdict against
    the family's injected majority, and the family majority's agreement over resampled families of `family_size`
    failed episodes."""
    folders = sorted(d for d in out.iterdir() if (d / "profile-run" / "episodes.jsonl").is_file())
    rule = {d.name: json.loads((d / "diagnosis.json").read_text()) for d in folders}
    candidates = {d.name: [m for m in rule[d.name]["admissible_sets"] if m in rule[d.name]["candidate_modes"]]
                  for d in folders}
    truth = {d.name: truths(host, d, candidates[d.name]) for d in folders}
    injected = Counter(t for by_task in truth.values() for t in by_task.values())
    rows = []
    for accuracy in accuracies:
        pairs: list[tuple[str | None, str | None]] = []  # (verdict, truth) per failed episode
        families = []
        for d in folders:
            diagnosis = json.loads((d / acc_name(accuracy)).read_text())
            failed = [e for e in diagnosis["per_episode"] if not e["won"]]
            mine = [(e["llm"], truth[d.name][e["task_id"]]) for e in failed]
            pairs += mine
            family_truth = majority([t for _, t in mine])
            families.append({"profile": d.name, "failed": len(failed), "diagnosed": diagnosis["mode"],
                             "injected_majority": family_truth, "agrees": diagnosis["mode"] == family_truth})
        rng = random.Random(f"families:{accuracy}")
        agree = 0
        for _ in range(DRAWS):
            draw = rng.sample(pairs, min(family_size, len(pairs)))
            agree += majority([v for v, _ in draw]) == majority([t for _, t in draw])
        named = Counter(v for v, _ in pairs)
        rows.append({"accuracy": accuracy, "failed_episodes": len(pairs),
                     "episode_agreement": sum(v == t for v, t in pairs) / max(len(pairs), 1),
                     "named": {str(k): n for k, n in named.most_common()},
                     "families": families,
                     "resampled_family_agreement": agree / DRAWS, "family_size": family_size})
    return {"profiles": [d.name for d in folders], "episodes": sum(r["episodes"] for r in rule.values()),
            "failed": sum(len(t) for t in truth.values()), "candidates": candidates[folders[0].name],
            "injected_dominant": {str(k): n for k, n in injected.most_common()},
            "rule": {name: r["mode"] for name, r in rule.items()}, "rows": rows}


def downstream(runs: Path) -> dict[str, Any]:
    """What each diagnosed mode selects on the committed noisy ALFWorld runs (`runs`: docs/runs/darc-alf-noisy-v2):
    the policy distilled over that mode's admissible set, its success on the 50 valid_unseen test games, and base's
    pass@1 and pass@L there (L: the policy's chain length) from the base run played twice per game."""
    test = json.loads((runs / "test" / "summary.json").read_text())["harnesses"]
    controls = json.loads((runs / "t6" / "run" / "summary.json").read_text())["harnesses"]
    won: dict[str, list[bool]] = {}
    for record in load_records(runs / "test-base-2"):
        won.setdefault(record.task_id, []).append(record.won)

    def pass_at(k: int) -> float:
        return sum(any(trials[:k]) for trials in won.values()) / len(won)

    def row(policy: Path, success: float, what: str) -> dict[str, Any]:
        chain = json.loads(policy.read_text())["chain"]
        return {"policy": what, "chain": chain, "success": success, "base_pass1": pass_at(1),
                "base_passL": pass_at(len(chain)), "L": len(chain)}

    av = runs / "av" / "policy.json"
    mismatched = runs / "t6" / "policies" / "mismatched.json"
    full = runs / "full" / "policy.json"
    return {
        "action_validity": row(av, test[f"darc:runs/{runs.name}/av/policy.json"]["success_rate"],
                               "distilled over action validity (m=4)"),
        "procedure_breadth": row(mismatched, controls[f"darc:runs/{runs.name}/t6/policies/mismatched.json"]
                                 ["success_rate"], "distilled over procedure breadth (m=3; Table 6's mismatched)"),
        "none": {**row(full, test[f"darc:runs/{runs.name}/full/policy.json"]["success_rate"],
                       "none: evaluate refuses; the no-diagnosis control is the full library (m=8)")},
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def table(result: dict[str, Any], selects: dict[str, Any] | None) -> str:
    """Markdown tables: one row per accuracy (the diagnosis, and the test success of the policy it selects), then
    what each diagnosed mode selects."""
    size = result["rows"][0]["family_size"] if result["rows"] else 0
    lines = ["| diagnoser accuracy | failed episodes | per-episode agreement | replies | family mode per profile | "
             f"profiles agreeing | resampled families of {size} agreeing | selected policy's test success (mean "
             "over profiles) |", "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        named = ", ".join(f"{k if k != 'None' else 'no mode'} {n}" for k, n in row["named"].items())
        modes = [f["diagnosed"] or "none" for f in row["families"]]
        chosen = Counter(modes)
        agree = sum(f["agrees"] for f in row["families"])
        success = ("-" if not selects else
                   _pct(sum(selects[m]["success"] for m in modes) / len(modes)))
        lines.append(f"| {row['accuracy']:g} | {row['failed_episodes']} | {_pct(row['episode_agreement'])} | "
                     f"{named} | {', '.join(f'{m} {n}' for m, n in chosen.most_common())} | "
                     f"{agree}/{len(modes)} | {_pct(row['resampled_family_agreement'])} | {success} |")
    if selects:
        lines += ["", "| diagnosed mode | policy it selects | chain | test success | base pass@1 / pass@L |",
                  "|---|---|---|---|---|"]
        for mode, pick in selects.items():
            lines.append(f"| {mode} | {pick['policy']} | {' -> '.join(pick['chain'])} | {_pct(pick['success'])} | "
                         f"{_pct(pick['base_pass1'])} / {_pct(pick['base_passL'])} (L={pick['L']}) |")
    return "\n".join(lines)


def plot(result: dict[str, Any]) -> str:
    """A standalone SVG image (for docs): per-episode agreement and resampled-family agreement against the
    diagnoser's accuracy, with its legend drawn inside the image."""
    rows = result["rows"]
    size = rows[0]["family_size"] if rows else 0
    series = [("per failed episode", [(r["accuracy"], r["episode_agreement"]) for r in rows], color(0)),
              (f"family majority (resampled families of {size} failed episodes)",
               [(r["accuracy"], r["resampled_family_agreement"]) for r in rows], color(1)),
              ("y = accuracy", [(r["accuracy"], r["accuracy"]) for r in rows], color(7))]
    chart = line_chart(series, "diagnoser accuracy (instrument)", "agreement with the injected mode", 640, 300)
    return standalone(chart, [name for name, _, _ in series], [stroke for _, _, stroke in series])


def write_outputs(out: Path, accuracies: list[float], family_size: int, runs: Path | None,
                  seconds: float | None) -> str:
    """Measure, write table.md, table.json and agreement.svg under `out`; return the table."""
    host = Host(strict=True).load()
    result = measure(host, out, accuracies, family_size)
    selects = downstream(runs) if runs is not None and (runs / "test" / "summary.json").is_file() else None
    result["downstream"] = selects
    previous = json.loads((out / "table.json").read_text()) if (out / "table.json").is_file() else {}
    result["seconds"] = seconds if seconds is not None else previous.get("seconds")
    text = table(result, selects)
    (out / "table.md").write_text("Instrument figures (DARC's diagnoser against judge quality): not evidence about "
                                  f"any LLM.\n\n{text}\n")
    (out / "table.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "agreement.svg").write_text(plot(result) + "\n")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder of the profiles (kept; a rerun resumes them)")
    parser.add_argument("--seeds", default="0,1,2,3", help="comma-separated run seeds, one profile each")
    parser.add_argument("--episodes", type=int, default=120, help="games per profile")
    parser.add_argument("--accuracies", default="0.5,0.7,0.86,1.0", help="comma-separated diagnoser accuracies")
    parser.add_argument("--family-size", type=int, default=11,
                        help="failed episodes per resampled family (11: the failures of a 50-game profile)")
    parser.add_argument("--downstream", default="docs/runs/darc-alf-noisy-v2",
                        help="the committed noisy ALFWorld DARC runs whose policies each diagnosed mode selects")
    parser.add_argument("--table-only", action="store_true", help="only re-derive the table and plot")
    args = parser.parse_args()
    out = Path(args.out)
    accuracies = [float(a) for a in args.accuracies.split(",")]
    seconds = None
    if not args.table_only:
        seconds = play(out, [int(s) for s in args.seeds.split(",")], args.episodes, accuracies)
    print(write_outputs(out, accuracies, args.family_size, Path(args.downstream) if args.downstream else None,
                        seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
