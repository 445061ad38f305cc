"""DARC's profiling step: run the base agent, count failure signatures, diagnose the dominant mode.

The agent runs alone; the chosen detectors watch it without intervening (each is wrapped
so that only its detection and observer hooks are called). The signature histogram counts
failure onsets: a label detected at consecutive steps (one streak) counts once. The
diagnosis is a rule over it: each failure type belongs to a failure mode (declared with
the type in the host's label registry), and the mode with the most onsets per episode
wins. The admissible interventions are those registered for that mode.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from playground.core.hookspecs import hookimpl
from playground.host.manager import Host
from playground.host.registry import HarnessSpec, InterventionSpec
from playground.run.files import atomic_write_text
from playground.run.rundir import load_records, record_trace
from playground.run.runner import RunConfig, run
from playground.run.traces import read_trace

DARC_MODES = ("action_validity", "procedure_breadth", "format_precision")
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


def _detect_only(spec: InterventionSpec) -> Callable[[dict], DetectOnly]:
    """A factory of the detect-only twins of `spec`'s plugin objects."""
    return lambda params: DetectOnly(spec.factory(params))


def add_detect_only(host: Host, detectors: list[str]) -> list[str]:
    """Register detect-only twins of the named interventions; return their names."""
    names = []
    for name in detectors:
        spec = host.interventions.get(name)
        twin = f"detect-only:{name}"
        if twin not in host.interventions:
            host.interventions.add(twin, InterventionSpec(
                twin, _detect_only(spec), f"{name}, detecting only",
                (), spec.cost_unit, "darc"))
        names.append(twin)
    return names


def library(host: Host, env: str) -> list[InterventionSpec]:
    """Every registered intervention that can be deployed on `env` (not the detect-only twins)."""
    return [spec for spec in host.interventions if not spec.name.startswith("detect-only:") and spec.works_with(env)]


@dataclass(frozen=True)
class Diagnosis:
    """The outcome of profiling."""

    mode: str
    why: str
    per_episode: dict[str, float]
    admissible: list[str]


def diagnose(histogram: dict[str, dict[str, int]], invalid_actions: int, episodes: int, host: Host,
             env: str) -> Diagnosis:
    """Pick the dominant failure mode from the signature histogram (rule: most detections per episode)."""
    counts: Counter[str] = Counter({mode: 0 for mode in DARC_MODES})
    for failure_type, labels in histogram.items():
        counts[host.labels.mode_of(failure_type)] += sum(labels.values())
    per_episode = {mode: round(count / max(episodes, 1), 4) for mode, count in counts.items()}
    order = sorted(per_episode, key=lambda m: (-per_episode[m], DARC_MODES.index(m) if m in DARC_MODES else 99, m))
    mode = order[0]
    why = (f"{mode}: {per_episode[mode]} failure onsets per episode over {episodes} episodes "
           f"(next: {order[1]} with {per_episode[order[1]]})" if len(order) > 1 else f"{mode}: the only mode seen")
    if per_episode[mode] == 0:
        why = f"no failure detected in {episodes} episodes; defaulting to {mode}"
    if mode == "action_validity":
        why += f"; {invalid_actions} invalid actions reached the env"
    admissible = sorted(spec.name for spec in library(host, env) if mode in spec.modes)
    return Diagnosis(mode, why, per_episode, admissible)


def profile(host: Host, config: RunConfig, detectors: list[str], out: str | Path) -> dict:
    """Run the profiling episodes, write `out/diagnosis.json` and return its content."""
    out = Path(out)
    twins = add_detect_only(host, detectors)
    if PROFILE_HARNESS in host.harnesses:
        host.harnesses.remove(PROFILE_HARNESS)
    quiet = {"hard_repair": False, "soft_repair": False}  # Sentry-style detectors: no repair state, no playbook
    host.harnesses.add(PROFILE_HARNESS, HarnessSpec(PROFILE_HARNESS, tuple(twins), quiet, "DARC profiling", "darc"))
    run_dir = out / "profile-run"
    summary = run(host, replace(config, harnesses=[PROFILE_HARNESS], out=str(run_dir)))
    histogram: dict[str, Counter] = {}
    invalid = 0
    episodes = 0
    for record in load_records(run_dir):
        episodes += 1
        invalid += int(record.get("invalid_actions", 0))
        previous: set[str] = set()  # labels detected at the previous step: a streak counts once
        current: set[str] = set()
        step = None
        for event in read_trace(record_trace(run_dir, record)):  # never a file outside the run directory
            if event["type"] != "detection":
                continue
            if event["step"] != step:
                previous, current, step = current, set(), event["step"]
            label = ",".join(event["labels"])
            current.add(label)
            if label not in previous:
                histogram.setdefault(event["failure_type"], Counter())[label] += 1
    plain = {t: dict(sorted(c.items())) for t, c in sorted(histogram.items())}
    diagnosis = diagnose(plain, invalid, episodes, host, config.env)
    result = {"env": f"{config.env}:{config.task_set}", "split": config.split, "agent": config.agent,
              "episodes": episodes, "success_rate": summary["harnesses"][PROFILE_HARNESS]["success_rate"],
              "detectors": detectors, "histogram": plain, "invalid_actions": invalid,
              "modes_per_episode": diagnosis.per_episode, "mode": diagnosis.mode, "why": diagnosis.why,
              "admissible_interventions": diagnosis.admissible}
    atomic_write_text(out / "diagnosis.json", json.dumps(result, indent=2) + "\n")
    return result
