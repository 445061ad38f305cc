"""Sentry's paired forks: from each step where Sentry intervened, play on with its repair and without it.

An **intervention point** is a step of an episode of the chosen harness where the `sentry`
plugin made a decision (hard repair, soft repair, termination guard, loop bar, fallback,
give-up). From the state before that step (rebuilt by `playground.run.forks`: the recorded
prefix replayed and checked), two arms play on under the same continuation policy (the
run's agent and options unless another is given), the same seed in trial i, and no
interventions:

- **repair**: the action Sentry's repair led to at that step (the action the trace records
  as executed there; a finish where the episode ended there);
- **original**: the agent's original proposal at that step (its first proposal, before any
  intervention: the action, or a finish), played as it was.

Each arm's continuation is judged blind by `LocalRecoveryJudge` (Sentry's detectors and its
window verifier, horizon H): **local recovery** means the failure Sentry detected at the
point did not recur within H steps and grounded, task-relevant progress followed. The env's
grade at the fork's end (`won`) is reported separately and never reaches the judge, nor does
the grade text the env prints: the recorded prefix and first observation go to the judge
through the env provider's `remove_grade_text` (the env the trace header names), the fork's
own observations through the live env's.

Figures: each arm's local recovery and final success over the points, with 95% percentile
bootstrap intervals resampling episodes (an episode's points together); the paired
difference (repair - original) with its interval and a paired sign-flip p-value, also over
episodes (`playground.run.stats`). A study runs it as the pipeline step `sentry.paired_forks`
(`paired_forks_step`) and shows the figures as Sentry's `paired_*` columns (`figures.py`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from playground.core.errors import PlaygroundError
from playground.core.events import InterventionEvent
from playground.core.payloads import Detection
from playground.host_api import (
    EpisodeTrace,
    ForkError,
    Host,
    RecordedStep,
    RunDirError,
    atomic_write_text,
    bootstrap_ci,
    confined,
    fork,
    fork_path,
    load_episode,
    load_records,
    record_trace,
    safe_file_name,
    sign_flip_p,
)
from playground.plugins.sentry.blind import BlindTurn, GradeTextRemover
from playground.plugins.sentry.harness import NAME, OWN_DETECTORS
from playground.plugins.sentry.recovery_judge import LocalRecoveryJudge

ARMS = ("repair", "original")


class PairedForkError(PlaygroundError, ValueError):
    """The paired-fork analysis cannot run: no such harness in the run, no intervention point, a bad option."""


@dataclass(frozen=True)
class Point:
    """One step where Sentry intervened: what it detected, what the agent first proposed, what was played."""

    trace: str  # relative to the run directory
    episode: str  # the episode's key, the resampling unit
    position: int  # the fork point
    kind: str  # the kind of Sentry's first decision at this step
    detection: Detection
    original: str  # the agent's first proposal ("" with original_finish)
    original_finish: bool
    repaired: str  # the action played after the repair ("" with repaired_finish)
    repaired_finish: bool

    @property
    def id(self) -> str:
        """`TRACE@T`."""
        return f"{self.trace}@{self.position}"

    @property
    def changed(self) -> bool:
        """Whether the repair changed what was played at this step."""
        return (self.original, self.original_finish) != (self.repaired, self.repaired_finish)

    def arm(self, name: str) -> tuple[str | None, bool]:
        """(action, finish) the arm plays at the fork point."""
        if name == "repair":
            return (None, True) if self.repaired_finish else (self.repaired, False)
        return (None, True) if self.original_finish else (self.original, False)


def _detection(step: RecordedStep, decision: InterventionEvent) -> Detection | None:
    """The failure Sentry acted on at a step: its decision's detection, else its own detections on the first
    proposal, else the labels of its message."""
    if decision.detections:
        d = decision.detections[0]  # the Detection payload the decision carried
        return Detection(str(d.get("detector", NAME)), str(d.get("failure_type", "")), tuple(d.get("labels") or ()),
                         float(d.get("confidence", 1.0)), str(d.get("evidence", "")), str(d.get("subtype", "")))
    own = [d for d in step.detections if d.detector in OWN_DETECTORS and d.attempt == 0]
    if own:
        e = own[0]
        return Detection(e.detector or NAME, e.failure_type, tuple(e.labels), e.confidence, e.evidence, e.subtype)
    message = decision.message or {}
    if message.get("labels"):
        return Detection(NAME, str(message.get("failure_type", "")), tuple(message["labels"]))
    return None


def episode_points(episode: EpisodeTrace, trace: str, key: str, plugin: str = NAME) -> tuple[list[Point], int]:
    """The intervention points of one episode, and how many steps with an intervention had no detection to
    judge recurrence by (left out)."""
    points, undetected = [], 0
    for step in [*episode.steps, *([episode.tail] if episode.tail is not None else [])]:
        decisions = [i for i in step.interventions if i.plugin == plugin]
        if not decisions or not step.proposals:
            continue
        detection = _detection(step, decisions[0])
        if detection is None:
            undetected += 1
            continue
        first = step.proposals[0]
        repaired_finish = not step.action  # the tail: the episode ended at this step (a finish or a stop)
        points.append(Point(trace, key, step.position, decisions[0].kind, detection,
                            "" if first.finish else first.action, first.finish, step.action, repaired_finish))
    return points, undetected


def intervention_points(run_dir: str | Path, harness: str, plugin: str = NAME) -> tuple[list[Point], dict]:
    """Every intervention point of `harness`'s episodes in a run (errored episodes left out), and counts."""
    run_dir = Path(run_dir)
    try:
        records = load_records(run_dir)
    except RunDirError as exc:
        raise PairedForkError(str(exc)) from None
    harnesses = sorted({r.harness for r in records})
    if harness not in harnesses:
        raise PairedForkError(f"{run_dir}: no episodes of harness {harness!r} (the run has: {', '.join(harnesses)})")
    points: list[Point] = []
    counts = {"episodes": 0, "errored": 0, "undetected": 0}
    for record in records:
        if record.harness != harness:
            continue
        counts["episodes"] += 1
        if record.status == "error":
            counts["errored"] += 1
            continue
        for relative in [a.trace for a in record.attempts or []] or [record.trace]:
            episode = load_episode(record_trace(run_dir, record, trace=relative))
            found, undetected = episode_points(episode, str(relative), record.key, plugin)
            points += found
            counts["undetected"] += undetected
    return points, counts


def choose(points: list[Point], limit: int | None, seed: int) -> list[Point]:
    """All points, or `limit` of them drawn at random (seeded), in run order."""
    if limit is None or limit >= len(points):
        return list(points)
    keep = set(random.Random(seed).sample(range(len(points)), limit))
    return [p for i, p in enumerate(points) if i in keep]


def grade_text_remover(host: Host, episode: EpisodeTrace) -> GradeTextRemover:
    """The `remove_grade_text` of the env the episode's trace header names (its provider's, through the host's
    registry); ForkError where the host has no such env (the episode could not be forked either)."""
    env = episode.header.env
    try:
        return host.grade_text_remover(env)
    except KeyError as exc:
        raise ForkError(f"{episode.path}: {exc.args[0]}") from None


def _judge(episode: EpisodeTrace, point: Point, horizon: int, window: int,
           remove_grade_text: GradeTextRemover) -> LocalRecoveryJudge:
    """The judge of one arm: the recorded prefix and first observation (raw trace text, which the judge cleans
    with `remove_grade_text`, the env provider's, before anything reads it), and the actions offered before the
    point."""
    prefix = tuple(BlindTurn(s.position, s.thought, s.action, s.observation, s.valid, s.kind)
                   for s in episode.steps[:point.position])
    offered = [*(episode.reset.admissible_actions or ()),
               *(a for s in episode.steps[:point.position] for a in (s.admissible or ()))]
    return LocalRecoveryJudge(point.position, point.detection, prefix, episode.reset.goal,
                              episode.reset.observation, tuple(offered), horizon, window,
                              remove_grade_text=remove_grade_text)


def play_point(host: Host, run_dir: Path, episode: EpisodeTrace, point: Point, *, agent: str | None,
               agent_options: dict | None, trials: int, seed: int, horizon: int, window: int) -> dict:
    """Fork both arms of one point `trials` times; return the point's record (per arm and trial: the first
    action played, local recovery with the verifier's evidence, the env's grade at the end, the fork's trace)."""
    header = episode.header
    agent = agent or header.agent or "expert"
    options = dict(header.agent_options) if agent_options is None else dict(agent_options)
    arms: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    remove_grade_text = grade_text_remover(host, episode)
    for trial in range(trials):
        starts = {}
        for arm in ARMS:
            action, finish = point.arm(arm)
            judge = _judge(episode, point, horizon, window, remove_grade_text)
            out = fork_path(run_dir, episode, point.position, f"paired-{arm}.{trial}")
            result = fork(host, episode, point.position, out, agent=agent, agent_options=options, action=action,
                          finish=finish, seed=seed + trial, observers=[("local-recovery", judge)],
                          lineage={"paired_point": point.id, "arm": arm, "trial": trial})
            starts[arm] = result.start_observation
            arms[arm].append({"trial": trial, "seed": seed + trial, "action": action, "finish": finish,
                              "recovered": judge.recovered, "evidence": judge.evidence, "won": result.won,
                              "status": result.status, "steps": result.steps,
                              "trace": str(out.relative_to(run_dir))})
        if len(set(starts.values())) != 1:
            raise ForkError(f"{point.id}: the arms of trial {trial} started from different observations")
    return {"id": point.id, "trace": point.trace, "episode": point.episode, "step": point.position,
            "kind": point.kind, "failure_type": point.detection.failure_type, "labels": list(point.detection.labels),
            "original": point.original, "original_finish": point.original_finish, "repaired": point.repaired,
            "repaired_finish": point.repaired_finish, "changed": point.changed, "agent": agent,
            "agent_options": options, "same_start": True, "arms": arms}


def _share(runs: list[dict], key: str) -> float:
    return sum(bool(r[key]) for r in runs) / len(runs)


def _rate(values: list[float], groups: list[str]) -> dict:
    return {"rate": sum(values) / len(values), "ci95": list(bootstrap_ci(values, groups))}


def _difference(a: list[float], b: list[float], groups: list[str]) -> dict:
    diffs = [x - y for x, y in zip(a, b)]
    return {"difference": sum(diffs) / len(diffs), "ci95": list(bootstrap_ci(diffs, groups)),
            "p_value": sign_flip_p(diffs, groups)}


def figures(played: list[dict]) -> dict:
    """Each arm's local recovery and final success (95% CIs over episodes), the paired differences, and the
    same rates by intervention kind."""
    groups = [p["episode"] for p in played]
    result: dict[str, Any] = {"points": len(played), "episodes": len(set(groups)),
                              "changed": sum(p["changed"] for p in played)}
    for metric, key in (("local_recovery", "recovered"), ("final_success", "won")):
        values = {arm: [_share(p["arms"][arm], key) for p in played] for arm in ARMS}
        result[metric] = {arm: _rate(values[arm], groups) for arm in ARMS}
        result[metric]["difference"] = _difference(values["repair"], values["original"], groups)
    kinds: dict[str, dict] = {}
    for p in played:
        entry = kinds.setdefault(p["kind"], {"points": 0, **{arm: 0.0 for arm in ARMS}})
        entry["points"] += 1
        for arm in ARMS:
            entry[arm] += _share(p["arms"][arm], "recovered")
    result["local_recovery_by_kind"] = {k: {"points": v["points"], **{arm: v[arm] / v["points"] for arm in ARMS}}
                                        for k, v in sorted(kinds.items())}
    return result


def paired_forks(host: Host, run_dir: str | Path, harness: str = NAME, *, points: int | None = None,
                 horizon: int = 10, window: int = 5, agent: str | None = None, agent_options: dict | None = None,
                 trials: int = 1, seed: int = 0, progress: Callable[[int, int], None] | None = None) -> dict:
    """Fork every chosen intervention point of `harness` with and without Sentry's repair; write
    RUN_DIR/sentry/paired-forks-<harness>.json (settings, figures, one record per point) and return it."""
    if horizon < 1 or trials < 1 or (points is not None and points < 1):
        raise PairedForkError("--horizon, --trials and --points must be at least 1")
    if agent is not None and agent not in host.agents:
        raise PairedForkError(f"unknown agent {agent!r}; choose from: {', '.join(host.agents.names())}")
    run_dir = Path(run_dir)
    found, counts = intervention_points(run_dir, harness)
    if not found:
        raise PairedForkError(f"{run_dir}: harness {harness!r} made no intervention with a detection to fork from")
    chosen = choose(found, points, seed)
    episodes: dict[str, EpisodeTrace] = {}
    played, failed = [], {}
    for index, point in enumerate(chosen):
        if point.trace not in episodes:
            episodes[point.trace] = load_episode(confined(run_dir, point.trace, what="trace"))
        try:
            played.append(play_point(host, run_dir, episodes[point.trace], point, agent=agent,
                                     agent_options=agent_options, trials=trials, seed=seed, horizon=horizon,
                                     window=window))
        except ForkError as exc:
            failed[point.id] = str(exc)
        if progress is not None:
            progress(index + 1, len(chosen))
    if not played:
        raise PairedForkError(f"{run_dir}: no intervention point could be forked; first error: "
                              f"{next(iter(failed.values()))}")
    first = played[0]
    report = {"harness": harness, "found": len(found), "chosen": len(chosen),
              "not_replayable": failed, **counts, "agent": first["agent"], "agent_options": first["agent_options"],
              "horizon": horizon, "window": window, "trials": trials, "seed": seed,
              "judge": "Sentry's rule detectors and window verifier on the continuation (blind)",
              "figures": figures(played), "points": played}
    out = confined(run_dir, Path("sentry") / f"paired-forks-{safe_file_name(harness)}.json", what="paired forks")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    report["path"] = str(out)
    return report


class PairedForksParams(BaseModel):
    """The `sentry.paired_forks` pipeline step's parameters (those of `paired_forks`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    harness: str = Field(default=NAME, description="the harness whose intervention points are forked")
    points: int | None = Field(default=None, ge=1, description="fork this many points, drawn at random (seeded by "
                                                               "seed) [default: all]")
    horizon: int = Field(default=10, ge=1, description="H: steps within which the failure must not recur and "
                                                       "grounded progress must follow")
    window: int = Field(default=5, ge=1, description="the verifier's window")
    agent: str | None = Field(default=None, description="the continuation policy of both arms [default: the run's "
                                                        "agent]")
    agent_options: dict[str, Any] | None = Field(default=None, description="its options [default: the run's]")
    trials: int = Field(default=1, ge=1, description="forks per arm and point (trial i: seed + i, both arms)")
    seed: int = 0


def paired_forks_step(host: Host, run_dir: Path, params: PairedForksParams) -> dict:
    """The pipeline step: `paired_forks` over the copy of a grid's run (its report under RUN_DIR/sentry/)."""
    if params.agent_options is not None and params.agent is None:
        raise PairedForkError("agent_options need an agent (without one, the run's agent and options are used)")
    return paired_forks(host, run_dir, params.harness, points=params.points, horizon=params.horizon,
                        window=params.window, agent=params.agent, agent_options=params.agent_options,
                        trials=params.trials, seed=params.seed)


def read_report(run_dir: Path, harness: str) -> dict | None:
    """The paired-forks report of `harness` in RUN_DIR (None where none was made)."""
    path = run_dir / "sentry" / f"paired-forks-{safe_file_name(harness)}.json"
    return json.loads(path.read_text()) if path.is_file() else None
