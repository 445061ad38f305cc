"""DARC's evidence step: every admissible intervention on every train task, from the same initial state.

Each intervention runs alone as its own harness (`darc-eval:<name>`) through the normal
runner, so the evaluation is resumable and traced like any run; every task starts from
the same reset and seed under every intervention. The evidence table records success by
the task's own verifier (the env's `won`) and the attempt's cost in the intervention's unit.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from playground.host.manager import Host
from playground.host.registry import HarnessSpec
from playground.plugins.darc.evidence import write_evidence
from playground.plugins.darc.profile import library
from playground.run.costs import attempt_cost
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
        raise ValueError(f"{diagnosis_path}: the diagnosis admits no intervention")
    return names


def evaluate(host: Host, config: RunConfig, interventions: list[str], out: str | Path) -> Path:
    """Run each intervention on every task of `config`, write `out/evidence.csv`, return its path."""
    out = Path(out)
    harnesses = []
    for name in interventions:
        harness = EVAL_PREFIX + name
        if harness not in host.harnesses:
            host.harnesses.add(harness, HarnessSpec(harness, (name,), description=f"{name} alone", plugin="darc"))
        harnesses.append(harness)
    run_dir = out / "evaluate-run"
    run(host, replace(config, harnesses=harnesses, out=str(run_dir)))
    rows = []
    for record in load_records(run_dir):
        name = record["harness"][len(EVAL_PREFIX):]
        cost = attempt_cost([host.interventions.get(name)], record)
        rows.append((record["task_id"], name, int(bool(record["won"])), cost))
    rows.sort()
    return write_evidence(out / "evidence.csv", rows)
