"""DARC's LLM diagnoser (`darc diagnose --diagnoser llm`): a judge model names the failure mode of dev traces.

Each failed profiling episode is summarised blind (the goal, then each step's action, the
first line of what came back and whether the env rejected it; no reward, score or
outcome, and no grade text the env prints: every observation goes through the env
provider's `remove_grade_text`) and the judge is asked which of the candidate modes (those
with an admissible intervention on the env) explains the failure, as one JSON object
`{"mode": "<mode>" | "none", "why": "..."}`. The modes are described from the failure-label
registry: the failure types that count towards each mode, their descriptions and labels.
A reply that names no candidate counts as no mode. The family's mode is the one the judge
names for strictly the most failed episodes; otherwise there is no dominant mode. Each
episode's verdict keeps why it counted as it did (`reason`) and the judge's own `why`, so a
reply with no JSON object can be told from one naming an off-list mode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Callable

from playground.core.events import Event, ResetEvent, StepEvent
from playground.core.labels import LabelRegistry
from playground.core.payloads import keep_text
from playground.host_api import CALL_FAILED, ChatModel, ask_structured, build_judge_model, json_object_in, show_episode
from playground.plugins.darc.profile import NO_DOMINANT, mode_order

HEAD_STEPS, TAIL_STEPS = 8, 22
REPLY_CHARS = 200  # how much of a judge's reply a verdict keeps
ROLE = "darc.diagnoser"  # as its judge calls are counted


def diagnosis_schema(modes: list[str]) -> dict:
    """The JSON schema of the judge's reply: one of the candidate modes (or "none") and a short why."""
    return {"type": "object", "properties": {"mode": {"type": "string", "enum": [*modes, "none"]},
                                             "why": {"type": "string", "maxLength": REPLY_CHARS}},
            "required": ["mode", "why"], "additionalProperties": False}
SYSTEM = ("You diagnose why an agent failed a task in a text environment. You read its trace and name the one "
          "failure mode that best explains the failure. Answer with one JSON object only: "
          '{"mode": "<one of the modes>" or "none", "why": "<one short sentence>"}.')


def make_model(base_url: str | None, model: str | None, local: bool) -> ChatModel:
    """The judge model: an OpenAI-compatible endpoint (`base_url` + `model`) or the embedded local model."""
    if base_url and not model:
        raise ValueError("--judge-base-url needs --judge-model too")
    if not base_url and not local:
        raise ValueError("--diagnoser llm needs a judge: --judge-base-url URL --judge-model NAME, or --judge-local")
    return build_judge_model({"judge_base_url": base_url or "", "judge_model": model or "", "judge_local": local},
                             "darc diagnoser", max_tokens=120, retries=4)


def summarise_trace(events: list[Event], remove_grade_text: Callable[[str], str] = keep_text) -> str:
    """A blind summary of one episode's trace: goal, then action -> first line of the observation, read without
    the grade text its env prints (`remove_grade_text`, the env provider's)."""
    goal = next((e.goal for e in events if isinstance(e, ResetEvent)), "")
    steps = [e for e in events if isinstance(e, StepEvent)]
    lines = []
    for e in steps:
        observation = remove_grade_text(e.observation).strip()
        first = observation.splitlines()[0][:140] if observation else ""
        flag = "  [rejected]" if not e.valid_action else ""
        lines.append(f"{e.step}. {e.action[:120]!s} -> {first}{flag}")
    if len(lines) > HEAD_STEPS + TAIL_STEPS:
        lines = lines[:HEAD_STEPS] + [f"... ({len(lines) - HEAD_STEPS - TAIL_STEPS} steps left out) ..."] \
            + lines[-TAIL_STEPS:]
    return f"Goal: {goal}\nSteps ({len(steps)}):\n" + ("\n".join(lines) or "(none)")


def describe_modes(modes: list[str], labels: LabelRegistry) -> str:
    """One line per mode: the failure types counting towards it (from the registry), with their labels."""
    lines = []
    for mode in modes:
        types = [t for t in labels.types() if labels.mode_of(t) == mode]
        parts = []
        for name in types:
            declared = labels.failure_type(name)
            description = declared.description if declared is not None else ""
            parts.append(f"{name} ({description}; labels: {', '.join(sorted(labels.labels_of(name)))})")
        lines.append(f"- {mode}: " + ("; ".join(parts) if parts else "no declared failure types"))
    return "\n".join(lines)


def majority(modes: Sequence[str | None]) -> str | None:
    """The mode named strictly most often (None is no vote; a tie at the top is no mode): how DARC's LLM diagnoser
    takes a family's verdict from its episodes'."""
    ranked = Counter(mode for mode in modes if mode is not None).most_common()
    if not ranked or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


class LLMDiagnoser:
    """Asks a judge model for the failure mode of each failed dev episode, then takes the majority."""

    def __init__(self, model: ChatModel, labels: LabelRegistry, name: str = "",
                 remove_grade_text: Callable[[str], str] = keep_text) -> None:
        self.model = model
        self.labels = labels
        self.name = name or getattr(model, "model", type(model).__name__)
        self.remove_grade_text = remove_grade_text  # the env provider's: no grade text reaches the judge

    def diagnose_episode(self, modes: list[str], events: list[Event]) -> dict[str, Any]:
        """The judge's verdict on one episode: {"mode": a candidate or None, "reason": why it counts so,
        "why": the judge's own sentence}. The reply is asked for as an object of `diagnosis_schema` (the
        candidates an enum) by `ask_structured`. A failed call, a reply with no JSON object, "none", a mode
        that is not a candidate and a reply otherwise breaking the schema all give mode None, each with its
        own reason."""
        user = ("Failure modes:\n" + describe_modes(modes, self.labels) + "\n\nTrace:\n"
                + summarise_trace(events, self.remove_grade_text)
                + "\n\nWhich failure mode explains this failure? Reply with the JSON object only.")
        show_episode(self.model, events)  # the instrument's judge answers about this episode; any other model: nothing
        reply = ask_structured(self.model, ROLE, SYSTEM, user, diagnosis_schema(modes), max_tokens=160)
        if reply.problem == "call_failed":
            error = str(reply.error).removeprefix(f"{CALL_FAILED}: ")
            return {"mode": None, "reason": f"the judge call failed: {error}", "why": ""}
        value = reply.value if reply.value is not None else json_object_in(reply.text)
        if value is None:
            return {"mode": None, "reason": f"no JSON object in the reply: {reply.text.strip()[:REPLY_CHARS]!r}",
                    "why": ""}
        mode, why = value.get("mode"), str(value.get("why", ""))[:REPLY_CHARS]
        if reply.value is not None and mode in modes:
            return {"mode": mode, "reason": f"named {mode}", "why": why}
        if mode is None or mode == "none":
            return {"mode": None, "reason": "named no mode", "why": why}
        if not isinstance(mode, str) or mode not in modes:
            return {"mode": None, "reason": f"named {mode!r}, not one of the candidate modes", "why": why}
        return {"mode": None, "reason": str(reply.error), "why": why}  # a candidate, in a reply breaking the schema

    def diagnose_family(self, modes: list[str], failed: list[tuple[dict, list[Event]]]) -> dict[str, Any]:
        """{"mode", "why", "per_episode"}: the judge's verdict per failed episode, and the family's majority."""
        per_episode = [self.diagnose_episode(modes, events) for _, events in failed]
        votes = Counter(v["mode"] for v in per_episode if v["mode"] is not None)
        mode = majority([v["mode"] for v in per_episode])
        if mode is not None:
            why = f"{mode}: the judge named it for {votes[mode]} of {len(failed)} failed episodes"
        elif not votes:
            why = f"{NO_DOMINANT}: the judge named no mode for the {len(failed)} failed episodes"
        else:
            tied = sorted((m for m, n in votes.items() if n == max(votes.values())), key=mode_order)
            why = f"{NO_DOMINANT}: the judge named {' and '.join(tied)} equally often"
        return {"mode": mode, "why": why, "per_episode": per_episode}
