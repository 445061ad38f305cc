"""The failure taxonomy shared by detectors, the playbook and the methods.

A failure has a type and one or more retrieval labels. Plugins may add labels to a
type or new types with `register_failure_type` (e.g. an env's own output-format failures).
"""

from __future__ import annotations
from playground.core.errors import PlaygroundError

FAILURE_TYPES: dict[str, set[str]] = {
    "action_validity": {"invalid_action", "unparseable_action", "wrong_schema"},
    "progress": {"repetition_or_looping", "planning_stall", "over_exploration", "termination_miscalibration"},
    "grounding": {"hallucination", "objective_drift", "reasoning_action_mismatch"},
    "format_precision": {"prose_around_answer", "extra_fields", "wrong_tag_count", "unknown_tag", "unparseable_number"},
    # Procedural knowledge without a diagnosed failure, e.g. imported ACE playbooks (one label per ACE section).
    "procedure": {"strategies_and_hard_rules", "apis_to_use", "code_snippets_and_templates", "common_mistakes",
                  "heuristics_and_workflows", "verification_checklist", "troubleshooting_and_pitfalls", "others"},
}


class UnknownFailure(PlaygroundError, ValueError):
    """A failure type or label that is not in the taxonomy."""


def register_failure_type(failure_type: str, labels: set[str] | list[str]) -> None:
    """Add a failure type, or more labels to an existing one."""
    FAILURE_TYPES.setdefault(failure_type, set()).update(labels)


def check_failure(failure_type: str, labels: tuple[str, ...] | list[str] = ()) -> None:
    """Raise UnknownFailure naming the unknown type or label and the valid choices."""
    if failure_type not in FAILURE_TYPES:
        raise UnknownFailure(f"unknown failure type {failure_type!r}; choose from: {', '.join(sorted(FAILURE_TYPES))}")
    unknown = [label for label in labels if label not in FAILURE_TYPES[failure_type]]
    if unknown:
        raise UnknownFailure(f"unknown label(s) {', '.join(map(repr, unknown))} for failure type {failure_type!r}; "
                             f"choose from: {', '.join(sorted(FAILURE_TYPES[failure_type]))}")
