"""The held-out protocol (the paper's Table 4): grow a playbook on N tasks, score four conditions on N others.

Phase 1 (init) runs the evolving `sentry` harness on the init split into `DIR/init`, an
ordinary resumable run directory; its playbook (`DIR/init/playbooks/sentry.sqlite`) is the
init playbook. Phase 2 (eval) runs the four conditions on the eval split, whose task ids
must not overlap the init split's, into `DIR/eval`, one run, so every condition plays
each task with the same seed. Before any eval episode each condition gets its own copy of
the init playbook (`DIR/eval/playbooks/<harness>.sqlite`, made once, so a resumed run
carries on with the copy it had):

- retrieval off (`sentry-retrieval-off`): Sentry retrieving no lesson;
- frozen (`sentry-frozen`): retrieves from its copy, never adds to it;
- frozen + persistent exposure (`sentry-frozen-persistent`): the same, plus the whole copy
  in the agent's context every step;
- evolving (`sentry`): retrieves and adds verified lessons to its copy.

The report gives, per condition, the success rate with its Wilson interval, the mean score
(where the env reports one), the lessons in its playbook at the end, and the paired
difference (this condition minus the reference condition, task by task) with a bootstrap
95% interval and McNemar's exact test (`playground.run.stats.compare`). `DIR/heldout.json`
holds it all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.host_api import (
    EpisodeRecord,
    Host,
    RunConfig,
    atomic_write_text,
    check_finished,
    load_records,
    playbook_path,
    run,
    summarise_harness,
)


@dataclass(frozen=True)
class Condition:
    """One row of the held-out table: a name, the harness that plays it, and what it is in words."""

    name: str
    harness: str
    label: str


CONDITIONS = (
    Condition("retrieval-off", "sentry-retrieval-off", "retrieval off"),
    Condition("frozen", "sentry-frozen", "frozen"),
    Condition("frozen-persistent", "sentry-frozen-persistent", "frozen + persistent exposure"),
    Condition("evolving", "sentry", "evolving"),
)
INIT_HARNESS = "sentry"
DEFAULT_REFERENCE = "evolving"
# Parameters that tell the conditions apart; a --param setting one would make them the same.
CONDITION_PARAMS = ("retrieval", "update_playbook", "persistent", "playbook_read_only")
RESAMPLES = 10_000

Runner = Callable[[RunConfig], dict]


class HeldoutError(PlaygroundError, ValueError):
    """The held-out protocol was asked for something it cannot do; the message says what and where."""


def condition(name: str) -> Condition:
    """The condition called `name` (HeldoutError lists the choices)."""
    for known in CONDITIONS:
        if known.name == name:
            return known
    raise HeldoutError(f"unknown condition {name!r}; choose from: {', '.join(c.name for c in CONDITIONS)}")


def check_protocol(init: RunConfig, evaluation: RunConfig) -> None:
    """Refuse splits that share a task, configs that differ other than in split and tasks, and a parameter
    that would erase the difference between the conditions."""
    shared = [task for task in evaluation.tasks if task in set(init.tasks)]
    if shared:
        listed = ", ".join(shared[:5]) + (f" and {len(shared) - 5} more" if len(shared) > 5 else "")
        raise HeldoutError(f"the init split {init.split!r} and the eval split {evaluation.split!r} of "
                           f"{init.env}:{init.task_set} share {len(shared)} task(s) ({listed}); "
                           "the held-out protocol needs disjoint splits (--init-split, --eval-split)")
    if init.playbook is not None or evaluation.playbook is not None:
        raise HeldoutError("the held-out phases use their own playbooks (DIR/init, copies in DIR/eval); "
                           "a shared --playbook would mix the conditions")
    if replace(init, split="", tasks=[], out="", harnesses=[]) != replace(evaluation, split="", tasks=[], out="",
                                                                           harnesses=[]):
        raise HeldoutError("the init and eval phases must share env, agent, options, parameters, seed and budget")
    fixed = sorted(set(init.params) & set(CONDITION_PARAMS))
    if fixed:
        raise HeldoutError(f"--param {', '.join(fixed)} would override what tells the held-out conditions apart "
                           f"({', '.join(CONDITION_PARAMS)}); leave it out")


def copy_init_playbook(init: RunConfig, evaluation: RunConfig) -> dict[str, Path]:
    """Give each eval condition its own copy of the init playbook, where it has none yet; return the copies."""
    from playground.plugins.playbook.store import Playbook

    source = Path(playbook_path(init, INIT_HARNESS))
    copies = {}
    for known in CONDITIONS:
        target = Path(playbook_path(evaluation, known.harness))
        if not target.exists():
            # (an init run whose episodes all failed to start made none: the copies start empty)
            with Playbook(source, read_only=source.is_file()) as playbook:
                playbook.copy_to(target)
        copies[known.harness] = target
    return copies


def heldout(host: Host, init: RunConfig, evaluation: RunConfig, out: str | Path, runner: Runner | None = None,
            reference: str = DEFAULT_REFERENCE, workers: int = 1) -> dict[str, Any]:
    """Run both phases (each resumes where it stopped), write `out/heldout.json` and return the report.

    `runner(config) -> summary` plays a phase (default `playground.run.runner.run`, with `workers`).
    """
    check_protocol(init, evaluation)
    condition(reference)
    play = runner or (lambda config: run(host, config, workers=workers))
    check_finished(play(init), init.out)  # the evaluation phase reads the playbook the whole first phase grew
    copies = copy_init_playbook(init, evaluation)
    check_finished(play(evaluation), evaluation.out)
    result = report(init, evaluation, copies, reference)
    atomic_write_text(Path(out) / "heldout.json", json.dumps(result, indent=2) + "\n")
    return result


def _lessons(path: str | Path) -> int:
    from playground.plugins.playbook.store import Playbook

    with Playbook(path, read_only=True) as playbook:
        return len(playbook)


def _with_score_ratio(records: Sequence[EpisodeRecord]) -> list[EpisodeRecord]:
    """Records with `score_ratio` (score / max score, a key the model does not declare) where the episode reports
    both."""
    out = []
    for record in records:
        score, top = record.score, record.max_score
        ratio = {"score_ratio": score / top} if score is not None and top else {}
        out.append(record.model_copy(update=ratio) if ratio else record)
    return out


def report(init: RunConfig, evaluation: RunConfig, copies: Mapping[str, Path],
           reference: str = DEFAULT_REFERENCE) -> dict[str, Any]:
    """The held-out report, from the two run directories and the conditions' playbooks."""
    from playground.host_api import Metric, compare

    tasks = set(evaluation.tasks)
    by_harness: dict[str, list[EpisodeRecord]] = {c.harness: [] for c in CONDITIONS}
    for record in load_records(evaluation.out):
        if record.harness in by_harness and record.task_id in tasks:
            by_harness[record.harness].append(record)
    by_harness = {harness: _with_score_ratio(records) for harness, records in by_harness.items()}
    init_records = [r for r in load_records(init.out)
                    if r.harness == INIT_HARNESS and r.task_id in set(init.tasks)]
    init_playbook = playbook_path(init, INIT_HARNESS)
    start = _lessons(init_playbook)
    ref = condition(reference)
    scored = all("score_ratio" in r.extra for records in by_harness.values() for r in records)
    metrics = (Metric("success", ("won",), binary=True), *([Metric("score", ("score_ratio",))] if scored else []))
    rows = []
    for known in CONDITIONS:
        records = by_harness[known.harness]
        figures = summarise_harness(records)
        paired = None
        if known.name != ref.name and records and by_harness[ref.harness]:
            result = compare(by_harness[ref.harness], records, label_a=ref.name, label_b=known.name,
                             metrics=metrics, resamples=RESAMPLES, seed=evaluation.seed)
            paired = {"pairs": result.n_pairs, **{m.name: {"diff": m.diff, "ci95": [m.ci_low, m.ci_high],
                                                          "p_value": m.p_value, "test": m.test,
                                                          **({"discordant": list(m.discordant)}
                                                             if m.discordant else {})}
                                                 for m in result.metrics}}
        rows.append({"condition": known.name, "label": known.label, "harness": known.harness,
                     "playbook": str(copies[known.harness]), "episodes": figures["episodes"],
                     "won": sum(1 for r in records if r.won), "success_rate": figures["success_rate"],
                     "success_ci95": figures["success_ci95"], "mean_score": figures["mean_score"],
                     "mean_steps": figures["mean_steps"],
                     "lessons_start": start, "lessons_end": _lessons(copies[known.harness]),
                     "lessons_added": figures["lessons_added"], "errors": figures["errors"],
                     "vs_reference": paired})
    seeds = {r.task_id: r.seed for records in by_harness.values() for r in records}
    return {
        "protocol": "held-out", "env": f"{evaluation.env}:{evaluation.task_set}", "agent": evaluation.agent,
        "agent_options": evaluation.agent_options, "params": evaluation.params, "seed": evaluation.seed,
        "max_steps": evaluation.max_steps,
        "init": {"split": init.split, "tasks": list(init.tasks), "run": init.out, "harness": INIT_HARNESS,
                 "playbook": init_playbook, "lessons": start, **_init_figures(init_records)},
        "eval": {"split": evaluation.split, "tasks": list(evaluation.tasks), "run": evaluation.out},
        "reference": ref.name, "difference": f"condition - {ref.name}, paired by task",
        "conditions": rows, "seeds": seeds,
    }


def _init_figures(records: list[EpisodeRecord]) -> dict[str, Any]:
    figures = summarise_harness(records)
    return {"episodes": figures["episodes"], "success_rate": figures["success_rate"],
            "lessons_added": figures["lessons_added"]}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _delta(paired: Mapping[str, Any] | None, metric: str) -> str:
    if paired is None:
        return "(reference)"
    m = paired[metric]
    p = f", p={m['p_value']:.2f}" if metric == "success" else ""
    return f"{m['diff'] * 100:+.0f} [{m['ci95'][0] * 100:+.0f}, {m['ci95'][1] * 100:+.0f}]{p}"


def format_report(result: Mapping[str, Any]) -> str:
    """The held-out table: one row per condition, with a header saying what was run and what the differences are."""
    init, evaluation, ref = result["init"], result["eval"], result["reference"]
    scored = any(row["mean_score"] is not None for row in result["conditions"])
    head = ["condition", "harness", "episodes", "success", "95% CI", *(["score"] if scored else []), "lessons",
            f"Δ success vs {ref} [95% CI]", *([f"Δ score vs {ref} [95% CI]"] if scored else [])]
    table = [head]
    for row in result["conditions"]:
        low, high = row["success_ci95"]
        cells = [row["label"], row["harness"], str(row["episodes"]), _percent(row["success_rate"]),
                 f"{low:.0%}-{high:.0%}", *([_percent(row["mean_score"])] if scored else []),
                 f"{row['lessons_start']}->{row['lessons_end']}", _delta(row["vs_reference"], "success")]
        if scored:
            paired = row["vs_reference"]
            cells.append(_delta(paired, "score") if paired is None or "score" in paired else "-")
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = [f"held-out: {result['env']}, agent {result['agent']}, seed {result['seed']}; "
             f"init: {init['episodes']} tasks of {init['split']} under {init['harness']} "
             f"({init['lessons']} lessons); eval: {len(evaluation['tasks'])} tasks of {evaluation['split']}"]
    lines += ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
              for r in table]
    lines.insert(2, "  ".join("-" * w for w in widths))
    errors = sum(row["errors"] for row in result["conditions"])
    lines += ["", f"Δ: condition minus {ref}, in percentage points, paired by task (same task, same seed); "
                  "95% percentile bootstrap interval; p: McNemar exact test",
              "lessons: in the condition's copy of the init playbook, at the start -> at the end "
              "(retrieval off stores verified lessons it never reads)"
              + (f"; {errors} episode(s) ended by an error" if errors else "")]
    return "\n".join(lines)
