"""Sentry's detectors and verifier measured against the failures a failure-injection agent injected.

`measure_run` reads one run directory of the `noisy` agent (or any agent that records
`Proposal.injected`): the episodes of a harness that does not repair (`base`) give the
detector scores, replayed offline (`truth.py`: every observation through the env provider's
`remove_grade_text`, as Sentry reads them live) and matched with the rule in `measure.py`;
the episodes of a `sentry` harness, when the run has them, give the verifier's agreement
with what the injected failure really did. `tables` prints the reports as Markdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playground.host_api import Host
from playground.plugins.sentry.detectors import (
    GROUNDING_DETECTORS,
    PROGRESS_DETECTORS,
    VALIDITY_DETECTORS,
    detector_name,
)
from playground.plugins.sentry.harness import DEFAULTS
from playground.plugins.sentry.measure import (
    DEFAULT_WINDOW,
    LabelScore,
    Matcher,
    cohen_kappa,
    confusions,
    fmt,
    macro,
    score,
    score_steps,
    streaks,
)
from playground.plugins.sentry.truth import (
    ALL_RULES,
    JUDGE,
    TruthError,
    judge_hits,
    replay_rules,
    sample_steps,
    traces,
    verdict_truths,
)

RULES = [detector_name(f) for f in (*VALIDITY_DETECTORS, *PROGRESS_DETECTORS, *GROUNDING_DETECTORS)]


def mode_matcher(host: Host, match: str) -> Matcher:
    """The label matcher over the host's label registry (a label maps to its failure type's mode)."""
    def mode_of(label: str) -> str:
        declared = host.labels.get(label)
        return host.labels.mode_of(declared.failure_type) if declared is not None else label

    return Matcher(mode_of, match)


def _type(host: Host, label: str) -> str:
    declared = host.labels.get(label)
    return declared.failure_type if declared is not None else ""


def _rows(rows: dict[str, LabelScore]) -> dict[str, Any]:
    return {"labels": {label: {"injections": r.injections, "detected": r.detected, "detections": r.detections,
                               "true_positives": r.true_positives, "precision": r.precision, "recall": r.recall,
                               "f1": r.f1} for label, r in rows.items()},
            "macro": macro(rows)}


def measure_run(host: Host, run_dir: str | Path, *, window: int = DEFAULT_WINDOW, match: str = "mode",
                llm_sample: int = 0, judge: Any = None, detect_harness: str = "base",
                verify_harness: str = "sentry") -> dict[str, Any]:
    """The report of one run directory: detector rows, the judge's sample (with `judge` and `llm_sample` > 0)
    and the verifier's agreement (when the run has `verify_harness`). TruthError says what is missing."""
    if window < 0:
        raise TruthError(f"--window must be 0 or more steps, got {window}")
    matcher = mode_matcher(host, match)
    episodes = traces(run_dir, detect_harness)
    header = episodes[0].header
    evidence = [replay_rules(host, episode) for episode in episodes]
    injected = streaks(record for e in evidence for record in e.injected)
    if not injected:
        raise TruthError(f"{run_dir}: the {detect_harness!r} episodes record no injected failure "
                         "(Proposal.injected); play them with a failure-injection agent such as noisy")
    hits = [hit for e in evidence for hit in e.hits]
    fired = {hit.detector for hit in hits}
    detectors = {ALL_RULES: _rows(score(injected, [h for h in hits if h.detector == ALL_RULES], window, matcher))}
    for rule in [name for name in RULES if name in fired]:  # a single rule: the rows of the labels it reports
        rows = score(injected, [h for h in hits if h.detector == rule], window, matcher)
        detectors[rule] = _rows({label: row for label, row in rows.items() if row.detections})
    report: dict[str, Any] = {
        "env": f"{header.env}:{header.task_set}", "run_dir": str(run_dir), "agent": header.agent,
        "episodes": len(episodes), "steps": sum(len(e.steps) for e in evidence), "window": window, "match": match,
        "injections": {label: sum(i.label == label for i in injected) for label in sorted({i.label for i in injected})},
        "detectors": detectors, "silent_rules": [name for name in RULES if name not in fired],
        "false_positives_near": confusions(injected, [h for h in hits if h.detector == ALL_RULES], window, matcher),
        "sample": None, "verifier": None}
    if llm_sample > 0 and judge is not None:
        # the judge is asked about valid actions only (as in Sentry): the failures it can see there
        sampled = sample_steps(evidence, llm_sample, window, keep=lambda label: _type(host, label) != "action_validity")
        truth = [t for _, t in sampled]
        judged = judge_hits(judge, sampled)
        rules = [h for h in hits if h.detector == ALL_RULES]
        report["sample"] = {"steps": len(sampled), "with_failure": sum(bool(t.labels) for t in truth),
                            "detectors": {JUDGE: _rows(score_steps(truth, judged, matcher)),
                                          ALL_RULES: _rows(score_steps(truth, rules, matcher))}}
    repaired = traces(run_dir, verify_harness, required=False)
    if repaired:
        report["verifier"] = verifier_agreement(repaired, window, matcher)
    return report


def verifier_agreement(episodes: list, window: int, matches: Matcher) -> dict[str, Any]:
    """How often Sentry's verdicts (resolved/unresolved) agree with whether the injected failure really
    ended within the horizon without recurring; Cohen's kappa over the verdicts about an injected failure."""
    verdicts = []
    for episode in episodes:
        horizon = int(episode.header.params.get("horizon", DEFAULTS["horizon"]))
        verdicts += verdict_truths(episode, window, matches, horizon)
    judged = [(v.verdict == "resolved", bool(v.truth)) for v in verdicts if v.truth is not None]
    return {"verdicts": len(verdicts), "about_injected": len(judged),
            "verifier_resolved": sum(a for a, _ in judged), "truly_resolved": sum(b for _, b in judged),
            "both_resolved": sum(a and b for a, b in judged),
            "agreement": sum(a == b for a, b in judged) / len(judged) if judged else None,
            "kappa": cohen_kappa(judged)}


def _table_rows(env: str, detectors: dict[str, Any]) -> list[str]:
    lines = []
    for name, rows in detectors.items():
        for label, r in rows["labels"].items():
            lines.append(f"| {env} | {name} | {label} | {r['injections']} | {r['detected']} | {fmt(r['recall'])} | "
                         f"{r['detections']} | {r['true_positives']} | {fmt(r['precision'])} | {fmt(r['f1'])} |")
        if len(rows["labels"]) < 2:
            continue
        m = rows["macro"]
        lines.append(f"| {env} | {name} | *macro* | | | {fmt(m['recall'])} | | | {fmt(m['precision'])} | "
                     f"{fmt(m['f1'])} |")
    return lines


HEAD = ("| env | detector | label | {unit} | detected | recall | detections | TP | precision | F1 |\n"
        "|---|---|---|---|---|---|---|---|---|---|")


def tables(reports: list[dict[str, Any]]) -> str:
    """The reports as Markdown: detectors per label, the judge's sample, the verifier's agreement."""
    out = [f"Window {reports[0]['window']} steps, labels matched by {reports[0]['match']}; `sentry` is all the "
           "rules as Sentry runs them, a rule's rows are the labels it reported; macro rows where a detector has "
           "more than one.", "",
           HEAD.format(unit="injections")]
    for report in reports:
        out += _table_rows(report["env"], report["detectors"])
    silent = [f"{r['env']}: {', '.join(r['silent_rules'])}" for r in reports if r["silent_rules"]]
    if silent:
        out += ["", "Rules that never fired: " + "; ".join(silent) + "."]
    out += ["", "False positives of `sentry` (all rules), by what was injected within the window (detected <- "
            "injected):", ""]
    out += [f"- {r['env']}: " + (", ".join(f"{k} {n}" for k, n in r["false_positives_near"].items()) or "none")
            for r in reports]
    sampled = [r for r in reports if r["sample"]]
    if sampled:
        out += ["", "Sampled steps (no validity detection; about half with an injected failure at or shortly before "
                "them), scored per step:", "", HEAD.format(unit="steps with it")]
        for report in sampled:
            out += _table_rows(f"{report['env']} ({report['sample']['steps']} steps)", report["sample"]["detectors"])
    checked = [r for r in reports if r["verifier"]]
    if checked:
        out += ["", "| env | verdicts | about an injected failure | verifier: resolved | truly resolved | both | "
                "agreement | Cohen's kappa |", "|---|---|---|---|---|---|---|---|"]
        for report in checked:
            v = report["verifier"]
            out.append(f"| {report['env']} | {v['verdicts']} | {v['about_injected']} | {v['verifier_resolved']} | "
                       f"{v['truly_resolved']} | {v['both_resolved']} | {fmt(v['agreement'])} | {fmt(v['kappa'])} |")
    return "\n".join(out)
