"""The four methods in one stack, on the workflow env, against each alone.

INSTRUMENT FIGURES. The `noisy` agent (the failure-injection instrument, no model) plays the workflow domains'
tasks; Sentry's judge roles run on rules (its configuration for a scripted agent). Per domain:

1. DARC, as its paper deploys it: profile the base agent on the dev split, diagnose the dominant failure mode,
   evaluate the admissible interventions, distil and freeze a policy (`darc/av/policy.json`).
2. One `playground run` on the test split, every harness on the same tasks and seeds (`--trials`): base, each
   method alone (`sentry`, `dart`, `darc:POLICY`), and the stacks (`--harness A+B`): `sentry+dart`,
   `darc:POLICY+dart`, `darc:POLICY+sentry-no-hard` and `darc:POLICY+sentry-no-hard+dart` (Sentry without its hard
   repair where DARC's policy brings the validity guard: both would rewrite the action, and the stack
   `darc:POLICY+sentry` is refused with a named error, recorded in the table).
3. AED over the run's traces: error-diagnosis pairs from every failed episode (`aed diagnose`, rule producer),
   each correction replayed against a retry of the original action from the same restored state (`aed replay`;
   the continuation is the instrument, which follows the expert plan: an oracle continuation, labelled so).

    python scripts/stack_methods.py play --out docs/runs/stack-workflow [--domains schedule-form,travel,...]
        [--trials 3]                (resumable: a finished step is skipped)
    python scripts/stack_methods.py table --out docs/runs/stack-workflow    (re-derive table.md and table.json)
    python scripts/stack_methods.py pack --out docs/runs/stack-workflow     (drop traces, forks and playbooks)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from playground.cli.main import main as playground
from playground.core.records import EpisodeRecord
from playground.host.manager import Host
from playground.run.harnesses import resolve_harness
from playground.run.rundir import TRACES_LEFT_OUT, load_records
from playground.run.stats import compare, split_by_harness

DOMAINS = ("schedule-form", "travel", "etl", "navigation", "diagnosis")
ALONE = ("sentry", "dart", "darc")
STACKS = ("sentry+dart", "darc+dart", "darc+sentry-no-hard", "darc+sentry-no-hard+dart")
REFUSED = ("darc+sentry",)  # a stack the conflict rules refuse: the table records why


def spelled(harness: str, policy: Path) -> str:
    """A harness of the study with `darc` spelled as the domain's frozen policy (`darc:POLICY.json`)."""
    return "+".join(f"darc:{policy}" if part == "darc" else part for part in harness.split("+"))


def short(harness: str) -> str:
    """A run's harness name with the policy path shortened back to `darc`."""
    return "+".join("darc" if part.startswith("darc:") else part for part in harness.split("+"))


def call(argv: list[str]) -> None:
    """Run one `playground` command in this process; stop the study when it fails."""
    print("$ playground " + " ".join(argv), flush=True)
    code = playground(argv)
    if code:
        sys.exit(f"playground {' '.join(argv)} exited {code}")


def play_domain(out: Path, domain: str, trials: int) -> None:
    """DARC's policy from the dev split, the run of every harness on the test split, and AED over the run."""
    env = f"workflow:{domain}"
    darc = out / domain / "darc"
    if not (darc / "diagnosis.json").exists():
        call(["darc", "profile", "--env", env, "--agent", "noisy", "--split", "dev", "--episodes", "15",
              "--out", str(darc)])
    policy = darc / "av" / "policy.json"
    if not (darc / "av" / "evidence.csv").exists():
        call(["darc", "evaluate", "--env", env, "--agent", "noisy", "--split", "dev", "--episodes", "15",
              "--diagnosis", str(darc / "diagnosis.json"), "--base-from", str(darc), "--out", str(darc / "av")])
    if not policy.exists():
        call(["darc", "distill", "--evidence", str(darc / "av" / "evidence.csv"), "--max-len", "3", "--lam", "0.02"])
    run = out / domain / "run"
    harnesses = ["base", *ALONE, *STACKS]
    if not (run / "aed" / "replays.jsonl").exists():
        argv = ["run", "--env", env, "--agent", "noisy", "--split", "test", "--trials", str(trials), "--quiet",
                "--out", str(run)]
        for harness in harnesses:
            argv += ["--harness", spelled(harness, policy)]
        call(argv)
        call(["aed", "diagnose", str(run)])
        call(["aed", "replay", str(run)])
    refusals = {}
    host = Host().load()
    for harness in REFUSED:
        try:
            resolve_harness(host, spelled(harness, policy))
            refusals[harness] = None
        except ValueError as exc:
            refusals[harness] = str(exc).replace(str(policy), "POLICY")
    (out / domain / "refused.json").write_text(json.dumps(refusals, indent=2) + "\n")


def aed_by_harness(run: Path) -> dict[str, dict[str, Any]]:
    """AED's replayed pairs per harness: pairs, correction and retry pass rates over their trials (from
    `aed/replays.jsonl`, or from `aed/by_harness.json`, which `pack` keeps in its place)."""
    kept = run / "aed" / "by_harness.json"
    if not (run / "aed" / "replays.jsonl").exists() and kept.exists():
        return json.loads(kept.read_text())
    harness_of = {}
    for record in load_records(run):
        for trace in [a.trace for a in record.attempts] if record.attempts else [record.trace]:
            harness_of[trace] = short(record.harness)
    found: dict[str, dict[str, Any]] = {}
    for line in (run / "aed" / "replays.jsonl").read_text().splitlines():
        replay = json.loads(line)
        row = found.setdefault(harness_of.get(replay["trace"], "?"), {"pairs": 0, "correction": [], "retry": []})
        row["pairs"] += 1
        row["correction"] += [bool(w) for w in replay["treatment_won"]]
        row["retry"] += [bool(w) for w in replay["control_won"]]
    return {harness: {"pairs": row["pairs"], "correction_pass": sum(row["correction"]) / len(row["correction"]),
                      "retry_pass": sum(row["retry"]) / len(row["retry"])} for harness, row in found.items()}


def pooled(replays: list[dict[str, Any]], rate: str) -> float | None:
    """A pass rate over several domains' replays, weighted by their pairs (None without pairs)."""
    pairs = sum(r["pairs"] for r in replays)
    return sum(r[rate] * r["pairs"] for r in replays) / pairs if pairs else None


def derive(out: Path, domains: tuple[str, ...]) -> dict[str, Any]:
    """Per harness, pooled over the domains: success, mean steps, interventions by kind, mean attempts, lessons,
    paired comparisons against base and against each part alone; AED's replays; DARC's policies; refusals."""
    records: dict[str, list[EpisodeRecord]] = {}
    policies, refusals, aed = {}, {}, {}
    for domain in domains:
        run = out / domain / "run"
        for harness, rows in split_by_harness(load_records(run)).items():
            records.setdefault(short(harness), []).extend(row.model_copy(update={"harness": short(harness)})
                                                          for row in rows)
        policy = json.loads((out / domain / "darc" / "av" / "policy.json").read_text())
        policies[domain] = {"chain": policy["chain"], "mode": json.loads(
            (out / domain / "darc" / "diagnosis.json").read_text())["mode"]}
        refusals[domain] = json.loads((out / domain / "refused.json").read_text())
        for harness, row in aed_by_harness(run).items():
            aed.setdefault(harness, []).append(row)
    rows = {}
    for harness, found in records.items():
        kinds: dict[str, int] = {}
        for record in found:
            for kind, count in record.interventions.items():
                kinds[kind] = kinds.get(kind, 0) + count
        parts = [] if harness == "base" else ["base", *(p for p in harness.split("+") if p != harness)]
        against = {}
        for other in parts:
            if other in records:
                success = compare(records[other], found, label_a=other, label_b=harness).metric("success")
                against[other] = {"diff": success.diff, "p": success.p_value, "discordant": success.discordant}
        replays = aed.get(harness, [])
        pairs = sum(r["pairs"] for r in replays)
        rows[harness] = {
            "episodes": len(found), "success": sum(r.won for r in found) / len(found),
            "steps": sum(r.steps for r in found) / len(found),
            "attempts": sum(len(r.attempts or [1]) for r in found) / len(found),
            "lessons": sum(r.lessons_added for r in found),
            "interventions_per_episode": {k: round(v / len(found), 3) for k, v in sorted(kinds.items())},
            "against": against,
            "aed": {"pairs": pairs, "correction_pass": pooled(replays, "correction_pass"),
                    "retry_pass": pooled(replays, "retry_pass")}}
    return {"domains": list(domains), "policies": policies, "refused": refusals, "harnesses": rows}


def versus(row: dict[str, Any], other: str) -> str:
    """A stack's success against `other` (base or one of its parts alone): the paired difference and its p."""
    found = row["against"].get(other)
    return "" if found is None else f"{found['diff']:+.0%} (p={found['p']:.2g})"


def table(result: dict[str, Any]) -> str:
    """The markdown table of `derive`'s result."""
    lines = ["| harness | episodes | success | vs base | vs each part alone | steps | attempts | "
             "interventions / episode | lessons | AED pairs | correction / retry pass |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    order = ["base", *ALONE, *STACKS]
    for harness in [h for h in order if h in result["harnesses"]]:
        row = result["harnesses"][harness]
        parts = "; ".join(f"{p}: {versus(row, p)}" for p in harness.split("+") if p != harness and p in row["against"])
        kinds = ", ".join(f"{k} {v:g}" for k, v in row["interventions_per_episode"].items()) or "-"
        aed = row["aed"]
        passes = "-" if aed["pairs"] == 0 else f"{aed['correction_pass']:.0%} / {aed['retry_pass']:.0%}"
        lines.append(f"| {harness} | {row['episodes']} | {row['success']:.0%} | {versus(row, 'base') or '-'} | "
                     f"{parts or '-'} | {row['steps']:.1f} | {row['attempts']:.2f} | {kinds} | {row['lessons']} | "
                     f"{aed['pairs']} | {passes} |")
    lines.append("")
    for domain, policy in result["policies"].items():
        refused = "; ".join(f"`{h}`: {why}" for h, why in result["refused"][domain].items())
        lines.append(f"- {domain}: DARC diagnoses {policy['mode']}, policy chain {' -> '.join(policy['chain'])}; "
                     f"refused: {refused}")
    return "\n".join(lines) + "\n"


def write_table(out: Path, domains: tuple[str, ...]) -> None:
    """Derive the study's table from its run files and write table.md and table.json."""
    result = derive(out, domains)
    (out / "table.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "table.md").write_text(table(result))
    print(table(result))


def pack(out: Path, domains: tuple[str, ...]) -> None:
    """Drop what the repository does not keep: traces, forks, playbooks and AED's per-pair files, keeping AED's
    replays per harness (`aed/by_harness.json`); episodes, config, lock, summary, DARC's evidence and policy and
    AED's own summary stay, so `table` re-derives the same figures."""
    for domain in domains:
        run = out / domain / "run"
        (run / "aed" / "by_harness.json").write_text(json.dumps(aed_by_harness(run), indent=2) + "\n")
        for stale in out.glob(f"{domain}/**/.lock"):
            stale.unlink()
        for folder in ("traces", "forks", "playbooks"):
            shutil.rmtree(run / folder, ignore_errors=True)
        (run / TRACES_LEFT_OUT).write_text("traces left out of the repository on purpose (scripts/stack_methods.py "
                                           "pack); a resume keeps the finished episodes\n")
        for name in ("diagnoses.jsonl", "replays.jsonl", "rejected.jsonl"):
            (run / "aed" / name).unlink(missing_ok=True)
        for folder in (out / domain / "darc").rglob("traces"):
            shutil.rmtree(folder, ignore_errors=True)


def cli() -> None:
    """`play`, `table` or `pack`."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("play", "table", "pack"))
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--domains", default=",".join(DOMAINS))
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    domains = tuple(d for d in args.domains.split(",") if d)
    if args.what == "play":
        for domain in domains:
            play_domain(args.out, domain, args.trials)
        write_table(args.out, domains)
    elif args.what == "table":
        write_table(args.out, domains)
    else:
        pack(args.out, domains)


if __name__ == "__main__":
    cli()
