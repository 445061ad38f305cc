"""The failure types and labels Sentry's detectors report, declared once for the registry.

Each label carries the general advice a repair gives, the trigger of a lesson about it
(`{verb}`: the failing action's verb) and what counts as resolved (for the LLM verifier).
The action-validity labels are repaired by the ranked action view, not learned from, so
they have no trigger or resolution. Sentry reads all of it back from the host's registry.
"""

from __future__ import annotations

from playground.core.labels import FailureLabel, FailureType
from playground.host_api import default_labels

TYPES = (
    FailureType("action_validity", "action_validity", "the action is not one the env accepts"),
    FailureType("progress", "progress", "the agent stops making progress towards the goal"),
    FailureType("grounding", "grounding", "the agent acts on what it has not seen or the goal does not ask"),
)

LABELS = (
    FailureLabel(
        "invalid_action", "action_validity",
        advice="That action is not available here. Choose exactly one of the valid actions listed."),
    FailureLabel(
        "unparseable_action", "action_validity",
        advice="Your reply did not contain a single well-formed action. Reply with one valid action only."),
    FailureLabel(
        "wrong_schema", "action_validity",
        advice="The action does not match the schema the env accepts (an unknown tool or API, an unknown or missing "
               "argument, or a syntax error). Fix the call using the valid names and signatures given."),
    FailureLabel(
        "repetition_or_looping", "progress",
        advice="You are repeating actions that already produced their result. Do something that changes the situation.",
        trigger="the agent repeats '{verb} ...' and the observation stops changing",
        resolved_when="the agent stopped repeating the looped action and did something new that changed the situation"),
    FailureLabel(
        "planning_stall", "progress",
        advice="Your recent actions changed nothing. Pick the next concrete step of your plan that changes the world.",
        trigger="several actions in a row ('{verb} ...') change nothing in the world",
        resolved_when="the agent took actions that changed the world instead of idling"),
    FailureLabel(
        "over_exploration", "progress",
        advice="You are exploring without acting on what you found. Act on the objects the goal needs.",
        trigger="the agent keeps moving and inspecting ('{verb} ...') without acting on what it found",
        resolved_when="the agent started acting on what it found instead of wandering"),
    FailureLabel(
        "termination_miscalibration", "progress",
        advice="The task is not finished yet. Check the goal: what remains to be done?",
        trigger="the agent wants to stop while the visible score shows the task unfinished",
        resolved_when="the agent kept working on the task instead of stopping early"),
    FailureLabel(
        "hallucination", "grounding",
        advice="Your action refers to something you have not observed. Only act on things you have seen.",
        trigger="the agent acts on an object it has never observed ('{verb} ...')",
        resolved_when="the agent only acted on things it had observed"),
    FailureLabel(
        "objective_drift", "grounding",
        advice="You are acting on things the goal does not mention. Return to the objects the goal names.",
        trigger="the agent handles objects the goal never mentions ('{verb} ...')",
        resolved_when="the agent went back to the objects the goal names"),
    FailureLabel(
        "reasoning_action_mismatch", "grounding",
        advice="Your action does not do what your reasoning says. Make the action match your intended target.",
        trigger="the agent's stated target differs from what its action '{verb} ...' touches",
        resolved_when="the agent's actions matched its stated targets"),
)



def label_text(label: str, field: str, default: str = "") -> str:
    """What the host's registry says about `label` in `field` ("advice", "trigger" or
    "resolved_when"), or `default` when the label is not declared or leaves it empty."""
    declared = default_labels().get(label)
    text = getattr(declared, field) if declared is not None else ""
    return text or default
