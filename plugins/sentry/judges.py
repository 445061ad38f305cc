"""LLM-backed replacements for Sentry's rule-based parts: detector, recovery verifier, lesson summariser.

Selected with harness parameters `detector=llm`, `verifier=llm`, `summariser=llm`, and a
judge model given by `judge_base_url` + `judge_model` (any OpenAI-compatible endpoint) or
`judge_local=true` (the embedded GGUF model). Every judge asks for a small JSON object;
a reply that does not parse means "no detection" / "unresolved" / "use the template",
never a crash. Every judge reads blind records (`blind.py`): actions and observations, no
reward, no score, no `won`.
"""

from __future__ import annotations

from typing import Any

from playground.agents.client import ChatModel, HTTPChatModel, LLMError, LocalChatModel, ask_json
from playground.core.labels import UnknownFailure
from playground.core.payloads import Detection, Proposal
from playground.host.manager import default_labels
from playground.plugins.sentry.blind import BlindOutcome, BlindView
from playground.plugins.sentry.detectors import Window
from playground.plugins.sentry.labels import label_text
from playground.plugins.sentry.lessons import LessonDraft, summarise
from playground.plugins.sentry.verifier import RecoveryVerifier, Verdict


def make_judge_model(params: dict[str, Any]) -> ChatModel:
    """Return the judge model named by the harness parameters; ValueError says what is missing."""
    if params.get("judge_base_url"):
        if not params.get("judge_model"):
            raise ValueError("sentry: judge_base_url needs judge_model too (--param judge_model=NAME)")
        return HTTPChatModel(str(params["judge_base_url"]), str(params["judge_model"]),
                             temperature=0.0, max_tokens=200, retries=int(params.get("judge_retries", 3)))
    if params.get("judge_local"):
        try:
            return LocalChatModel(max_tokens=200)
        except LLMError as exc:
            raise ValueError(f"sentry: {exc}") from None
    raise ValueError("sentry: an LLM judge needs --param judge_base_url=URL --param judge_model=NAME, "
                     "or --param judge_local=true")


def _steps_text(context: BlindView, window: Window) -> str:
    lines = [f"- {t.action} -> {t.observation.strip().splitlines()[0][:160] if t.observation.strip() else ''}"
             for t in window.turns]
    return "\n".join(lines) or "(no steps yet)"


class LLMDetector:
    """Asks the judge model whether the proposed action shows a progress or grounding failure."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.labels = default_labels()
        self.SYSTEM = ("You diagnose failures of an agent acting in a text environment. Answer with one JSON object: "
                       '{"failure": true|false, "failure_type": "progress"|"grounding", "labels": [...], '
                       '"confidence": 0..1, "evidence": "a short quote"}. Labels for progress: '
                       + ", ".join(sorted(self.labels.labels_of("progress"))) + ". Labels for grounding: "
                       + ", ".join(sorted(self.labels.labels_of("grounding"))) + ".")

    def detect(self, context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
        """Return the judge's detection, or None (no failure, or an unusable reply)."""
        user = (f"Goal: {context.goal}\nLast steps:\n{_steps_text(context, window)}\n"
                f"Current observation: {context.observation[:400]}\nProposed thought: {proposal.thought}\n"
                f"Proposed action: {'(stop)' if proposal.finish else proposal.action}")
        answer = ask_json(self.model, self.SYSTEM, user)
        if not answer or not answer.get("failure"):
            return None
        failure_type = str(answer.get("failure_type", ""))
        labels = tuple(str(label) for label in answer.get("labels") or ())
        try:
            self.labels.check(failure_type, labels)
        except UnknownFailure:
            return None
        if not labels or failure_type not in ("progress", "grounding"):
            return None
        try:
            confidence = min(1.0, max(0.0, float(answer.get("confidence", 0.5))))
        except (TypeError, ValueError):
            confidence = 0.5
        return Detection("sentry-llm-judge", failure_type, labels, confidence, str(answer.get("evidence", ""))[:300],
                         subtype="llm")


class LLMVerifier(RecoveryVerifier):
    """Watches repairs on the rule verifier's schedule, but lets the judge model give the verdict.

    The judge is shown the blind outcomes only (actions and observations; no reward, no `won`)."""

    SYSTEM = ("You check whether an agent recovered from a diagnosed failure. You see only its actions and what "
              'it observed. Answer with one JSON object: {"resolved": true|false, "evidence": "a short quote"}.')

    def __init__(self, model: ChatModel, horizon: int = 10, quiet_steps: int = 3, admission: str = "window") -> None:
        super().__init__(horizon, quiet_steps, admission)
        self.model = model
        self.outcomes: list[BlindOutcome] = []

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
        steps = "\n".join(f"- {o.action or '(stop)'} -> {o.observation.strip()[:160]}" for o in since)
        user = (f"Diagnosed failure: {label}. It counts as resolved when "
                f"{label_text(label, 'resolved_when', 'the failure stopped and progress resumed')}.\n"
                f"Steps since the repair:\n{steps or '(none: the episode ended)'}")
        answer = ask_json(self.model, self.SYSTEM, user) or {}
        resolved = answer.get("resolved") is True
        return Verdict(verdict.watch, resolved, f"judge: {str(answer.get('evidence', 'no usable answer'))[:200]}")


class LLMSummariser:
    """Asks the judge model for a reusable trigger and principle; falls back to the template."""

    SYSTEM = ("You write reusable lessons about agent failures. Do not name the episode's specific objects or "
              'places. Answer with one JSON object: {"trigger": "when this pattern appears ...", '
              '"principle": "what to do instead ..."}.')

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    def summarise(self, verdict: Verdict, failing_action: str) -> LessonDraft:
        """Return a lesson draft written by the model (the template's when the reply is unusable)."""
        template = summarise(verdict, failing_action)
        label = verdict.watch.detection.labels[0]
        user = (f"Failure: {label} ({label_text(label, 'advice')}). Failing action: {failing_action!r}. "
                f"Recovered with: {verdict.watch.progress_action!r}. Evidence: {verdict.evidence}")
        answer = ask_json(self.model, self.SYSTEM, user) or {}
        trigger, principle = str(answer.get("trigger", "")).strip(), str(answer.get("principle", "")).strip()
        if not trigger or not principle:
            return template
        return LessonDraft(template.failure_type, template.labels, template.subtype, trigger[:500], principle[:1000])
