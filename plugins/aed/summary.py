"""`aed summary`: pairs, replayed pairs, correction vs retry pass rates on matched pairs, grades, rejections."""

from __future__ import annotations

import json
from pathlib import Path

from playground.host_api import bootstrap_ci, sign_flip_p
from playground.plugins.aed.diagnose import read_jsonl_file
from playground.plugins.aed.replay import GRADES


def summarise(run_dir: str | Path, resamples: int = 10_000, seed: int = 0) -> dict:
    """Figures of a diagnosed (and replayed) run; the interval is a paired bootstrap over pairs of the
    difference (treatment pass share - control pass share), with a paired sign-flip p-value."""
    run_dir = Path(run_dir)
    diagnosed_path = run_dir / "aed" / "diagnose.json"
    diagnosed = json.loads(diagnosed_path.read_text()) if diagnosed_path.exists() else {}
    replays = read_jsonl_file(run_dir / "aed" / "replays.jsonl")
    treatment = [sum(r["treatment_won"]) / len(r["treatment_won"]) for r in replays if r["treatment_won"]]
    control = [sum(r["control_won"]) / len(r["control_won"]) for r in replays if r["control_won"]]
    diffs = [t - c for t, c in zip(treatment, control)]
    continuation: list[dict] = []
    for r in replays:
        setting = {"agent": r.get("agent"), "agent_options": r.get("agent_options") or {}, "trials": r.get("trials"),
                   "continuation": r.get("continuation", "substituted"), "oracle": bool(r.get("oracle"))}
        if setting not in continuation:
            continuation.append(setting)
    result = {"episodes": diagnosed.get("episodes"), "failed": diagnosed.get("failed"),
              "screened": diagnosed.get("screened", {}), "pairs": diagnosed.get("pairs", 0),
              "with_correction": diagnosed.get("with_correction", 0), "rejected": diagnosed.get("rejected", {}),
              "producer": diagnosed.get("producer"),
              "yield": {**(diagnosed.get("yield") or {}), "replayed": len(replays)},
              "replayed_pairs": len(replays), "continuation": continuation,
              "correction_pass_rate": sum(treatment) / len(treatment) if treatment else None,
              "retry_pass_rate": sum(control) / len(control) if control else None,
              "difference": sum(diffs) / len(diffs) if diffs else None,
              "difference_ci95": list(bootstrap_ci(diffs, resamples=resamples, seed=seed)) if diffs else None,
              "p_value": sign_flip_p(diffs, resamples=resamples, seed=seed) if diffs else None,
              "grades": {grade: sum(r["grade"] == grade for r in replays) for grade in GRADES},
              "proposals": diagnosed.get("proposals", 1), "search": search_figures(replays)}
    return result


def _outcomes(chosen: list[dict]) -> dict:
    """Pass rate (the mean over pairs of the share of trials won), trials won and played, and grades of one
    proposal per pair."""
    shares = [sum(c["won"]) / len(c["won"]) for c in chosen if c["won"]]
    return {"pass_rate": sum(shares) / len(shares) if shares else None,
            "won": sum(sum(c["won"]) for c in chosen), "trials": sum(len(c["won"]) for c in chosen),
            "grades": {grade: sum(c["grade"] == grade for c in chosen) for grade in GRADES}}


def search_figures(replays: list[dict]) -> dict:
    """The first proposal against the search-selected one over the replayed pairs: pairs, pairs with more than one
    candidate, candidates replayed, pairs whose selected candidate is not the first, and each one's outcomes.
    A replay made before candidates were replayed counts as one candidate, the first."""
    first = [{"index": 0, "action": r["correction"], "won": r["treatment_won"], "grade": r["grade"]}
             for r in replays]
    candidates = [r.get("candidates") or [f] for r, f in zip(replays, first)]
    selected = [r.get("selected") or f for r, f in zip(replays, first)]
    return {"pairs": len(replays), "with_candidates": sum(len(c) > 1 for c in candidates),
            "candidates_replayed": sum(len(c) for c in candidates),
            "selected_not_first": sum(s["index"] != 0 for s in selected),
            "first": _outcomes(first), "selected": _outcomes(selected)}


CONTINUATION_LABELS = {"run_agent": "the diagnosed episode's own agent", "substituted": "a substituted agent"}


def _settings(continuation: list[dict]) -> str:
    """The continuation settings as one line: `agent k=v ... (whose), N trial(s) per arm`, `;` between settings;
    an oracle continuation (an agent following the expert plan) says so."""
    def label(c: dict) -> str:
        whose = CONTINUATION_LABELS.get(c.get("continuation", "substituted"), "a substituted agent")
        return f"{whose}; ORACLE continuation: follows the expert plan" if c.get("oracle") else whose
    return "; ".join(" ".join([c["agent"], *(f"{k}={json.dumps(v)}" for k, v in c["agent_options"].items())])
                     + f" ({label(c)}), {c['trials']} trial(s) per arm" for c in continuation) or "-"


def format_summary(result: dict) -> str:
    def rate(value):
        return "-" if value is None else f"{value:.3f}"

    ci = result["difference_ci95"]
    lines = [f"episodes: {result['episodes']}  failed: {result['failed']}  screened: {result['screened'] or {}}",
             (f"pairs: {result['pairs']} (with a correction: {result['with_correction']})  "
             f"rejected: {result['rejected'] or {}}"),
             f"yield ({result['producer'] or '-'} producer): "
             + ", ".join(f"{k} {v}" for k, v in result["yield"].items()),
             f"replayed pairs: {result['replayed_pairs']}  continuation: {_settings(result['continuation'])}",
             (f"correction pass rate: {rate(result['correction_pass_rate'])}  "
             f"retry pass rate: {rate(result['retry_pass_rate'])}"),
             (f"difference: {rate(result['difference'])}  95% CI: "
             f"{'-' if ci is None else f'[{ci[0]:+.3f}, {ci[1]:+.3f}]'}  p: {rate(result['p_value'])}"),
             "evidence grades: " + ", ".join(f"{k} {v}" for k, v in result["grades"].items())]
    search = result["search"]
    if search["pairs"]:
        def side(figures: dict) -> str:
            grades = ", ".join(f"{k} {v}" for k, v in figures["grades"].items())
            return f"{rate(figures['pass_rate'])} ({figures['won']}/{figures['trials']} trials; {grades})"

        lines += [(f"proposals: first vs search-selected ({search['pairs']} pairs, {search['with_candidates']} with "
                   f"more than one candidate, {search['candidates_replayed']} candidates replayed, selected not the "
                   f"first: {search['selected_not_first']})"),
                  f"  first proposal pass rate:   {side(search['first'])}",
                  f"  search-selected pass rate:  {side(search['selected'])}"]
    return "\n".join(lines)
