"""Sentry's repair messages: the hard repair's ranked action view and the soft repair's advice.

Repairs read a `BlindView` (what the agent sees); a `StepContext` is reduced to one first.
"""

from __future__ import annotations

from rapidfuzz import fuzz

from playground.core.actions import fill_template, is_template
from playground.core.payloads import Detection, InterventionMessage, SchemaProblem, StepContext
from playground.plugins.sentry.blind import BlindView, blind_view
from playground.plugins.sentry.detectors import action_kind, object_words, words
from playground.plugins.sentry.labels import label_text


def rank_actions(context: BlindView | StepContext, top: int = 12, closest_to: str | None = None) -> list[str]:
    """Rank the admissible actions: goal-term overlap up, recently done and looping actions down.

    With `closest_to` (a rejected action), the actions most like it come first (rapidfuzz's ratio,
    to the nearest 10) and the goal ranking orders those alike. A template such as `search[...]`
    is offered filled with the goal's text.
    """
    context = blind_view(context)
    goal_terms = set(words(context.goal))
    recent = [t.action for t in context.history[-5:]]
    rejected = closest_to.lower() if closest_to is not None else None

    def score(action: str) -> tuple[float, float, str]:
        value = 2.0 * len(object_words(action) & goal_terms) + 0.5 * bool(set(words(action)[:1]) & goal_terms)
        value -= 1.5 * recent.count(action)  # recency and loop penalty
        value -= 0.5 if action_kind(action, context.action_kinds) == "look" else 0.0
        alike = round(fuzz.ratio(rejected, action.lower()), -1) if rejected is not None else 0.0
        return (-alike, -value, action)

    actions = [fill_template(a, context.goal) if is_template(a) else a for a in context.admissible_actions or ()]
    return sorted(actions, key=score)[:top]


def hard_repair_message(context: BlindView, detection: Detection, top: int,
                        closest_to: str | None = None, restrict: bool = False) -> InterventionMessage:
    """Tell the agent its action is invalid and show the best-ranked valid actions, those most like
    `closest_to` (the rejected action) first when it is given (or, where the env lists no actions and its
    schema check found problems with the call, name each problem and the closest valid calls).

    The ranked actions are a view the agent rewrites from; with `restrict` the agent must pick one of them."""
    if context.schema_problems and context.admissible_actions is None:
        return schema_repair_message(context.schema_problems, detection)
    ranked = tuple(rank_actions(context, top, closest_to))
    lines = [f"Your action was rejected: {detection.evidence}.", label_text(detection.labels[0], "advice"),
             "Valid actions, most promising first:", *(f"- {a}" for a in ranked)]
    return InterventionMessage("hard_repair", "\n".join(line for line in lines if line), detection.failure_type, ranked,
                               detection.labels, restrict=restrict)


def schema_repair_message(problems: tuple[SchemaProblem, ...], detection: Detection) -> InterventionMessage:
    """Tell the agent its action was not sent: each schema problem, where it is and the closest valid
    names, then the signatures of the closest valid calls. The message's labels are the detection's plus
    the problems' kinds, so simple agents can see what was wrong without parsing the text."""
    lines = ["Your action was not run: it does not match the schema of the calls this env accepts."]
    for problem in problems:
        where = f" (line {problem.line})" if problem.line and problem.kind != "syntax_error" else ""
        close = f" Closest valid: {', '.join(problem.alternatives)}." if problem.alternatives else ""
        lines.append(f"- {problem.kind}{where}: {problem.message}.{close}")
    signatures = tuple(dict.fromkeys(s for problem in problems for s in problem.signatures))
    if signatures:
        lines += ["Closest valid calls:", *(f"- {s}" for s in signatures)]
    lines.append(label_text(detection.labels[0], "advice"))
    labels = tuple(dict.fromkeys((*detection.labels, *(problem.kind for problem in problems))))
    return InterventionMessage("hard_repair", "\n".join(line for line in lines if line), detection.failure_type, (),
                               labels)


def fresh_actions(context: BlindView, window: int, top: int) -> tuple[str, ...]:
    """The best-ranked admissible actions not taken in the last `window` steps."""
    recent = {t.action for t in context.history[-window:]}
    return tuple(a for a in rank_actions(context, len(context.admissible_actions or ())) if a not in recent)[:top]


def soft_repair_message(context: BlindView, detection: Detection, lessons: list, window: int,
                        top: int = 12, shortlist: bool = False) -> InterventionMessage:
    """Guidance, as the paper's soft repair: advice for the failure type, the last `window` steps as
    evidence and the retrieved lessons; the agent then chooses its own corrected step.

    With `shortlist` (a named variant, not the paper's configuration) a progress repair also
    lists the best-ranked actions not tried recently and restricts the agent to them."""
    label = detection.labels[0]
    lines = [f"A possible failure was detected ({detection.failure_type}: {', '.join(detection.labels)}).",
             label_text(label, "advice"), f"Evidence: {detection.evidence}", "Your last steps:"]
    for turn in context.history[-window:]:
        first_line = turn.observation.strip().splitlines()[0] if turn.observation.strip() else ""
        lines.append(f"- step {turn.step}: {turn.action} -> {first_line[:160]}")
    if lessons:
        lines.append("Lessons from earlier recoveries of this kind of failure:")
        for item in lessons:
            lines.append(f"- [{', '.join(item.lesson.labels)}] when {item.lesson.trigger}: {item.lesson.principle}")
    offered = fresh_actions(context, window, top) if shortlist and detection.failure_type == "progress" else ()
    if offered:
        lines.append("Actions you have not tried recently: " + ", ".join(offered))
    lines.append("Continue the task: propose a corrected next action.")
    labels = tuple(sorted({lesson_label for item in lessons for lesson_label in item.lesson.labels}))
    return InterventionMessage("soft_repair", "\n".join(line for line in lines if line), detection.failure_type,
                               offered, labels, restrict=bool(offered))
