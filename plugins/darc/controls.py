"""The paper's controls as commands: what a DARC gain is credited to, tested on the same tasks.

- `transfer` (Table 5's shape): a frozen policy deployed, unchanged, on another split (or task
  set) beside the bare agent.
- `policy_controls` (Table 6's shape): the policy distilled for the diagnosed mode (correct)
  against one distilled for another mode's interventions (mismatched) and a chain that
  ignores the diagnosis (generic), each deployed as a cascade on the same tasks.
- `info_controls` (Table 7's shape): the operator against controls given matched
  information without it: the diagnosis label only (a note naming the mode), the task's
  metadata only (a note with the env's task facts), and a random top-k view (the operator's
  view size and prompt, its ranking replaced by a random draw).

Each command is one run of the normal runner, so it resumes, and prints a table whose last
columns pair every row with the reference row by task (exact McNemar).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from playground.core.hookspecs import hookimpl
from playground.core.payloads import EpisodeStart, StepContext
from playground.host_api import (
    EpisodeRecord,
    HarnessSpec,
    Host,
    RunConfig,
    check_finished,
    load_records,
    mcnemar_exact,
    run,
)
from playground.plugins.darc.distill import distill, policy_dict
from playground.plugins.darc.evaluate import EVAL_PREFIX
from playground.plugins.darc.evidence import Evidence
from playground.plugins.darc.params import DiagnosisNoteParams, MetadataNoteParams

BASE = "base"
INFO_PREFIX = "darc-info:"
LABEL_NOTE = "diagnosis-note"
METADATA_NOTE = "metadata-note"
# What the label-only control tells the agent about each of the paper's modes (other modes: their name alone).
MODE_SENTENCES = {
    "action_validity": "commands the environment does not accept (not among the admissible commands, or malformed)",
    "procedure_breadth": "missing steps of the task's procedure (not knowing which operations the task needs)",
    "format_precision": "answers in the wrong format or with the wrong precision",
}
# Reset-info keys that are an oracle, not metadata: the metadata-only control refuses them.
ORACLE_KEYS = frozenset({"expert_plan"})


@dataclass(frozen=True)
class ControlRow:
    """One row of a control table: what ran and what the run measured, paired with the reference row."""

    name: str
    harness: str
    detail: str
    episodes: int
    success: float
    steps: float
    invalid: float
    attempts: float | None = None  # mean attempts of a cascade
    b: int | None = None  # tasks the reference row won and this row lost
    c: int | None = None  # tasks this row won and the reference row lost
    p: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready row."""
        return dict(self.__dict__)


# --- the note interventions of the matched-information controls -------------------------------------------------


class DiagnosisNote:
    """Label-only control: a standing note naming the diagnosed failure mode, and nothing else."""

    def __init__(self, params: DiagnosisNoteParams | Mapping[str, Any]) -> None:
        """`params`: a `DiagnosisNoteParams` (the host validated it), or a dict validated by it (strictly)."""
        if not isinstance(params, DiagnosisNoteParams):
            params = DiagnosisNoteParams.model_validate(dict(params), strict=True)
        mode = params.mode.strip()
        if not mode:
            raise ValueError(f"{LABEL_NOTE} needs the parameter mode (the diagnosed failure mode)")
        sentence = MODE_SENTENCES.get(mode)
        self.note = (f"Diagnosed failure mode for these tasks: {mode}"
                     + (f" ({sentence})." if sentence else "."))

    @hookimpl
    def agent_notes(self, context: StepContext):
        """The same note every step."""
        return self.note


class MetadataNote:
    """Metadata-only control: a standing note with the env's task facts named by `keys` (from its reset info)."""

    def __init__(self, params: MetadataNoteParams | Mapping[str, Any]) -> None:
        """`params`: a `MetadataNoteParams` (the host validated it), or a dict validated by it (strictly)."""
        if not isinstance(params, MetadataNoteParams):
            params = MetadataNoteParams.model_validate(dict(params), strict=True)
        self.keys = [k.strip() for k in params.keys.split(",") if k.strip()]
        if not self.keys:
            raise ValueError(f"{METADATA_NOTE}: the parameter keys names no reset-info key")
        oracle = sorted(set(self.keys) & ORACLE_KEYS)
        if oracle:
            raise ValueError(f"{METADATA_NOTE}: {', '.join(oracle)} is an oracle (the solution), not task metadata")
        self.note: str | None = None

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        """Read the named facts from the env's reset info; scalars only."""
        values = {key: start.env_info.get(key) for key in self.keys}
        facts = [f"{key}: {value}" for key, value in values.items()
                 if isinstance(value, str | int | float) and not isinstance(value, bool)]
        self.note = "Task metadata: " + "; ".join(facts) if facts else None

    @hookimpl
    def agent_notes(self, context: StepContext):
        """The same note every step (none when the env gives none of the keys)."""
        return self.note


def info_harness(name: str, rest: str) -> HarnessSpec:
    """The harness loader of `darc-info:label:MODE`, `darc-info:metadata:KEYS` and `darc-info:random:GUARD`."""
    kind, _, value = rest.partition(":")
    if not value:
        raise ValueError(f"{name!r}: not {INFO_PREFIX}label:MODE, {INFO_PREFIX}metadata:KEYS or "
                         f"{INFO_PREFIX}random:GUARD")
    if kind == "label":
        return HarnessSpec(name, (LABEL_NOTE,), {"mode": value}, f"the diagnosis label {value!r} only", "darc")
    if kind == "metadata":
        return HarnessSpec(name, (METADATA_NOTE,), {"keys": value}, f"the task metadata ({value}) only", "darc")
    if kind == "random":
        return HarnessSpec(name, (value,), {"view": "random"},
                           f"{value} with its ranked view replaced by as many admissible actions at random", "darc")
    raise ValueError(f"{name!r}: unknown control {kind!r}; choose from: label, metadata, random")


# --- the runs and their tables -------------------------------------------------------------------------------------


def _won_by_task(records: Sequence[EpisodeRecord], harness: str) -> dict[str, bool]:
    return {r.task_id: r.won for r in records if r.harness == harness}


def _rows(summary: Mapping[str, Any], records: Sequence[EpisodeRecord],
          rows: Sequence[tuple[str, str, str]], reference: str) -> list[ControlRow]:
    """(label, harness, detail) rows measured from one run, paired by task with the `reference` harness."""
    ref = _won_by_task(records, reference)
    out = []
    for label, harness, detail in rows:
        stats = summary["harnesses"][harness]
        won = _won_by_task(records, harness)
        cascade = [r.attempts for r in records if r.harness == harness and r.attempts is not None]
        attempts = sum(len(a) for a in cascade) / len(cascade) if cascade else None
        pair: dict[str, Any] = {}
        if harness != reference:
            shared = sorted(set(ref) & set(won))
            b = sum(ref[t] and not won[t] for t in shared)
            c = sum(won[t] and not ref[t] for t in shared)
            pair = {"b": b, "c": c, "p": mcnemar_exact(b, c)}
        out.append(ControlRow(label, harness, detail, len(won), stats["success_rate"], stats["mean_steps"],
                              stats["invalid_actions_per_episode"], attempts, **pair))
    return out


def _run(host: Host, config: RunConfig, harnesses: list[str], run_dir: Path) -> tuple[dict, list[EpisodeRecord]]:
    summary = check_finished(run(host, replace(config, harnesses=harnesses, out=str(run_dir))), run_dir)
    return summary, load_records(run_dir)


def transfer(host: Host, config: RunConfig, policy_path: str | Path, out: str | Path) -> list[ControlRow]:
    """Deploy the frozen policy unchanged on `config`'s tasks beside the bare agent (one run in `out/run`)."""
    harness = f"darc:{policy_path}"
    summary, records = _run(host, config, [BASE, harness], Path(out) / "run")
    chain = " -> ".join(json.loads(Path(policy_path).read_text())["chain"])
    return _rows(summary, records, [("bare agent", BASE, "-"), ("frozen policy", harness, chain)], BASE)


def policy_source(policy_path: str | Path) -> str:
    """Where the policy was distilled: its evidence's env, split and task count (from evidence.json), or ''."""
    policy = json.loads(Path(policy_path).read_text())
    meta_path = Path(str(policy.get("evidence", ""))).with_name("evidence.json")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return f"{policy.get('n_tasks', '?')} evidence tasks"
    return f"{meta.get('env')} split {meta.get('split')}, {meta.get('tasks')} tasks"


def mode_policies(diagnosis: Mapping[str, Any], evidence: Evidence, evidence_path: str | Path,
                  generic: Sequence[str], mismatched_mode: str | None, max_len: int, lam: float,
                  tau_free: float, verifier: str = "env:won") -> dict[str, dict[str, Any]]:
    """The correct, mismatched and generic policies (policy.json records) for `policy_controls`.

    correct: distilled over the diagnosed mode's admissible interventions; mismatched: distilled
    over another mode's (none shared with the correct set; `mismatched_mode` or the first other
    mode with evidence); generic: the chain `generic`, whatever the diagnosis. All three stop on
    `verifier`. ValueError names what is missing.
    """
    mode = diagnosis.get("mode")
    if not mode:
        raise ValueError("the diagnosis names no dominant failure mode, so there is no correct policy to test")
    sets: Mapping[str, list[str]] = diagnosis.get("admissible_sets") or {}
    correct = [n for n in sets.get(mode, []) if n in evidence.interventions]
    if not correct:
        raise ValueError(f"the evidence has no intervention admissible for the diagnosed mode {mode!r} "
                         f"({', '.join(sets.get(mode, [])) or 'none on this env'}); evaluate with "
                         "--all-interventions")
    if mismatched_mode is None:
        others = [m for m in sets if m != mode
                  and any(n in evidence.interventions and n not in correct for n in sets[m])]
        if not others:
            raise ValueError(f"no other mode than {mode!r} has interventions in the evidence; evaluate with "
                             "--all-interventions")
        mismatched_mode = others[0]
    if mismatched_mode == mode:
        raise ValueError(f"--mismatched-mode {mode!r} is the diagnosed mode")
    mismatched = [n for n in sets.get(mismatched_mode, []) if n in evidence.interventions and n not in correct]
    if not mismatched:
        raise ValueError(f"the evidence has no intervention of mode {mismatched_mode!r} outside the correct set")
    policies = {}
    for control, names, used_mode in (("correct", correct, mode), ("mismatched", mismatched, mismatched_mode)):
        result = distill(evidence, max_len, lam, tau_free, names)
        policies[control] = policy_dict(result, evidence_path, control=control, mode=used_mode,
                                        diagnosed_mode=mode, verifier=verifier)
    policies["generic"] = {"chain": list(generic), "control": "generic", "diagnosed_mode": mode,
                           "verifier": verifier,
                           "note": "a chain chosen without the diagnosis (--generic), not distilled"}
    return policies


def write_policies(policies: Mapping[str, dict], folder: Path) -> dict[str, Path]:
    """Write each policy as FOLDER/<control>.json; a file already there must hold the same policy (a resume)."""
    from playground.host_api import atomic_write_text

    paths = {}
    for control, policy in policies.items():
        path = folder / f"{control}.json"
        text = json.dumps(policy, indent=2) + "\n"
        if path.exists() and path.read_text() != text:
            raise ValueError(f"{path} holds another policy (from other evidence or settings); use another --out")
        if not path.exists():
            atomic_write_text(path, text)
        paths[control] = path
    return paths


def policy_controls(host: Host, config: RunConfig, paths: Mapping[str, Path], out: str | Path) -> list[ControlRow]:
    """Deploy the correct, generic and mismatched policies and the bare agent on the same tasks (one run)."""
    harnesses = {control: f"darc:{path}" for control, path in paths.items()}
    summary, records = _run(host, config, [BASE, *harnesses.values()], Path(out) / "run")
    rows = [("bare agent", BASE, "-")]
    for control in ("correct", "generic", "mismatched"):
        policy = json.loads(paths[control].read_text())
        detail = " -> ".join(policy["chain"]) + (f" ({policy['mode']})" if policy.get("mode") else "")
        rows.append((f"{control} policy", harnesses[control], detail))
    return _rows(summary, records, rows, harnesses["correct"])


def info_harnesses(guard: str, mode: str, metadata_keys: str) -> list[tuple[str, str, str]]:
    """(row, harness, detail) of the matched-information table: the operator first (the reference)."""
    return [
        ("operator", EVAL_PREFIX + guard, f"{guard} (its ranked view and recovery prompt)"),
        ("random top-k", f"{INFO_PREFIX}random:{guard}", "the same view size and prompt, admissible actions at random"),
        ("diagnosis label only", f"{INFO_PREFIX}label:{mode}", f"a note naming {mode}"),
        ("metadata only", f"{INFO_PREFIX}metadata:{metadata_keys}", f"a note with the task's {metadata_keys}"),
        ("bare agent", BASE, "-"),
    ]


def info_controls(host: Host, config: RunConfig, guard: str, mode: str, metadata_keys: str,
                  out: str | Path) -> list[ControlRow]:
    """The operator against the matched-information controls and the bare agent on the same tasks (one run)."""
    rows = info_harnesses(guard, mode, metadata_keys)
    summary, records = _run(host, config, [harness for _, harness, _ in rows], Path(out) / "run")
    return _rows(summary, records, rows, rows[0][1])


def table(rows: Sequence[ControlRow], reference: str) -> str:
    """The printed table: success, steps, invalid actions (and attempts of cascades), McNemar against `reference`."""
    lines = [f"{'row':<22} {'n':>4} {'success':>8} {'steps':>7} {'invalid/ep':>10} {'attempts':>8} "
             f"{'b/c vs ' + reference:>24} {'p':>7}  detail"]
    for row in rows:
        attempts = f"{row.attempts:8.2f}" if row.attempts is not None else f"{'-':>8}"
        pair = f"{row.b}/{row.c}" if row.b is not None else "-"
        p = f"{row.p:7.3f}" if row.p is not None else f"{'-':>7}"
        lines.append(f"{row.name:<22} {row.episodes:>4} {row.success:8.3f} {row.steps:7.2f} {row.invalid:10.2f} "
                     f"{attempts} {pair:>24} {p}  {row.detail}")
    return "\n".join(lines)
