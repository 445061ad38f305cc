"""The Sentry episode plugin: detect, route to hard or soft repair, verify, learn.

One object per episode. Routing: an invalid action gets a hard repair (a ranked view
of the valid actions and a request to rewrite; if still invalid after the re-ask budget,
the configured fallback). Otherwise a progress or grounding detection above the
confidence threshold gets a soft repair (general advice, the last W steps, and at most
k retrieved lessons of the same failure type), subject to a per-episode cap and a
cooldown (which does not apply when the agent wants to stop, since that ends the episode).
An agent that still wants to stop early after the advice is offered the ranked valid
actions once more (`block_early_stop`). With `follow_up` N, the N steps after a progress repair
carry a standing note that keeps offering the actions not tried recently. Nothing detected:
nothing retrieved. Soft repairs are watched by the verifier, and only verified ones become
lessons in the playbook.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.core.hookspecs import hookimpl
from playground.core.payloads import (Decision, EpisodeEnd, EpisodeStart, InterventionMessage, StepContext, StepOutcome,
                                 Verification)

from playground.plugins.sentry.detectors import make_window, run_detectors
from playground.plugins.sentry.lessons import summarise
from playground.plugins.sentry.repair import fresh_actions, hard_repair_message, rank_actions, soft_repair_message
from playground.plugins.sentry.verifier import RecoveryVerifier

DEFAULTS: dict[str, Any] = {
    "window": 5,              # W: steps of local evidence
    "k": 5,                   # lessons retrieved at most
    "horizon": 10,            # H: cycles the verifier watches
    "quiet_steps": 3,         # steps without the failure before a repair counts as resolved
    "threshold": 0.6,         # minimum detection confidence for a soft repair
    "cooldown": 2,            # steps after a soft repair with no new soft repair
    "follow_up": 0,           # steps after a soft repair that keep offering the actions not tried recently
    "max_repairs": 10,        # soft repairs per episode at most
    "top_actions": 12,        # actions offered by a hard repair
    "fallback": "best",       # still invalid after the re-asks: "best" | "reask" | "give_up"
    "max_reasks_per_step": 2,
    "hard_repair": True,
    "screen": True,           # run the progress and grounding detectors
    "soft_repair": True,
    "update_playbook": True,  # store verified lessons
    "playbook_read_only": False,  # open the playbook read-only (e.g. a shipped one): retrieve, never write
    "persistent": False,      # exposure control: the whole playbook in context every step
    "block_early_stop": True, # an agent that insists on stopping early is offered concrete actions
    "detector": "rules",      # progress/grounding detection: "rules" | "llm" | "both" (validity is always rules)
    "verifier": "rules",      # "rules" | "llm"
    "summariser": "template", # "template" | "llm"
    "judge_base_url": "",     # the judge model for the LLM parts: an OpenAI-compatible endpoint ...
    "judge_model": "",
    "judge_local": False,     # ... or the embedded GGUF model
}
CHOICES = {"fallback": ("best", "reask", "give_up"), "detector": ("rules", "llm", "both"),
           "verifier": ("rules", "llm"), "summariser": ("template", "llm")}
NAME = "sentry"


class SentryConfigError(PlaygroundError, ValueError):
    """A Sentry parameter has a bad value."""


def parse_params(params: dict[str, Any]) -> dict[str, Any]:
    """Return Sentry's parameters: the defaults overridden by the harness's params."""
    merged = {**DEFAULTS, **{k: v for k, v in params.items() if k in DEFAULTS}}
    for key, default in DEFAULTS.items():
        if isinstance(default, bool) and not isinstance(merged[key], bool):
            raise SentryConfigError(f"sentry parameter {key!r} must be true or false, got {merged[key]!r}")
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            if not isinstance(merged[key], (int, float)) or merged[key] < 0:
                raise SentryConfigError(f"sentry parameter {key!r} must be a non-negative number, got {merged[key]!r}")
    for key, choices in CHOICES.items():
        if merged[key] not in choices:
            raise SentryConfigError(f"sentry parameter {key!r} must be one of {', '.join(choices)}, got {merged[key]!r}")
    return merged


class SentryPlugin:
    """Per-episode Sentry state and its hook implementations (see module docstring)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.p = parse_params(params)
        judge = None
        if "llm" in (self.p["detector"], self.p["verifier"], self.p["summariser"]) or self.p["detector"] == "both":
            from playground.plugins.sentry.judges import LLMDetector, LLMSummariser, LLMVerifier, make_judge_model

            judge = make_judge_model(self.p)
        horizon, quiet = int(self.p["horizon"]), int(self.p["quiet_steps"])
        self.verifier = LLMVerifier(judge, horizon, quiet) if self.p["verifier"] == "llm" else RecoveryVerifier(horizon, quiet)
        self.judge_detector = LLMDetector(judge) if self.p["detector"] in ("llm", "both") else None
        self.summarise = LLMSummariser(judge).summarise if self.p["summariser"] == "llm" else summarise
        self.playbook = None
        self.start: EpisodeStart | None = None
        self.soft_repairs = 0
        self.last_soft_step: int | None = None
        self.last_soft_type: str | None = None
        self.failing_actions: dict[int, str] = {}

    # -- episode -------------------------------------------------------------------

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        self.start = start
        self.verifier.start_episode(start.observation)
        uses_playbook = self.p["soft_repair"] or self.p["persistent"]
        if start.playbook and uses_playbook:
            from playground.plugins.playbook.store import Playbook

            read_only = bool(self.p["playbook_read_only"])
            if not read_only or Path(start.playbook).is_file():
                self.playbook = Playbook(start.playbook, read_only=read_only)

    @hookimpl
    def episode_finished(self, end: EpisodeEnd) -> None:
        if self.playbook is not None:
            self.playbook.close()
            self.playbook = None

    # -- step ----------------------------------------------------------------------

    @hookimpl
    def agent_notes(self, context: StepContext):
        notes = [self._follow_up_note(context)]
        if self.p["persistent"] and self.playbook is not None:
            lines = [f"- [{lesson.failure_type}: {', '.join(lesson.labels)}] when {lesson.trigger}: {lesson.principle}"
                     for lesson in self.playbook.all()]
            notes.append("Playbook of lessons from earlier episodes:\n" + "\n".join(lines) if lines else None)
        return [n for n in notes if n] or None

    def _follow_up_note(self, context: StepContext) -> str | None:
        """In the `follow_up` steps after a progress repair, keep offering the actions not tried recently.

        Only the fresh actions are named, never the ones the agent was looping on: a small
        model tends to copy whatever actions its prompt mentions.
        """
        last = self.last_soft_step
        if last is None or not 0 < context.step - last <= int(self.p["follow_up"]):
            return None
        if self.last_soft_type != "progress":
            return None
        offered = fresh_actions(context, int(self.p["window"]), int(self.p["top_actions"]))
        return ("You were stuck a few steps ago. Keep making progress; actions you have not tried recently: "
                + ", ".join(offered)) if offered else None

    @hookimpl
    def detect_failures(self, context: StepContext, proposal):
        first = self.start.observation if self.start else ""
        rules = self.p["screen"] and self.p["detector"] in ("rules", "both")
        found = run_detectors(context, proposal, int(self.p["window"]), screen=bool(rules), first_observation=first)
        if self.judge_detector is None or not self.p["screen"] or any(d.failure_type == "action_validity" for d in found):
            return found
        judged = self.judge_detector.detect(context, proposal, make_window(context, int(self.p["window"]), first))
        return found + ([judged] if judged else [])

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal, detections):
        if context.attempt == 0:
            self.verifier.note_detections(context.step, detections)
        invalid = [d for d in detections if d.failure_type == "action_validity"]
        if invalid and self.p["hard_repair"]:
            return self._hard_repair(context, invalid[0])
        if invalid or not self.p["soft_repair"]:
            return None
        if context.attempt > 0:
            return self._insisted_stop(context, proposal, detections)
        return self._soft_repair(context, proposal, detections)

    def _insisted_stop(self, context: StepContext, proposal, detections) -> Decision | None:
        """The agent still wants to stop after the advice: offer concrete actions once more."""
        early = [d for d in detections if "termination_miscalibration" in d.labels]
        if not (early and proposal.finish and self.p["block_early_stop"] and context.admissible_actions):
            return None
        if context.attempt >= int(self.p["max_reasks_per_step"]):
            return None
        ranked = tuple(rank_actions(context, int(self.p["top_actions"])))
        message = InterventionMessage("hard_repair", "The task is not finished. Choose one of these actions:\n"
                                      + "\n".join(f"- {a}" for a in ranked), "progress", ranked, early[0].labels)
        return Decision(NAME, "termination_guard", message=message, detections=tuple(early))

    def _hard_repair(self, context: StepContext, detection) -> Decision | None:
        if context.attempt < int(self.p["max_reasks_per_step"]):
            message = hard_repair_message(context, detection, int(self.p["top_actions"]))
            return Decision(NAME, "hard_repair", message=message, detections=(detection,))
        fallback = self.p["fallback"]
        ranked = rank_actions(context, 1)
        if fallback == "best" and ranked:
            return Decision(NAME, "hard_repair_fallback", action=ranked[0], detections=(detection,))
        if fallback == "give_up":
            return Decision(NAME, "give_up", stop=True, detections=(detection,))
        return None

    def _soft_repair(self, context: StepContext, proposal, detections) -> Decision | None:
        candidates = [d for d in detections if d.confidence >= float(self.p["threshold"])]
        if not candidates or self.soft_repairs >= int(self.p["max_repairs"]):
            return None
        cooling = self.last_soft_step is not None and context.step - self.last_soft_step <= int(self.p["cooldown"])
        if cooling and not proposal.finish:  # stopping ends the episode: never let a cooldown wave it through
            return None
        detection = max(candidates, key=lambda d: d.confidence)
        lessons = self.playbook.retrieve(detection.failure_type, detection.labels, int(self.p["k"])) if self.playbook else []
        message = soft_repair_message(context, detection, lessons, int(self.p["window"]), int(self.p["top_actions"]))
        ids = tuple(item.lesson.id for item in lessons)
        self.verifier.watch(context.step, detection, ids, context.score)
        self.failing_actions[context.step] = proposal.action
        self.soft_repairs += 1
        self.last_soft_step = context.step
        self.last_soft_type = detection.failure_type
        return Decision(NAME, "soft_repair", message=message, detections=(detection,),
                        details={"lessons": list(ids), "why": [item.reason for item in lessons]})

    @hookimpl
    def verify_recovery(self, outcome: StepOutcome):
        results = []
        for verdict in self.verifier.observe(outcome):
            w = verdict.watch
            lesson = None
            if self.playbook is not None and not self.playbook.read_only:
                for lesson_id in w.lesson_ids:
                    self.playbook.record_outcome(lesson_id, verified=True, helped=verdict.resolved)
                if verdict.resolved and self.p["update_playbook"]:
                    lesson = self._store_lesson(verdict)
            results.append(Verification(NAME, w.repair_step, w.detection.failure_type,
                                        "resolved" if verdict.resolved else "unresolved", verdict.evidence, lesson))
        return results

    def _store_lesson(self, verdict) -> dict:
        draft = self.summarise(verdict, self.failing_actions.get(verdict.watch.repair_step, ""))
        s = self.start
        provenance = {"run": s.ids.run_id, "env": s.ids.env, "task": s.ids.task_id, "episode": s.ids.episode_id,
                      "step": verdict.watch.repair_step}
        lesson_id = self.playbook.add(draft.failure_type, draft.labels, draft.trigger, draft.principle,
                                      subtype=draft.subtype, provenance=provenance)
        return {"id": lesson_id, "failure_type": draft.failure_type, "labels": list(draft.labels),
                "subtype": draft.subtype, "trigger": draft.trigger, "principle": draft.principle,
                "provenance": provenance, "playbook": str(s.playbook)}
