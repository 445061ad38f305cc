"""DARC's evidence step: the evidence table of a run of the library's interventions, each alone on every task.

The run is played by the host (`playground run`, or a study grid such as darc-table14's `evidence`): the bare agent
(harness `base`: the standard attempt, whose cost is distill's default tau_free) and each intervention alone as its
own harness (`darc-eval:NAME`, built by the `darc-eval:` loader), every task from the same reset and seed under
every harness. `darc evidence RUN_DIR` reads it: the evidence table records success by the task's own verifier (the
env's `won`) and the attempt's cost in the intervention's unit.

Only the interventions asked for reach the evidence (`--diagnosis`: its admissible ones; otherwise every
`darc-eval:` harness the run played), whatever else the run directory holds. So one run grows from the diagnosed
interventions to the whole library (`playground run` again with more harnesses, same `--out`: the episodes they
share are not played twice), and the smaller evidence is not widened.

With `base_from` (a profiling run, `darc-profile:DETECTORS`) the base cell is read from the profile's episodes
instead of a `base` harness: the profile ran the same bare agent on the same tasks and seeds, its detectors only
watching. The profile must have been played with the same settings (env, split, agent and its options, seed, step
budget, params) and must hold every task of the run; otherwise ProfileMismatch says what differs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playground.host_api import (
    EpisodeRecord,
    HarnessSpec,
    Host,
    atomic_write_text,
    attempt_cost,
    identity_mismatch,
)
from playground.plugins.darc.evidence import BASE_FILE, META_FILE, write_evidence
from playground.plugins.darc.profile import PROFILE_HARNESS
from playground.plugins.darc.runs import finished, played, read_run

EVAL_PREFIX = "darc-eval:"
BASE = "base"


def eval_harness(name: str, rest: str) -> HarnessSpec:
    """The harness loader of `darc-eval:NAME`: intervention NAME alone."""
    if not rest:
        raise ValueError(f"{name!r}: name the intervention after {EVAL_PREFIX!r}")
    return HarnessSpec(name, (rest,), description=f"{rest} alone", plugin="darc")


def eval_harnesses(interventions: list[str]) -> list[str]:
    """`base` and the names of the harnesses running each intervention alone (`darc-eval:<name>`): what an evidence
    run plays."""
    return [BASE, *(EVAL_PREFIX + name for name in interventions)]


def chosen_interventions(host: Host, harnesses: list[str], diagnosis_path: str | None) -> list[str]:
    """The interventions to gather: the diagnosis's admissible ones, or every `darc-eval:` harness of the run."""
    if not diagnosis_path:
        names = sorted(h[len(EVAL_PREFIX):] for h in harnesses if h.startswith(EVAL_PREFIX))
        if not names:
            raise ValueError(f"the run played no {EVAL_PREFIX}NAME harness (it played {', '.join(harnesses)}); play "
                             f"each intervention alone beside base: --harness base --harness {EVAL_PREFIX}NAME ...")
        return names
    try:
        diagnosis = json.loads(Path(diagnosis_path).read_text())
        names = list(diagnosis["admissible_interventions"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{diagnosis_path}: not a diagnosis file from darc diagnose ({exc})") from None
    unknown = [n for n in names if n not in host.interventions]
    if unknown:
        raise ValueError(f"{diagnosis_path}: unknown intervention(s) {', '.join(unknown)}")
    if not names:
        why = diagnosis.get("why") or "the diagnosis admits no intervention"
        raise ValueError(f"{diagnosis_path}: {why}; no intervention is admissible "
                         f"(gather the whole library's evidence: leave out --diagnosis)")
    return names


class ProfileMismatch(ValueError):
    """`--base-from` names no profiling run, or one whose episodes are not this evidence's base attempts."""


def profiled_base_records(profile_run: str | Path, config: dict[str, Any]) -> list[EpisodeRecord]:
    """The profiling run's base-agent episode of every task of `config` (a run's config.json).

    Raises ProfileMismatch when the profile was played with other settings than `config` or lacks a task."""
    if not (Path(profile_run) / "config.json").is_file():
        raise ProfileMismatch(f"--base-from {str(profile_run)!r}: no config.json there (give the profiling run)")
    profiled, records = read_run(profile_run)
    key = identity_mismatch(profiled, config, skip=("tasks",))  # a subset of the profiled tasks will do
    if key:
        raise ProfileMismatch(f"--base-from {str(profile_run)!r}: profiled with another {key} "
                              f"({profiled.get(key)!r}, the evidence run {config.get(key)!r}); its episodes are not "
                              "the evidence's base attempts")
    by_task = {r.task_id: r for r in records if r.harness.startswith(PROFILE_HARNESS + ":") and r.trial == 1}
    tasks = list(config.get("tasks") or [])
    missing = [t for t in tasks if t not in by_task]
    if missing:
        raise ProfileMismatch(f"--base-from {str(profile_run)!r}: {len(missing)} of the {len(tasks)} tasks "
                              f"were not profiled (the first: {missing[0]!r}); profile them or leave out --base-from")
    return [by_task[t] for t in tasks]


def gather_evidence(host: Host, run_dir: str | Path, diagnosis_path: str | None = None,
                    base_from: str | Path | None = None) -> tuple[Path, list[str], int]:
    """Write the evidence of the run in `run_dir` into it; return (its path, the interventions, the number of tasks).

    Writes `evidence.csv` (one row per task and intervention), `base.csv` (the bare
    agent's attempt on each task, in the same format, intervention `base`: the standard
    attempt whose mean cost is distill's default tau_free) and `evidence.json` (what
    each cost is counted in, and the base attempt's mean cost and success). With
    `base_from` the base attempts are the profiling run's episodes (`profiled_base_records`).
    """
    folder = Path(run_dir)  # the evidence goes beside the run's records
    config, records = read_run(run_dir)
    interventions = chosen_interventions(host, played(config), diagnosis_path)
    if base_from:
        base_records = profiled_base_records(base_from, config)
    else:
        base_records = finished(run_dir, config, records, BASE, "darc evidence")
    rows = []
    for name in interventions:
        spec = host.interventions.get(name)
        for record in finished(run_dir, config, records, EVAL_PREFIX + name, "darc evidence"):
            rows.append((record.task_id, name, int(record.won), attempt_cost([spec], record)))
    base_rows = sorted((r.task_id, BASE, int(r.won), attempt_cost([], r)) for r in base_records)
    rows.sort()
    write_evidence(folder / BASE_FILE, base_rows)
    specs = {name: host.interventions.get(name) for name in interventions}
    meta = {
        "env": f"{config.get('env')}:{config.get('task_set')}", "split": config.get("split"),
        "agent": config.get("agent"), "tasks": len({row[0] for row in base_rows}),
        "interventions": {name: {"modes": list(spec.modes), "cost_unit": spec.cost_unit,
                                 **({"cost": spec.cost} if spec.cost is not None else {})}
                          for name, spec in specs.items()},
        "base": {"file": BASE_FILE, "cost_unit": "steps", "played_in": str(base_from or run_dir),
                 "mean_cost": sum(r[3] for r in base_rows) / max(len(base_rows), 1),
                 "success_rate": sum(r[2] for r in base_rows) / max(len(base_rows), 1)},
    }
    atomic_write_text(folder / META_FILE, json.dumps(meta, indent=2) + "\n")
    return write_evidence(folder / "evidence.csv", rows), interventions, len(base_rows)
