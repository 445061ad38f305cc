"""DARC's LLM diagnoser (`darc profile --diagnoser llm`): a judge model names the failure mode of dev traces.

Each failed profiling episode is summarised blind (the goal, then each step's action, the
first line of what came back and whether the env rejected it; no reward, score or
outcome) and the judge is asked which of the candidate modes (those with an admissible
intervention on the env) explains the failure, as one JSON object
`{"mode": "<mode>" | "none", "why": "..."}`. The modes are described from the failure-label
registry: the failure types that count towards each mode, their descriptions and labels.
A reply that names no candidate counts as no mode. The family's mode is the one the judge
names for strictly the most failed episodes; otherwise there is no dominant mode.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from playground.agents.client import ChatModel, HTTPChatModel, LLMError, LocalChatModel, ask_json
from playground.core.labels import LabelRegistry
from playground.plugins.darc.profile import NO_DOMINANT, mode_order

HEAD_STEPS, TAIL_STEPS = 8, 22
SYSTEM = ("You diagnose why an agent failed a task in a text environment. You read its trace and name the one "
          "failure mode that best explains the failure. Answer with one JSON object only: "
          '{"mode": "<one of the modes>" or "none", "why": "<one short sentence>"}.')


def make_model(base_url: str | None, model: str | None, local: bool) -> ChatModel:
    """The judge model: an OpenAI-compatible endpoint (`base_url` + `model`) or the embedded local model."""
    if base_url:
        if not model:
            raise ValueError("--judge-base-url needs --judge-model too")
        return HTTPChatModel(base_url, model, temperature=0.0, max_tokens=120)
    if local:
        try:
            return LocalChatModel(max_tokens=120)
        except LLMError as exc:
            raise ValueError(str(exc)) from None
    raise ValueError("--diagnoser llm needs a judge: --judge-base-url URL --judge-model NAME, or --judge-local")


def summarise_trace(events: list[dict]) -> str:
    """A blind summary of one episode's trace: goal, then action -> first line of the observation."""
    goal = next((str(e.get("goal", "")) for e in events if e["type"] == "reset"), "")
    steps = [e for e in events if e["type"] == "step"]
    lines = []
    for e in steps:
        observation = str(e.get("observation", "")).strip()
        first = observation.splitlines()[0][:140] if observation else ""
        flag = "  [rejected]" if not e.get("valid_action", True) else ""
        lines.append(f"{e['step']}. {str(e.get('action', ''))[:120]!s} -> {first}{flag}")
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


class LLMDiagnoser:
    """Asks a judge model for the failure mode of each failed dev episode, then takes the majority."""

    def __init__(self, model: ChatModel, labels: LabelRegistry, name: str = "") -> None:
        self.model = model
        self.labels = labels
        self.name = name or getattr(model, "model", type(model).__name__)

    def diagnose_episode(self, modes: list[str], events: list[dict]) -> str | None:
        """The mode the judge names for one episode, or None (no mode, or a reply naming no candidate)."""
        user = ("Failure modes:\n" + describe_modes(modes, self.labels) + "\n\nTrace:\n" + summarise_trace(events)
                + "\n\nWhich failure mode explains this failure? Reply with the JSON object only.")
        value = ask_json(self.model, SYSTEM, user)
        mode = value.get("mode") if value is not None else None
        return mode if isinstance(mode, str) and mode in modes else None

    def diagnose_family(self, modes: list[str], failed: list[tuple[dict, list[dict]]]) -> dict[str, Any]:
        """{"mode", "why", "per_episode"}: the judge's mode per failed episode, and the family's majority."""
        per_episode = [self.diagnose_episode(modes, events) for _, events in failed]
        votes = Counter(m for m in per_episode if m is not None)
        ranked = sorted(votes.items(), key=lambda item: (-item[1], mode_order(item[0])))
        if not ranked:
            return {"mode": None, "why": f"{NO_DOMINANT}: the judge named no mode for the {len(failed)} failed "
                                         f"episodes", "per_episode": per_episode}
        if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
            tied = [m for m, n in ranked if n == ranked[0][1]]
            return {"mode": None, "why": f"{NO_DOMINANT}: the judge named {' and '.join(tied)} equally often",
                    "per_episode": per_episode}
        mode, n = ranked[0]
        return {"mode": mode, "why": f"{mode}: the judge named it for {n} of {len(failed)} failed episodes",
                "per_episode": per_episode}
