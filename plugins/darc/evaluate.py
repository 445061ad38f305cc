"""DARC's evidence step: every admissible intervention on every train task, from the same initial state.

The bare agent runs too (harness `base`: the standard attempt, whose cost is distill's
default tau_free). Each intervention runs alone as its own harness (`darc-eval:<name>`) through the normal
runner, so the evaluation is resumable and traced like any run; every task starts from
the same reset and seed under every intervention. The evidence table records success by
the task's own verifier (the env's `won`) and the attempt's cost in the intervention's unit.

Only the interventions asked for reach the evidence, whatever else the run directory holds.
So a larger evaluation can resume a smaller one's run (copy `evaluate-run` over): the
episodes they share are not played twice, and the smaller evidence is not widened.

With `base_from` (the `--out` of `darc profile`) the base cell is read from the profile's
episodes instead of being played again: the profile ran the same bare agent on the same
tasks and seeds, its detectors only watching. The profile must have been run with the same
settings (env, split, agent and its options, seed, step budget, params) and must hold every
evaluated task; otherwise ProfileMismatch says what differs, before anything is played.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from playground.host_api import (
    EpisodeRecord,
    HarnessSpec,
    Host,
    RunConfig,
    atomic_write_text,
    attempt_cost,
    check_finished,
    identity_mismatch,
    load_records,
    read_config,
    run,
)
from playground.plugins.darc.evidence import BASE_FILE, META_FILE, write_evidence
from playground.plugins.darc.profile import PROFILE_HARNESS, library

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


class ProfileMismatch(ValueError):
    """`--base-from` names no profile, or one whose episodes are not this evaluation's base attempts."""


def profiled_base_records(profile_dir: str | Path, config: RunConfig) -> dict[str, EpisodeRecord]:
    """{task id: the profile's base-agent episode} for every task of `config`, from `profile_dir/profile-run`.

    Raises ProfileMismatch when the profile was run with other settings than `config` or lacks a task."""
    run_dir = Path(profile_dir) / "profile-run"
    if not (run_dir / "config.json").is_file():
        raise ProfileMismatch(f"--base-from {str(profile_dir)!r}: no profile-run/config.json there (give the --out "
                         "of darc profile)")
    profiled = read_config(run_dir / "config.json")
    wanted = json.loads(json.dumps(asdict(config), default=str))  # as a run directory records it
    key = identity_mismatch(profiled, wanted, skip=("tasks",))  # a subset of the profiled tasks will do
    if key:
        raise ProfileMismatch(f"--base-from {str(run_dir)!r}: profiled with another {key} ({profiled.get(key)!r}, "
                              f"now {wanted.get(key)!r}); its episodes are not this evaluation's base attempts")
    by_task = {r.task_id: r for r in load_records(run_dir)
               if r.harness.startswith(PROFILE_HARNESS + ":") and r.trial == 1}
    missing = [t for t in config.tasks if t not in by_task]
    if missing:
        raise ProfileMismatch(f"--base-from {str(run_dir)!r}: {len(missing)} of the {len(config.tasks)} tasks "
                              f"were not profiled (the first: {missing[0]!r}); profile them or leave out --base-from")
    return {t: by_task[t] for t in config.tasks}


def evaluate(host: Host, config: RunConfig, interventions: list[str], out: str | Path,
             base_from: str | Path | None = None) -> Path:
    """Run the bare agent and each intervention on every task of `config`; write the evidence; return its path.

    Writes `out/evidence.csv` (one row per task and intervention), `out/base.csv` (the bare
    agent's attempt on each task, in the same format, intervention `base`: the standard
    attempt whose mean cost is distill's default tau_free) and `out/evidence.json` (what
    each cost is counted in, and the base attempt's mean cost and success). With
    `base_from` the base attempts are the profile's episodes (`profiled_base_records`).
    """
    out = Path(out)
    harnesses = eval_harnesses(host, interventions)
    profiled = profiled_base_records(base_from, config) if base_from else None
    if profiled is not None:
        harnesses = harnesses[1:]  # the base cell is already played
    run_dir = out / "evaluate-run"
    check_finished(run(host, replace(config, harnesses=harnesses, out=str(run_dir))), run_dir)
    records = load_records(run_dir)
    base_records = list(profiled.values()) if profiled is not None else [r for r in records if r.harness == BASE]
    base_rows = [(r.task_id, BASE, int(r.won), attempt_cost([], r)) for r in base_records]
    rows = []
    for record in records:
        if not record.harness.startswith(EVAL_PREFIX):
            continue
        name = record.harness[len(EVAL_PREFIX):]
        if name not in interventions:  # another evaluation's episodes in a shared run directory
            continue
        cost = attempt_cost([host.interventions.get(name)], record)
        rows.append((record.task_id, name, int(record.won), cost))
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
                 "played_in": str(Path(base_from) / "profile-run") if base_from else str(run_dir),
                 "mean_cost": sum(r[3] for r in base_rows) / max(len(base_rows), 1),
                 "success_rate": sum(r[2] for r in base_rows) / max(len(base_rows), 1)},
    }
    atomic_write_text(out / META_FILE, json.dumps(meta, indent=2) + "\n")
    return write_evidence(out / "evidence.csv", rows)
