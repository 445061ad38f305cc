"""Parse an ALFWorld task sentence into task type, target object and destination.

ALFWorld's goals come from alfworld's templates ("put a hot apple in fridge", "find two
pen and put them in drawer", "examine the cd with the desklamp", ...). Sentences that no
template matches (human annotations) fall back to keywords, with the object and the
destination taken from the words that name things in the admissible commands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from playground.envs.alfworld.data import TASK_TYPES

# task type -> (appliance word in commands, command verb); the appliance is a receptacle type name
TRANSFORM_OF = {
    "pick_clean_then_place_in_recep": ("sinkbasin", "clean"),
    "pick_heat_then_place_in_recep": ("microwave", "heat"),
    "pick_cool_then_place_in_recep": ("fridge", "cool"),
}
LAMP_WORDS = ("desklamp", "floorlamp")

_W = r"([a-z]+)"
TEMPLATES: tuple[tuple[str, re.Pattern], ...] = tuple((t, re.compile(p)) for t, p in (
    ("pick_clean_then_place_in_recep", rf"put a clean {_W} (?:in|on) {_W}"),
    ("pick_clean_then_place_in_recep", rf"clean (?:some|a|the) {_W} and put it (?:in|on) {_W}"),
    ("pick_heat_then_place_in_recep", rf"put a hot {_W} (?:in|on) {_W}"),
    ("pick_heat_then_place_in_recep", rf"heat (?:some|a|the) {_W} and put it (?:in|on) {_W}"),
    ("pick_cool_then_place_in_recep", rf"put a cool {_W} (?:in|on) {_W}"),
    ("pick_cool_then_place_in_recep", rf"cool (?:some|a|the) {_W} and put it (?:in|on) {_W}"),
    ("pick_two_obj_and_place", rf"put two {_W} (?:in|on) {_W}"),
    ("pick_two_obj_and_place", rf"find two {_W} and put them (?:in|on) {_W}"),
    ("look_at_obj_in_light", rf"look at {_W} under the {_W}"),
    ("look_at_obj_in_light", rf"examine the {_W} with the {_W}"),
    ("pick_and_place_simple", rf"put (?:a|an|some|the) {_W} (?:in|on) {_W}"),
))


@dataclass(frozen=True)
class Goal:
    """A parsed task: type, target object type, destination receptacle type (or lamp type)."""

    task_type: str
    target: str
    destination: str = ""

    @property
    def appliance(self) -> str:
        """The receptacle type of the transformation (sinkbasin, microwave, fridge), or ""."""
        return TRANSFORM_OF.get(self.task_type, ("", ""))[0]

    @property
    def transform_verb(self) -> str:
        """The command verb of the transformation (clean, heat, cool), or ""."""
        return TRANSFORM_OF.get(self.task_type, ("", ""))[1]

    @property
    def is_look(self) -> bool:
        """True for look_at_obj_in_light (the destination is a lamp)."""
        return self.task_type == "look_at_obj_in_light"


def kind_of(name: str) -> str:
    """Return the type word of an entity name ("apple 1" -> "apple")."""
    return name.rsplit(" ", 1)[0] if name and name.rsplit(" ", 1)[-1].isdigit() else name


def parse_goal(text: str, names: set[str] | frozenset[str] = frozenset()) -> Goal:
    """Return the task a goal sentence describes; `names` are type words seen in commands (for the fallback)."""
    sentence = " ".join(text.lower().replace(".", " ").split())
    for task_type, pattern in TEMPLATES:
        match = pattern.search(sentence)
        if match:
            return Goal(task_type, match.group(1), match.group(2))
    return _fallback(sentence, names)


def _fallback(sentence: str, names: set[str] | frozenset[str]) -> Goal:
    words = re.findall(r"[a-z]+", sentence)
    mentioned = [w for w in words if w in names or w.rstrip("s") in names]
    mentioned = [w if w in names else w.rstrip("s") for w in mentioned]
    if any(w in ("lamp", "light", *LAMP_WORDS) for w in words):
        task_type = "look_at_obj_in_light"
    elif any(w in ("clean", "wash", "rinse") for w in words):
        task_type = "pick_clean_then_place_in_recep"
    elif any(w in ("hot", "heat", "heated", "warm", "microwave") for w in words):
        task_type = "pick_heat_then_place_in_recep"
    elif any(w in ("cool", "cold", "chill", "chilled", "cooled") for w in words):
        task_type = "pick_cool_then_place_in_recep"
    elif any(w in ("two", "both", "pair") for w in words):
        task_type = "pick_two_obj_and_place"
    else:
        task_type = TASK_TYPES[0]
    if task_type == "look_at_obj_in_light":
        lamp = next((w for w in mentioned if w in LAMP_WORDS), "desklamp")
        target = next((w for w in mentioned if w not in LAMP_WORDS), "")
        return Goal(task_type, target, lamp)
    target = mentioned[0] if mentioned else ""
    destination = next((w for w in reversed(mentioned) if w != target), "")
    return Goal(task_type, target, destination)
