"""`darc.agreement`: rule and LLM diagnoses against a verifier-backed reference (the shape of the paper's Table 15;
the step writes agreement.json, the figure `darc_agreement` reads it, the darc-table15 study runs it).

The reference comes from evidence, not from a judge: on the dev tasks the bare agent
failed (`base.csv` of `darc evidence` over the whole library on the profiled split), a mode
*fixes* a task when some intervention admissible for it (the profile's `admissible_sets`)
solves it, by the env's own verifier. The family's reference mode is the mode that fixes
the most dev failures. Per failed task that some mode fixes, a diagnosis agrees when it
names a mode that fixes it; tasks no mode fixes are left out (and counted).

Rows: `majority` always names the family's reference mode; `uniform random` names a
candidate mode uniformly (its expected agreement); `rule` and `LLM` are the per-episode
diagnoses `darc.diagnose` recorded (the LLM row needs the `llm` or `instrument` diagnoser).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.plugins.darc.evidence import BASE_FILE, EvidenceError, load_evidence
from playground.plugins.darc.profile import NO_DOMINANT, mode_order


@dataclass(frozen=True)
class Agreement:
    """The reference and each diagnoser's agreement with it."""

    modes: tuple[str, ...]
    failures: int  # dev tasks the bare agent failed (with evidence)
    fixable: int  # of them, those some mode fixes
    fixes: dict[str, int]  # mode -> failures its admissible set fixes
    reference: tuple[str, ...]  # the mode(s) fixing the most failures (several on a tie)
    rows: tuple[tuple[str, float | None, str], ...]  # (diagnoser, agreement per fixable task, family mode)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready record."""
        return {"modes": list(self.modes), "failures": self.failures, "fixable": self.fixable, "fixes": self.fixes,
                "reference": list(self.reference),
                "rows": [{"diagnoser": n, "agreement": v, "family_mode": f} for n, v, f in self.rows]}


def agreement(diagnosis_path: str | Path, evidence_path: str | Path) -> Agreement:
    """Compare the profile's diagnoses with the verifier-backed reference from the evidence (see module docstring)."""
    try:
        diagnosis = json.loads(Path(diagnosis_path).read_text(encoding="utf-8"))
        sets: dict[str, list[str]] = diagnosis["admissible_sets"]
        episodes: list[dict] = diagnosis["per_episode"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EvidenceError(f"{diagnosis_path}: not a diagnosis file of darc diagnose ({exc})") from None
    evidence = load_evidence(evidence_path)
    base_path = Path(evidence_path).with_name(BASE_FILE)
    if not base_path.is_file():
        raise EvidenceError(f"no {BASE_FILE} next to {str(evidence_path)!r}: run darc evidence (it writes both)")
    base = load_evidence(base_path)
    failed_base = {t for i, t in enumerate(base.task_ids) if not base.success[i, 0]}
    columns = {mode: [evidence.interventions.index(n) for n in names if n in evidence.interventions]
               for mode, names in sets.items()}
    modes = tuple(sorted((m for m, c in columns.items() if c), key=mode_order))
    if not modes:
        raise EvidenceError(f"{evidence_path}: no admissible intervention of any mode was evaluated; "
                            "gather the whole library's evidence")
    fixed_by: dict[str, set[str]] = {}
    failures = [t for t in evidence.task_ids if t in failed_base]
    for task in failures:
        row = evidence.task_ids.index(task)
        fixed_by[task] = {m for m in modes if evidence.success[row, columns[m]].any()}
    fixes = {m: sum(1 for t in failures if m in fixed_by[t]) for m in modes}
    best = max(fixes.values(), default=0)
    reference = tuple(m for m in modes if fixes[m] == best) if best > 0 else ()
    fixable = [t for t in failures if fixed_by[t]]

    def score(predict) -> float | None:
        if not fixable:
            return None
        return sum(1 for t in fixable if predict(t) in fixed_by[t]) / len(fixable)

    by_task = {e["task_id"]: e for e in episodes}
    rows: list[tuple[str, float | None, str]] = []
    majority = reference[0] if reference else None
    rows.append(("majority", score(lambda t: majority), majority or NO_DOMINANT))
    uniform = sum(len(fixed_by[t]) / len(modes) for t in fixable) / len(fixable) if fixable else None
    rows.append(("uniform random", uniform, "-"))
    rows.append(("rule", score(lambda t: by_task.get(t, {}).get("rule")),
                 (diagnosis.get("rule") or {}).get("mode") or NO_DOMINANT))
    if "llm" in diagnosis:
        rows.append(("LLM", score(lambda t: by_task.get(t, {}).get("llm")),
                     diagnosis["llm"].get("mode") or NO_DOMINANT))
    else:
        rows.append(("LLM", None, "not run (darc.diagnose with diagnoser llm or instrument)"))
    return Agreement(modes, len(failures), len(fixable), fixes, reference, tuple(rows))
