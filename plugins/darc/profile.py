"""DARC's profiling step: count the failure signatures of a profiling run, diagnose the dominant mode.

The profiling run is played by the host (`playground run --harness darc-profile:DET1,DET2`, or a
study grid): the base agent alone, the chosen detectors watching it without intervening (each is
wrapped so that only its detection and observer hooks are called). `darc diagnose RUN_DIR` reads it.

The signature histogram counts failure onsets: a label detected at consecutive steps (one
streak) counts once. The diagnosis is a rule over it: each failure type belongs to a failure mode (declared with
the type in the host's label registry), and the mode with the most onsets per episode
wins. The admissible interventions are those registered for that mode.

The candidate modes are the paper's three (`PAPER_MODES`) unless the caller names others
(`darc diagnose --modes`): Sentry's `progress` and `grounding` are a deviation, used only
when asked for. Onsets of modes that are not candidates are still counted and reported
(`other_modes_per_episode`), but never win.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from playground.api import Services
from playground.core.events import DetectionEvent, Event
from playground.core.hookspecs import hookimpl
from playground.host_api import (
    HarnessSpec,
    Host,
    InterventionSpec,
    atomic_write_text,
    build_intervention,
    read_events,
    record_trace,
)
from playground.plugins.darc.runs import RunNotReady, finished, played, read_run

# The failure modes in the order ties are listed (the paper's three, then Sentry's progress and grounding); any
# other mode a failure type or an intervention declares comes after them, by name.
DARC_MODES = ("action_validity", "procedure_breadth", "format_precision", "progress", "grounding")
PAPER_MODES = DARC_MODES[:3]  # the candidate modes by default
NO_DOMINANT = "no dominant failure mode"
PROFILE_HARNESS = "darc-profile"


class DetectOnly:
    """Wraps an intervention plugin so that it detects and observes but never intervenes."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin

    def _forward(self, hook: str, **kwargs):
        method = getattr(self.plugin, hook, None)
        return method(**kwargs) if callable(method) else None

    @hookimpl
    def episode_started(self, start):
        self._forward("episode_started", start=start)

    @hookimpl
    def detect_failures(self, context, proposal):
        return self._forward("detect_failures", context=context, proposal=proposal)

    @hookimpl
    def step_completed(self, outcome):
        self._forward("step_completed", outcome=outcome)

    @hookimpl
    def episode_finished(self, end):
        self._forward("episode_finished", end=end)


DETECT_ONLY_PREFIX = "detect-only:"


def detect_only_intervention(name: str, rest: str, lookup: Callable[[str], InterventionSpec]) -> InterventionSpec:
    """The intervention loader of `detect-only:NAME`: the detect-only twin of intervention NAME."""
    if not rest:
        raise ValueError(f"{name!r}: name the intervention after {DETECT_ONLY_PREFIX!r}")
    spec = lookup(rest)

    def twin(params: Any, services: Services) -> DetectOnly:
        return DetectOnly(build_intervention(spec, params, services))

    return InterventionSpec(name, twin, f"{rest}, detecting only", (), spec.cost_unit, "darc",
                            params_model=spec.params_model)  # NAME's parameters


def detect_only(detectors: list[str]) -> list[str]:
    """The names of the detect-only twins of the named interventions (built by the `detect-only:` loader)."""
    return [DETECT_ONLY_PREFIX + name for name in detectors]


# The detectors watch the agent without their repair state or playbook (Sentry-style detectors).
QUIET = {"hard_repair": False, "soft_repair": False}


def profile_harness_name(detectors: list[str]) -> str:
    """The name of the profiling harness watching with `detectors` (`darc-profile:DET1,DET2`)."""
    return f"{PROFILE_HARNESS}:{','.join(detectors)}"


def profile_harness(name: str, rest: str) -> HarnessSpec:
    """The harness loader of `darc-profile:DET1,DET2`: the base agent watched by the detectors' detect-only twins."""
    detectors = [d.strip() for d in rest.split(",") if d.strip()]
    if not detectors:
        raise ValueError(f"{name!r}: name the detectors after {PROFILE_HARNESS + ':'!r} (comma-separated)")
    return HarnessSpec(name, tuple(detect_only(detectors)), dict(QUIET), "DARC profiling", "darc")


def library(host: Host, env: str) -> list[InterventionSpec]:
    """Every registered intervention that can be deployed on `env` (not the detect-only twins, nor the points of
    comparison registered with `candidate=False`)."""
    return [spec for spec in host.interventions
            if not spec.name.startswith(DETECT_ONLY_PREFIX) and spec.works_with(env) and spec.candidate]


def mode_order(mode: str) -> tuple[int, str]:
    """Sort key of a mode: the known modes first, in DARC_MODES order, then others by name."""
    return (DARC_MODES.index(mode) if mode in DARC_MODES else len(DARC_MODES), mode)


def admissible_sets(host: Host, env: str) -> dict[str, list[str]]:
    """{mode: the interventions usable on `env` that are admissible for it}, for every mode some intervention names."""
    sets: dict[str, list[str]] = {}
    for spec in library(host, env):
        for mode in spec.modes:
            sets.setdefault(mode, []).append(spec.name)
    return {mode: sorted(sets[mode]) for mode in sorted(sets, key=mode_order)}


def dominant(per_episode: dict[str, float]) -> str | None:
    """The mode with strictly the most onsets, or None (no onsets, or a tie at the top)."""
    ranked = sorted(per_episode.items(), key=lambda item: (-item[1], mode_order(item[0])))
    if not ranked or ranked[0][1] <= 0 or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


@dataclass(frozen=True)
class Diagnosis:
    """The outcome of profiling: the dominant mode (None when there is none), why, and its admissible set."""

    mode: str | None
    why: str
    per_episode: dict[str, float]
    admissible: list[str]
    others: dict[str, float] | None = None  # onsets per episode of the modes that were not candidates


def mode_counts(histogram: dict[str, dict[str, int]], host: Host) -> Counter[str]:
    """Failure onsets per mode: each failure type counts towards the mode the label registry declares for it."""
    counts: Counter[str] = Counter()
    for failure_type, labels in histogram.items():
        counts[host.labels.mode_of(failure_type)] += sum(labels.values())
    return counts


def diagnose(histogram: dict[str, dict[str, int]], invalid_actions: int, episodes: int, host: Host,
             env: str, modes: tuple[str, ...] | None = PAPER_MODES) -> Diagnosis:
    """The rule diagnosis: the candidate mode with strictly the most failure onsets per episode, or no dominant mode.

    The candidates are `modes` (default: the paper's three; None: every mode). Every candidate
    with an admissible intervention on `env` is reported (0 when not seen); the onsets of other
    modes are reported apart (`others`). With no onsets, or a tie at the top, there is no
    dominant mode: `mode` is None and no intervention is admissible (gather the whole library's
    evidence).
    """
    sets = admissible_sets(host, env)
    counts = mode_counts(histogram, host)
    seen = sorted(set(sets) | set(counts), key=mode_order)
    candidates = [mode for mode in seen if modes is None or mode in modes]
    per_episode = {mode: round(counts.get(mode, 0) / max(episodes, 1), 4) for mode in candidates}
    others = {mode: round(counts[mode] / max(episodes, 1), 4) for mode in seen
              if mode not in per_episode and counts.get(mode)}
    mode = dominant(per_episode)
    ranked = sorted(per_episode, key=lambda m: (-per_episode[m], mode_order(m)))
    if mode is None:
        if (not ranked or per_episode[ranked[0]] == 0) and others:
            seen_elsewhere = ", ".join(f"{m} {n}" for m, n in others.items())
            why = (f"{NO_DOMINANT}: no failure of the candidate modes ({', '.join(candidates)}) in {episodes} "
                   f"episodes; onsets per episode of other modes: {seen_elsewhere} (darc diagnose --modes all "
                   "counts them)")
        elif not ranked or per_episode[ranked[0]] == 0:
            why = f"{NO_DOMINANT}: no failure detected in {episodes} episodes"
        else:
            tied = [m for m in ranked if per_episode[m] == per_episode[ranked[0]]]
            why = f"{NO_DOMINANT}: {' and '.join(tied)} tie with {per_episode[ranked[0]]} onsets per episode"
        return Diagnosis(None, why, per_episode, [], others)
    why = f"{mode}: {per_episode[mode]} failure onsets per episode over {episodes} episodes"
    if len(ranked) > 1:
        why += f" (next: {ranked[1]} with {per_episode[ranked[1]]})"
    if mode == "action_validity":
        why += f"; {invalid_actions} invalid actions reached the env"
    if not sets.get(mode):
        why += f"; no intervention usable on {env} is admissible for {mode}"
    return Diagnosis(mode, why, per_episode, list(sets.get(mode, [])), others)


def profile_harnesses(harnesses: list[str]) -> list[str]:
    """The profiling harnesses (`darc-profile:DET1,DET2`) among a run's harnesses."""
    return [h for h in harnesses if h.startswith(PROFILE_HARNESS + ":")]


def diagnose_run(host: Host, run_dir: str | Path, diagnoser: Any = None,
                 modes: tuple[str, ...] | None = PAPER_MODES, harness: str | None = None) -> dict:
    """Diagnose the profiling episodes of a finished run, write `run_dir/diagnosis.json` and return its content.

    The episodes are those of `harness` (default: the run's one `darc-profile:DETECTORS` harness), which must cover
    every task of the run. The rule diagnosis is always made; with a `diagnoser` (an `LLMDiagnoser`) the LLM's
    diagnosis is made too and becomes the diagnosis (`diagnoser: "llm"`); both are kept,
    for the whole family and per failed episode (for `darc agreement`). Both choose among
    `modes` (default: the paper's three; None: every mode).
    """
    allowed = (lambda mode: True) if modes is None else (lambda mode: mode in modes)
    config, all_records = read_run(run_dir)
    if harness is None:
        found = profile_harnesses(played(config))
        if len(found) > 1:
            raise RunNotReady(f"{run_dir}: several profiling harnesses ({', '.join(found)}); name one with --harness")
        if not found:
            raise RunNotReady(f"{run_dir}: no profiling harness (it played {', '.join(played(config))}); play "
                              "the base agent watched by detectors: playground run --harness darc-profile:sentry ...")
        harness = found[0]
    records = finished(run_dir, config, all_records, harness, "darc diagnose")
    detectors = [d.strip() for d in harness.partition(":")[2].split(",") if d.strip()] \
        if harness.startswith(PROFILE_HARNESS + ":") else []
    env = str(config.get("env"))
    histogram: dict[str, Counter] = {}
    invalid = 0
    episodes: list[dict[str, Any]] = []
    traces: list[list[Event]] = []
    for record in records:
        invalid += record.invalid_actions
        previous: set[str] = set()  # labels detected at the previous step: a streak counts once
        current: set[str] = set()
        step = None
        onsets: Counter[str] = Counter()
        events = read_events(record_trace(run_dir, record))  # never a file outside the run directory
        for event in events:
            if not isinstance(event, DetectionEvent):
                continue
            if event.step != step:  # a step without detections in between ends every streak
                previous = current if step is not None and event.step == step + 1 else set()
                current, step = set(), event.step
            label = ",".join(event.labels)
            current.add(label)
            if label not in previous:
                histogram.setdefault(event.failure_type, Counter())[label] += 1
                onsets[host.labels.mode_of(event.failure_type)] += 1
        episodes.append({"task_id": record.task_id, "won": record.won, "steps": record.steps,
                         "onsets": dict(sorted(onsets.items())),
                         "rule": dominant({m: n for m, n in onsets.items() if allowed(m)})})
        traces.append(events)
    plain = {t: dict(sorted(c.items())) for t, c in sorted(histogram.items())}
    rule = diagnose(plain, invalid, len(records), host, env, modes)
    sets = admissible_sets(host, env)
    candidates = [mode for mode in sets if allowed(mode)]
    result: dict[str, Any] = {
        "env": f"{env}:{config.get('task_set')}", "split": config.get("split"), "agent": config.get("agent"),
        "episodes": len(records), "success_rate": sum(1 for r in records if r.won) / len(records),
        "detectors": detectors, "histogram": plain, "invalid_actions": invalid,
        "candidate_modes": list(modes) if modes is not None else "all",
        "modes_per_episode": rule.per_episode, "other_modes_per_episode": rule.others or {},
        "diagnoser": "rule", "mode": rule.mode, "why": rule.why,
        "admissible_interventions": rule.admissible, "admissible_sets": sets,
        "rule": {"mode": rule.mode, "why": rule.why}, "per_episode": episodes}
    if diagnoser is not None:
        llm = diagnoser.diagnose_family(candidates, [(e, t) for e, t in zip(episodes, traces) if not e["won"]])
        for episode, verdict in zip([e for e in episodes if not e["won"]], llm["per_episode"]):
            episode["llm"] = verdict["mode"]
            episode["llm_verdict"] = {"reason": verdict["reason"], "why": verdict["why"]}
        result.update(diagnoser="llm", mode=llm["mode"], why=llm["why"],
                      admissible_interventions=list(sets.get(llm["mode"], [])) if llm["mode"] else [],
                      llm={"mode": llm["mode"], "why": llm["why"], "model": diagnoser.name})
    atomic_write_text(Path(run_dir) / "diagnosis.json", json.dumps(result, indent=2) + "\n")
    return result
