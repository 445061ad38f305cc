"""The paper's controls as data: what a DARC gain is credited to, tested on the same tasks.

- Table 6's shape (the darc-table6 study): the policy distilled for the diagnosed mode (correct) against one
  distilled for another mode's interventions (mismatched) and a chain that ignores the diagnosis (generic).
  `mode_policies` makes the three policy files (the `darc.policy_controls` step); a run deploys each as a cascade
  (`--harness darc:POLICY.json`).
- Table 7's shape (the darc-table7 study): the operator against controls given matched information without it,
  each a harness of the `darc-info:` loader: the diagnosis label only (`darc-info:label:MODE`, a note naming the
  mode), the task's metadata only (`darc-info:metadata:KEYS`, a note with the env's task facts), and a random top-k
  view (`darc-info:random:GUARD`, the operator's view size and prompt, its ranking replaced by a random draw).

A study's table pairs every row with its reference row by task (exact McNemar).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from playground.core.hookspecs import hookimpl
from playground.core.payloads import EpisodeStart, StepContext
from playground.host_api import HarnessSpec
from playground.plugins.darc.distill import distill, policy_dict
from playground.plugins.darc.evidence import Evidence
from playground.plugins.darc.params import DiagnosisNoteParams, MetadataNoteParams

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


# --- the note interventions of the matched-information controls -------------------------------------------------


class DiagnosisNote:
    """Label-only control: a standing note naming the diagnosed failure mode, and nothing else."""

    def __init__(self, params: DiagnosisNoteParams) -> None:
        """`params`: validated by the host against the declaration."""
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

    def __init__(self, params: MetadataNoteParams) -> None:
        """`params`: validated by the host against the declaration."""
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


# --- the policies of the policy controls ---------------------------------------------------------------------


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
                         f"({', '.join(sets.get(mode, [])) or 'none on this env'}); gather the whole "
                         "library's evidence (every darc-eval:NAME harness)")
    if mismatched_mode is None:
        others = [m for m in sets if m != mode
                  and any(n in evidence.interventions and n not in correct for n in sets[m])]
        if not others:
            raise ValueError(f"no other mode than {mode!r} has interventions in the evidence; gather "
                             "the whole library's evidence (every darc-eval:NAME harness)")
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
