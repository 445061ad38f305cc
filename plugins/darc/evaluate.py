"""DARC's evidence step: every admissible intervention on every train task, from the same initial state.

The bare agent runs too (harness `base`: the standard attempt, whose cost is distill's
default tau_free). Each intervention runs alone as its own harness (`darc-eval:<name>`) through the normal
runner, so the evaluation is resumable and traced like any run; every task starts from
the same reset and seed under every intervention. The evidence table records success by
the task's own verifier (the env's `won`) and the attempt's cost in the intervention's unit.

Only the interventions asked for reach the evidence, whatever else the run directory holds.
So a larger evaluation can resume a smaller one's run (copy `evaluate-run` over): the
episodes they share are not played twice, and the smaller evidence is not widened.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from playground.host.manager import Host
from playground.host.registry import HarnessSpec
from playground.plugins.darc.evidence import BASE_FILE, META_FILE, write_evidence
from playground.plugins.darc.profile import library
from playground.run.costs import attempt_cost
from playground.run.files import atomic_write_text
from playground.run.rundir import load_records
from playground.run.runner import RunConfig, run

EVAL_PREFIX = "darc-eval:"


def chosen_interventions(host: Host, env: str, diagnosis_path: str | None, all_interventions: bool) -> list[str]:
    """The interventions to evaluate: the diagnosis's admissible ones, or the whole library usable on `env`."""
    if all_interventions:
        return sorted(spec.name for spec in library(host, env))
    if not diagnosis_path:
        raise ValueError("darc evaluate needs --diagnosis FILE (from darc profile) or --all-interventions")
    try:
        diagnosis = json.loads(Path(diagnosis_path).read_text())
        names = list(diagnosis["admissible_interventions"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{diagnosis_path}: not a diagnosis file from darc profile ({exc})") from None
    unknown = [n for n in names if n not in host.interventions]
    if unknown:
        raise ValueError(f"{diagnosis_path}: unknown intervention(s) {', '.join(unknown)}")
    if not names:
        why = diagnosis.get("why") or "the diagnosis admits no intervention"
        raise ValueError(f"{diagnosis_path}: {why}; no intervention is admissible "
                         f"(evaluate the whole library with --all-interventions)")
    return names


BASE = "base"


def eval_harness(name: str, rest: str) -> HarnessSpec:
    """The harness loader of `darc-eval:NAME`: intervention NAME alone."""
    if not rest:
        raise ValueError(f"{name!r}: name the intervention after {EVAL_PREFIX!r}")
    return HarnessSpec(name, (rest,), description=f"{rest} alone", plugin="darc")


def eval_harnesses(host: Host, interventions: list[str]) -> list[str]:
    """`base` and the names of the harnesses running each intervention alone (`darc-eval:<name>`, built by the
    `darc-eval:` harness loader)."""
    return [BASE, *(EVAL_PREFIX + name for name in interventions)]


def evaluate(host: Host, config: RunConfig, interventions: list[str], out: str | Path) -> Path:
    """Run the bare agent and each intervention on every task of `config`; write the evidence; return its path.

    Writes `out/evidence.csv` (one row per task and intervention), `out/base.csv` (the bare
    agent's attempt on each task, in the same format, intervention `base`: the standard
    attempt whose mean cost is distill's default tau_free) and `out/evidence.json` (what
    each cost is counted in, and the base attempt's mean cost and success).
    """
    out = Path(out)
    harnesses = eval_harnesses(host, interventions)
    run_dir = out / "evaluate-run"
    run(host, replace(config, harnesses=harnesses, out=str(run_dir)))
    rows, base_rows = [], []
    for record in load_records(run_dir):
        if record["harness"] == BASE:
            base_rows.append((record["task_id"], BASE, int(bool(record["won"])), attempt_cost([], record)))
            continue
        if not record["harness"].startswith(EVAL_PREFIX):
            continue
        name = record["harness"][len(EVAL_PREFIX):]
        if name not in interventions:  # another evaluation's episodes in a shared run directory
            continue
        cost = attempt_cost([host.interventions.get(name)], record)
        rows.append((record["task_id"], name, int(bool(record["won"])), cost))
    rows.sort()
    base_rows.sort()
    write_evidence(out / BASE_FILE, base_rows)
    specs = {name: host.interventions.get(name) for name in interventions}
    meta = {
        "env": f"{config.env}:{config.task_set}", "split": config.split, "agent": config.agent,
        "tasks": len({row[0] for row in base_rows}),
        "interventions": {name: {"modes": list(spec.modes), "cost_unit": spec.cost_unit,
                                 **({"cost": spec.cost} if spec.cost is not None else {})}
                          for name, spec in specs.items()},
        "base": {"file": BASE_FILE, "cost_unit": "steps",
                 "mean_cost": sum(r[3] for r in base_rows) / max(len(base_rows), 1),
                 "success_rate": sum(r[2] for r in base_rows) / max(len(base_rows), 1)},
    }
    atomic_write_text(out / META_FILE, json.dumps(meta, indent=2) + "\n")
    return write_evidence(out / "evidence.csv", rows)
