"""Sentry's rule-based failure detectors over the last W steps and the proposed action.

Each detector is a function `(view, proposal, window) -> Detection | None` over a
`BlindView` (`plugins/sentry/blind.py`): what the agent sees, never the reward, the
score, `max_score` or `won`, nor the grade text an env prints (score lines, win banners:
the env's `remove_grade_text` removes it before a view reaches a detector). Action
validity is checked first; progress and grounding detectors only run on valid actions.
Confidence is a rough prior for how often the rule is right, used by routing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from playground.core.actions import env_accepts, kind_of
from playground.core.payloads import Detection, Proposal, StepContext
from playground.plugins.sentry.blind import BlindTurn, BlindView, blind_view

DETECTOR = "sentry"
STOP_WORDS = {"the", "a", "an", "to", "from", "into", "in", "on", "with", "of", "and", "at", "for", "it", "i", "will",
              "my", "me", "then", "next", "now", "this", "that", "is", "be", "should", "let", "plan", "step", "says",
              "one", "you", "your", "there", "here", "some", "any", "all", "what", "which", "we", "our", "so", "if",
              "not"}
MAX_ACTION_WORDS = 12
INSTRUMENTAL_KINDS = ("look", "move", "access")  # never off-goal: reading, walking, opening the way
# What a page says back when the agent's own finishing action went through: WebShop's purchase confirmation
# ("Thank you for shopping with us! You bought ..."). It is the result of the agent's own buy, printed whatever the
# purchase scores, so it is not a grade (its score sentence is, and the env's `remove_grade_text` removes it). Win
# banners and verdicts ("*** The End ***", "you won", "well done", "congratulations", "task completed", "mission
# accomplished") are grades: they are not here, and the env's `remove_grade_text` keeps them from any detector.
# Completion is judged from the agent's own stop, never from a banner.
COMPLETION = re.compile(r"\bthank you for (shopping|your purchase)\b", re.I)


@dataclass(frozen=True)
class Window:
    """The last W turns of an episode plus what the detectors derive from them."""

    turns: tuple[BlindTurn, ...]
    goal: str
    seen_words: frozenset[str]  # words of the goal, every observation so far and the admissible actions
    first_observation: str = ""  # the observation right after reset


def make_window(context: BlindView | StepContext, size: int, first_observation: str = "") -> Window:
    """Return the last `size` turns and the text the agent has seen so far."""
    context = blind_view(context)
    seen = " ".join([context.goal, first_observation, context.observation, *(t.observation for t in context.history),
                     *(context.admissible_actions or ())])
    return Window(context.history[-size:], context.goal.lower(), frozenset(words(seen)), first_observation)


def words(text: str) -> list[str]:
    """Return the content words of a text (lowercase, no stop words)."""
    return [w for w in re.findall(r"[a-z][a-z'-]*", text.lower()) if w not in STOP_WORDS]


def object_words(action: str) -> set[str]:
    """Return the words of an action past its verb."""
    return set(words(action)[1:])


def goal_entities(view: BlindView) -> set[str]:
    """The goal's entities: goal words that the actions on offer or taken name as objects (or
    directions), so the goal's framing text does not count; every content word of the goal
    where the env lists no actions."""
    goal = set(words(view.goal))
    actions = [*(view.admissible_actions or ()), *(t.action for t in view.history)]
    if not actions:
        return goal
    return goal & {w for a in actions for w in object_words(a)}


def action_kind(action: str, action_kinds=None) -> str:
    """The action's kind as the env's `action_kinds` gives it, or "" (not admissible, or no kinds)."""
    return kind_of(action, action_kinds) if action_kinds else ""


def turn_kind(turn: BlindTurn) -> str:
    """The kind of a finished turn's action, as the loop recorded it from the env's `action_kinds`."""
    return turn.kind


def _quote(turns: tuple[BlindTurn, ...], proposal: Proposal) -> str:
    steps = [f"step {t.step}: {t.action!r}" for t in turns[-3:]]
    return "; ".join([*steps, f"proposed: {proposal.action!r}"])


# -- action validity ------------------------------------------------------------------


def detect_invalid_action(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """Unparseable actions, and actions the env will not accept: not in its admissible list, or, where
    that list is a cut of what the env accepts, rejected by the env's own check (`env_accepts`)."""
    if proposal.finish:
        return None
    action = proposal.action.strip()
    admissible = context.admissible_actions
    accepted = env_accepts(action, admissible, context.schema_problems, context.admissible_complete)
    if admissible is not None and action and accepted:
        return None
    if _unparseable(action):
        return Detection(DETECTOR, "action_validity", ("unparseable_action",), 1.0,
                         f"unparseable action {proposal.action!r}", subtype="unparseable")
    if admissible is not None and accepted is False:
        subtype = "unknown_verb" if _verb(action) not in {_verb(a) for a in admissible} else "bad_argument"
        evidence = (f"{action!r} is not among the {len(admissible)} admissible actions" if context.admissible_complete
                    else "; ".join(p.message for p in context.schema_problems or ()))
        return Detection(DETECTOR, "action_validity", ("invalid_action",), 1.0, evidence, subtype=subtype)
    return None


def detect_schema_problems(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """An action the env's schema check rejects before it runs (unknown API, unknown or missing argument,
    syntax error): read from the action and the env's schema, any action format. Where the env lists
    admissible actions, its check is a validity verdict on commands instead (`detect_invalid_action`)."""
    problems = context.schema_problems
    if proposal.finish or not problems or context.admissible_actions is not None:
        return None
    return Detection(DETECTOR, "action_validity", ("wrong_schema",), 1.0,
                     "; ".join(f"{p.kind}: {p.message}" for p in problems), subtype=problems[0].kind)


def _unparseable(action: str) -> bool:
    """Empty, several lines, too many words, or markup outside a trailing `[argument]` (e.g. `search[a|b]` is fine)."""
    outside_argument = re.sub(r"\[[^\]]*\]$", "[]", action)
    return (not action or "\n" in action or len(action.split()) > MAX_ACTION_WORDS
            or re.search(r"[<>{}|]|^action\s*:", outside_argument, re.I) is not None)


def _verb(action: str) -> str:
    return re.split(r"[\s\[]", action.strip().lower(), maxsplit=1)[0]


# -- progress ------------------------------------------------------------------------


def detect_repetition(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """The same action proposed again from a state where it was already tried (a loop).

    "Same state" means the observation before the earlier try equals the current one,
    so repeating the action cannot bring anything new; an A-B-A-B cycle is caught too.
    """
    if proposal.finish or not window.turns:
        return None
    history = context.history
    first = len(history) - len(window.turns)
    before = [history[i - 1].observation if i > 0 else window.first_observation for i in range(first, len(history))]
    tries = [t for t, pre in zip(window.turns, before) if t.action == proposal.action and pre == context.observation]
    if not tries:
        return None
    actions = [t.action for t in window.turns]
    cycle = len(actions) >= 3 and proposal.action == actions[-2] and actions[-1] == actions[-3] != proposal.action
    confidence = min(0.95, 0.6 + 0.1 * len(tries) + (0.1 if cycle else 0.0))
    return Detection(DETECTOR, "progress", ("repetition_or_looping",), confidence,
                     f"{proposal.action!r} was already tried {len(tries)}x from this same situation; "
                     + _quote(window.turns, proposal), subtype="cycle" if cycle else "repeat")


def detect_stall(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """A streak of actions that change nothing (looking, invalid actions), and another one proposed."""
    recent = window.turns[-3:]
    if proposal.finish or len(recent) < 3:
        return None
    idle = [not t.valid_action or turn_kind(t) == "look" for t in recent]
    proposed_idle = not proposal.action or action_kind(proposal.action, context.action_kinds) == "look"
    if all(idle) and proposed_idle:
        return Detection(DETECTOR, "progress", ("planning_stall",), 0.8,
                         "four actions in a row that change nothing: " + _quote(recent, proposal), subtype="idle")
    return None


def detect_inspection_when_ready(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """Reading more about an item already inspected once, with every choice made and the finish action on offer.

    Needs env action kinds ("open", "look", "finish"); envs without them never trigger it.
    """
    kinds = context.action_kinds
    if proposal.finish or context.open_choices or "finish" not in kinds.values():
        return None
    if action_kind(proposal.action, kinds) != "look":
        return None
    since_open = []
    for turn in reversed(context.history):
        if turn_kind(turn) in ("open", "search"):
            break
        since_open.append(turn)
    looks = [t for t in since_open if turn_kind(t) == "look"]
    if not looks:
        return None
    return Detection(DETECTOR, "progress", ("planning_stall",), 0.7,
                     f"every choice is made and the item was already inspected {len(looks)}x; "
                     + _quote(window.turns, proposal), subtype="inspect_when_ready")


def detect_over_exploration(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """Wandering: many different moves and inspections in the window, at least two moves."""
    proposed = action_kind(proposal.action, context.action_kinds)
    if proposal.finish or proposed not in ("look", "move", "page"):
        return None
    kinds = [turn_kind(t) for t in window.turns] + [proposed]
    if proposed == "page" and kinds[-4:] == ["page"] * 4:
        return Detection(DETECTOR, "progress", ("over_exploration",), 0.7,
                         "paging through results without opening any: " + _quote(window.turns, proposal),
                         subtype="paging")
    if len(window.turns) < 5:
        return None
    actions = [t.action for t in window.turns] + [proposal.action]
    exploring = [a for a, k in zip(actions, kinds) if k in ("look", "move")]
    moves = kinds.count("move")
    if len(exploring) >= 5 and len(set(exploring)) >= 4 and moves >= 2:
        return Detection(DETECTOR, "progress", ("over_exploration",), 0.65,
                         f"{len(exploring)} of the last {len(actions)} actions only explore: "
                         + _quote(window.turns, proposal),
                         subtype="wander")
    return None


def detect_early_stop(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """The agent declares the task done while nothing it has seen says its own finishing action went through.

    Read from the agent's own stop, its observations (without grade text) and the goal, never
    the score or a win banner: a stop before any action; a finish action with choices still
    open (WebShop); a stop when none of the last observations confirms a finishing action of
    the agent's (`COMPLETION`: a purchase confirmed), all the more suspect (higher confidence)
    when some of the goal's entities were never even observed.
    """
    if not proposal.finish and action_kind(proposal.action, context.action_kinds) == "finish" and context.open_choices:
        return Detection(DETECTOR, "progress", ("termination_miscalibration",), 0.9,
                         f"{proposal.action!r} ends the task with choices still open: "
                         f"{', '.join(context.open_choices)}",
                         subtype="finish_with_open_choices")
    if not proposal.finish:
        return None
    if not context.history:
        return Detection(DETECTOR, "progress", ("termination_miscalibration",), 0.9,
                         "agent stops before taking any action", subtype="early_stop")
    recent = [context.observation, *(t.observation for t in context.history[-2:])]
    if any(COMPLETION.search(text) for text in recent):
        return None
    observed = set(words(" ".join([window.first_observation, context.observation,
                                   *(t.observation for t in context.history)])))
    unobserved = sorted(goal_entities(context) - observed)
    if unobserved:
        return Detection(DETECTOR, "progress", ("termination_miscalibration",), 0.9,
                         f"agent stops with no completion message and goal entities never observed: "
                         f"{', '.join(unobserved[:5])}", subtype="early_stop")
    return Detection(DETECTOR, "progress", ("termination_miscalibration",), 0.8,
                     "agent stops with no completion message in the last observations", subtype="early_stop")


# -- reasoning and grounding ---------------------------------------------------------


def detect_hallucination(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """The action names things never seen in the goal, observations or admissible actions."""
    unseen = sorted(w for w in object_words(proposal.action) if w not in window.seen_words)
    if proposal.finish or not unseen or action_kind(proposal.action, context.action_kinds) == "search":
        return None
    return Detection(DETECTOR, "grounding", ("hallucination",), 0.75,
                     f"{proposal.action!r} names {', '.join(unseen)}, never observed", subtype="unseen_object")


def detect_objective_drift(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """Handling unrelated things the goal never mentions, two steps out of the last three.

    Moves, looks and access actions (kinds "move", "look", "access") are instrumental and
    never count; the off-goal actions must touch different objects (a coherent sub-plan on
    one object, like taking an ingredient from a fridge, is not drift).
    """
    goal_words = set(words(window.goal))

    def off_goal(action: str, kind: str) -> set[str]:
        objs = object_words(action)
        if not objs or kind in INSTRUMENTAL_KINDS or objs & goal_words:
            return set()
        return objs

    # web pages (action_format "web") have no objects to drift to
    proposed = action_kind(proposal.action, context.action_kinds)
    if proposal.finish or context.action_format == "web" or not off_goal(proposal.action, proposed):
        return None
    recent = [off_goal(t.action, turn_kind(t)) for t in window.turns[-2:]] + [off_goal(proposal.action, proposed)]
    scattered = [objs for objs in recent if objs]
    if len(scattered) < 2 or any(a & b for i, a in enumerate(scattered) for b in scattered[i + 1:]):
        return None
    return Detection(DETECTOR, "grounding", ("objective_drift",), 0.7,
                     "acting on unrelated objects the goal never mentions: " + _quote(window.turns, proposal),
                     subtype="off_goal")


def detect_reasoning_action_mismatch(context: BlindView, proposal: Proposal, window: Window) -> Detection | None:
    """The thought names a target the action does not touch."""
    if (proposal.finish or context.action_format == "web"
            or action_kind(proposal.action, context.action_kinds) == "look"):
        return None
    entities = {w for a in [*(context.admissible_actions or ()),
                                                      *(t.action for t in context.history if t.valid_action)]
                                          for w in object_words(a)}
    verbs = {a.split(" ", 1)[0] for a in (context.admissible_actions or ())} | set(words(proposal.action)[:1])
    named = {w for w in words(proposal.thought) if w in entities and w not in verbs and len(w) > 2}
    action_objects = object_words(proposal.action)
    if named and action_objects and not (named & action_objects):
        return Detection(DETECTOR, "grounding", ("reasoning_action_mismatch",), 0.6,
                         f"thought names {', '.join(sorted(named))} but the action is {proposal.action!r}",
                         subtype="target_mismatch")
    return None


Detector = Callable[[BlindView, Proposal, Window], Detection | None]
VALIDITY_DETECTORS: tuple[Detector, ...] = (detect_invalid_action,)
PROGRESS_DETECTORS: tuple[Detector, ...] = (detect_early_stop, detect_repetition, detect_stall,
                                            detect_inspection_when_ready,
                                            detect_over_exploration)
GROUNDING_DETECTORS: tuple[Detector, ...] = (detect_hallucination, detect_objective_drift,
                                             detect_reasoning_action_mismatch)


def run_detectors(context: BlindView | StepContext, proposal: Proposal, window_size: int, screen: bool = True,
                  first_observation: str = "") -> list[Detection]:
    """Validity first (the env's schema check, then admissibility); if the action is valid and `screen` is on,
    the progress and grounding rules (only the progress rules for code).

    A `StepContext` is first reduced to its `BlindView`, so no rule can read a reward or a
    score. `first_observation` is the observation after reset (the state before the first action).
    """
    return [d for _, d in named_detections(context, proposal, window_size, screen, first_observation)]


def detector_name(detector: Detector) -> str:
    """A rule's short name: its function's name without `detect_` (e.g. "repetition")."""
    return detector.__name__.removeprefix("detect_")


def named_detections(context: BlindView | StepContext, proposal: Proposal, window_size: int, screen: bool = True,
                     first_observation: str = "") -> list[tuple[str, Detection]]:
    """`run_detectors`, with each detection paired with the name of the rule that made it (`detector_name`)."""
    context = blind_view(context)
    window = make_window(context, window_size, first_observation)
    schema = detect_schema_problems(context, proposal, window)
    if schema is not None:  # the env's own schema check: whatever the format, nothing else matters first
        return [(detector_name(detect_schema_problems), schema)]

    def fire(detectors: tuple[Detector, ...]) -> list[tuple[str, Detection]]:
        return [(detector_name(f), d) for f in detectors if (d := f(context, proposal, window))]

    if context.action_format == "code":  # programs: only the progress rules apply (repeats, stops)
        return fire(PROGRESS_DETECTORS) if screen else []
    invalid = fire(VALIDITY_DETECTORS)
    if invalid or not screen:
        return invalid
    return fire(PROGRESS_DETECTORS + GROUNDING_DETECTORS)
