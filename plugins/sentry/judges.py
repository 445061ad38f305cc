"""LLM-backed replacements for Sentry's rule-based parts: detector, intervention-need check, recovery verifier,
lesson summariser.

Selected with harness parameters `detector=llm`, `need_judge=llm`, `verifier=llm`, `summariser=llm`, and a
judge model given by `judge_base_url` + `judge_model` (any OpenAI-compatible endpoint) or
`judge_local=true` (the embedded GGUF model), else the agent's own model (`judge_model_or_none`).
Every judge declares the JSON schema of its reply and asks with `ask_structured` (the embedded
model decodes under the schema's grammar; an endpoint gets `response_format`); an unusable reply
means "no detection" / "decide by the rules" / "unresolved" / "use the template", never a crash.
Every judge reads blind records (`blind.py`): actions and observations, no reward, no score, no `won`.
"""

from __future__ import annotations

from typing import Any

from playground.core.labels import UnknownFailure
from playground.core.payloads import Detection, Proposal
from playground.host_api import (
    ChatModel,
    ask_structured,
    build_judge_model,
    default_labels,
    history_start,
    judge_or_shared,
)
from playground.plugins.sentry.blind import BlindOutcome, BlindView
from playground.plugins.sentry.detectors import Window
from playground.plugins.sentry.labels import label_text
from playground.plugins.sentry.lessons import LessonDraft, summarise
from playground.plugins.sentry.verifier import RecoveryVerifier, Verdict

# the roles' names, as their judge calls are counted (`judge_replies` in the records and the summary)
DETECTOR_ROLE, NEED_CHECK_ROLE = "sentry.detector", "sentry.need_check"
VERIFIER_ROLE, SUMMARISER_ROLE = "sentry.verifier", "sentry.summariser"
EVIDENCE = {"type": "string", "maxLength": 160}  # a short quote: bounded, so a small model's reply ends in time
# What the need check's reason is decoded under: a quoted span of a few words, since each character a judge decodes
# is paid every time it is asked; the prompt still states EVIDENCE, so the decision before it is the one it was
# (docs/methods/sentry.md, "What the judges decode")
SHORT_EVIDENCE = {"type": "string", "maxLength": 60}


def _object(properties: dict[str, dict]) -> dict:
    """A JSON schema of an object with exactly these properties, all required."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def make_judge_model(params: dict[str, Any]) -> ChatModel:
    """Return the judge model named by the harness parameters; ValueError says what is missing."""
    return build_judge_model(params, "sentry", retries=int(params.get("judge_retries", 3)))


def judge_model_or_none(params: dict[str, Any]) -> ChatModel | None:
    """The judge model: the explicit one when the parameters name it (`judge_base_url` + `judge_model`, or
    `judge_local`; ValueError as `make_judge_model`), else the agent's own model where the runner shares it
    (`shared_agent_model`), else None."""
    return judge_or_shared(params, "sentry", retries=int(params.get("judge_retries", 3)))


def _steps_text(context: BlindView, window: Window, history: str = "window", size: int = 5) -> str:
    """The steps a judge is shown, a line each: the window's last W (`window`), or from the last multiple of W
    `size` (`blocks`: W to 2W-1 steps, so that from one step to the next the prompt changes only past the newest
    step, and the judge's context need not evaluate the rest again)."""
    turns = window.turns if history == "window" else context.history[history_start(len(context.history), size):]
    lines = [f"- {t.action} -> {t.observation.strip().splitlines()[0][:160] if t.observation.strip() else ''}"
             for t in turns]
    return "\n".join(lines) or "(no steps yet)"


class LLMDetector:
    """Asks the judge model whether the proposed action shows a progress or grounding failure."""

    ROLE = DETECTOR_ROLE

    def __init__(self, model: ChatModel, history: str = "window", size: int = 5) -> None:
        self.model = model
        self.history, self.size = history, size  # the steps shown (`_steps_text`)
        self.labels = default_labels()
        progress, grounding = sorted(self.labels.labels_of("progress")), sorted(self.labels.labels_of("grounding"))
        self.SYSTEM = ("You diagnose failures of an agent acting in a text environment: does its proposed action show "
                       "a progress failure (it does not move towards the goal) or a grounding failure (it acts on "
                       "what it has not seen or misreads)? Say failure false when the action is fine. Labels for "
                       "progress: " + ", ".join(progress) + ". Labels for grounding: " + ", ".join(grounding) + ".")
        detection: dict[str, dict[str, Any]] = {
            "failure_type": {"type": "string", "enum": ["progress", "grounding"]},
            "labels": {"type": "array", "items": {"type": "string", "enum": progress + grounding}, "maxItems": 3},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "evidence": EVIDENCE,
        }
        # the prompt states one object; the reply is decoded so that `{"failure": false}` ends there (most steps
        # are fine), and only a detection goes on to name the rest
        self.described = _object({"failure": {"type": "boolean"}, **detection})
        self.schema = {"anyOf": [_object({"failure": {"const": False}}),
                                 _object({"failure": {"const": True}, **detection})]}

    def detect(self, context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
        """Return the judge's detection, or None (no failure, or an unusable reply)."""
        user = (f"Goal: {context.goal}\nLast steps:\n{_steps_text(context, window, self.history, self.size)}\n"
                f"Current observation: {context.observation[:400]}\nProposed thought: {proposal.thought}\n"
                f"Proposed action: {'(stop)' if proposal.finish else proposal.action}")
        answer = ask_structured(self.model, self.ROLE, self.SYSTEM, user, self.schema, described=self.described).value
        if not answer or not answer["failure"]:
            return None
        failure_type = answer["failure_type"]
        labels = tuple(dict.fromkeys(answer["labels"]))  # once each, in the judge's order
        try:
            self.labels.check(failure_type, labels)  # each label must belong to the failure type named
        except UnknownFailure:
            return None
        if not labels:
            return None
        return Detection("sentry-llm-judge", failure_type, labels, float(answer["confidence"]),
                         answer["evidence"][:300], subtype="llm")


class LLMNeedCheck:
    """Asks the judge model whether a detected failure needs an intervention now (Sentry's need check).

    `decide` returns (True, why) to intervene, (False, why) to let the agent act, or (None, why) when the
    reply is unusable: the harness then decides by its rules."""

    ROLE = NEED_CHECK_ROLE
    SYSTEM = ("You supervise an agent acting in a text environment. A detector flagged its proposed action as a "
              "possible failure. Decide whether the agent needs an intervention now (a message that changes its "
              "next action) or should be left to act: intervene only when the flagged failure is real and "
              "interrupting is worth it.")
    DESCRIBED = _object({"intervene": {"type": "boolean"}, "why": EVIDENCE})
    SCHEMA = _object({"intervene": {"type": "boolean"}, "why": SHORT_EVIDENCE})

    def __init__(self, model: ChatModel, history: str = "window", size: int = 5) -> None:
        self.model = model
        self.history, self.size = history, size  # the steps shown (`_steps_text`)

    def decide(self, view: BlindView, detection: Detection, proposal: Proposal,
               window: Window) -> tuple[bool | None, str]:
        """Whether to intervene on `detection` now, and the judge's reason; None when the reply is unusable."""
        labels = ", ".join(detection.labels) or "-"
        user = (f"Goal: {view.goal}\nLast steps:\n{_steps_text(view, window, self.history, self.size)}\n"
                f"Current observation: {view.observation[:400]}\nProposed thought: {proposal.thought}\n"
                f"Proposed action: {'(stop)' if proposal.finish else proposal.action}\n"
                f"Flagged: {detection.failure_type} ({labels}), confidence {detection.confidence:.2f}; "
                f"evidence: {detection.evidence[:200] or '-'}\nDoes the agent need an intervention now?")
        reply = ask_structured(self.model, self.ROLE, self.SYSTEM, user, self.SCHEMA, described=self.DESCRIBED)
        if reply.value is None:
            return None, f"unusable reply: {reply.error}"[:300]
        return bool(reply.value["intervene"]), reply.value["why"][:300]


class LLMVerifier(RecoveryVerifier):
    """Watches repairs on the rule verifier's schedule, but lets the judge model give the verdict.

    The judge is shown the blind outcomes only (actions and observations; no reward, no `won`)."""

    ROLE = VERIFIER_ROLE
    SYSTEM = ("You check whether an agent recovered from a diagnosed failure. You see only its actions and what "
              "it observed. Say resolved true only when the steps show it.")
    # (its evidence stays EVIDENCE: it is what the summariser writes the lesson from)
    SCHEMA = _object({"resolved": {"type": "boolean"}, "evidence": EVIDENCE})

    def __init__(self, model: ChatModel, horizon: int = 10, quiet_steps: int = 3, admission: str = "window") -> None:
        super().__init__(horizon, quiet_steps, admission)
        self.model = model
        self.outcomes: list[BlindOutcome] = []
        self.goal_text = ""

    def start_episode(self, first_observation: str, goal: str = "") -> None:
        """Start watching a new episode; the judge is shown its goal (task-relevant progress needs it)."""
        super().start_episode(first_observation, goal)
        self.goal_text = goal

    def observe(self, outcome: BlindOutcome) -> list[Verdict]:
        """Record the step; when a watch is due for a verdict, ask the judge for it."""
        self.outcomes.append(outcome)
        return [self._ask(v) for v in super().observe(outcome)]

    def finish(self) -> list[Verdict]:
        """The episode ended: ask the judge about the repairs the rules would judge now."""
        return [self._ask(v) for v in super().finish()]

    def _ask(self, verdict: Verdict) -> Verdict:
        if verdict.resolved is None:  # not verified at all (the no-verification ablation)
            return verdict
        label = verdict.watch.detection.labels[0]
        since = [o for o in self.outcomes if o.step >= verdict.watch.repair_step]
        steps = "\n".join(f"- step {o.step}: {o.action or '(stop)'} -> {o.observation.strip()[:160]}" for o in since)
        user = (f"Goal: {self.goal_text}\n"
                f"Diagnosed failure: {label}, repaired at step {verdict.watch.repair_step}. It counts as resolved "
                f"when {label_text(label, 'resolved_when', 'the failure stopped and progress resumed')}, by "
                f"grounded progress towards the goal.\n"
                f"Steps since the repair:\n{steps or '(none: the episode ended)'}")
        answer = ask_structured(self.model, self.ROLE, self.SYSTEM, user, self.SCHEMA).value
        if answer is None:
            return Verdict(verdict.watch, False, "judge: no usable answer")
        return Verdict(verdict.watch, answer["resolved"], f"judge: {answer['evidence'][:200]}")


class LLMSummariser:
    """Asks the judge model for a reusable trigger and principle; falls back to the template."""

    ROLE = SUMMARISER_ROLE
    SYSTEM = ("You write reusable lessons about agent failures: a trigger (when this pattern appears ...) and a "
              "principle (what to do instead ...). Do not name the episode's specific objects or places.")
    SCHEMA = _object({"trigger": {"type": "string", "minLength": 1, "maxLength": 160},
                      "principle": {"type": "string", "minLength": 1, "maxLength": 240}})

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    def summarise(self, verdict: Verdict, failing_action: str) -> LessonDraft:
        """Return a lesson draft written by the model (the template's when the reply is unusable)."""
        template = summarise(verdict, failing_action)
        label = verdict.watch.detection.labels[0]
        user = (f"Failure: {label} ({label_text(label, 'advice')}), repaired at step {verdict.watch.repair_step}. "
                f"Failing action: {failing_action!r}. Recovered with: {verdict.watch.progress_action!r}. "
                f"Evidence: {verdict.evidence}")
        answer = ask_structured(self.model, self.ROLE, self.SYSTEM, user, self.SCHEMA, max_tokens=250).value or {}
        trigger, principle = str(answer.get("trigger", "")).strip(), str(answer.get("principle", "")).strip()
        if not trigger or not principle:
            return template
        return LessonDraft(template.failure_type, template.labels, template.subtype, trigger[:500], principle[:1000])
